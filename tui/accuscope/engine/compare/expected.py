"""The precision's own noise: a third side beside the NPU and the golden one.

The procedure MagicMind's Debugtools describe compares three runs: the device, the framework at the
device's precision, and the framework in fp32. An op whose error the framework at that precision
shows too does not suit the precision (keep it in higher precision); an op that errs on the device
only points at the device's implementation. `--expected PATH` (any source accuscope reads, e.g. the
reference run at fp16 or bf16, or an fp16 conversion of the reference model run by `accuscope run
--expected auto`) is that third run. Its tensors pair with the golden side's by the same identity
rules as the NPU side's (mapping.map_tensors), and every compared row gets two numbers:

- `exp_err`: the expected error, how far the expected side is from golden (the larger of 1 - cos and
  the relative Euclidean distance, judgement.badness's measure);
- `excess`: the row's own error over the expected one (floored at FLOOR, float32's resolution).

A row whose NPU tensor overflows (NaN/inf beyond golden's) has no error to divide: where the expected
side overflows there too, its expected error is inf and its excess the ratio of the two overflow
counts (1: the precision's own overflow); where it does not, the excess is inf.

A failing row whose excess is at most EXCESS_LIMIT is the precision's own error (judgement's
`expected` rows); the first failing row, the verdict's cause and the advisor's headline read them.
Cost: one more read of the expected and golden tensors, on the same kernel and threads as the
comparison's own pairs (comparison.execute runs them)."""
# lazy: engine.compare.mapping, engine.sides.registry
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.sources.tensor import SourceError, Tensor

if TYPE_CHECKING:
    from accuscope.engine.compare.pair import Pair
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.sides.side import Side

EXCESS_LIMIT = 2.0  # at most this many times the expected error: the precision itself
FLOOR = 1e-6  # an expected error below this is float32 noise: the excess divides by at least this
SIGNIFICANT = 1e-3  # a row's own error (max(1 - cos, red)) worth naming where it is past the limit
COLUMNS = ("exp_err", "excess")


def error(cos, red):
    """How far from agreeing, the one formula (rows, pairs, the verdict's worst, the excess): the larger
    of 1 - cos and the relative euclidean distance, either where the other is NaN, NaN when both are.
    Numbers or arrays alike."""
    with np.errstate(invalid="ignore"):
        return np.fmax(1.0 - np.asarray(cos, dtype=np.float64), np.asarray(red, dtype=np.float64))


def error_of(cells: dict) -> float:
    """A pair's error (`error`) from its computed cells."""
    return float(error(cells.get("cos", math.nan), cells.get("red", math.nan)))


def expected_options(spec: CompareSpec, golden: Side, npu: Side) -> dict[str, str] | None:
    """The format options the expected side is read with: the golden side's where it is in the golden
    side's format (the reference run, at another precision), else the NPU side's where it is in theirs;
    none for a format neither side has (each option belongs to one format)."""
    from accuscope.engine.sides.registry import detect
    kind = detect(spec.expected or "").kind
    if kind == golden.kind:
        return spec.golden_options
    return spec.npu_options if kind == npu.kind else None


def expected_tensors(spec: CompareSpec, golden: Side, npu: Side, pairs: list[Pair]) -> dict[int, Tensor]:
    """Plan row (an index of `pairs`, the plan's) -> the expected side's tensor paired with that row's
    golden tensor. SourceError when the expected side cannot be opened or pairs with nothing."""
    from accuscope.engine.compare.mapping import map_tensors
    from accuscope.engine.sides.registry import open_side
    if spec.expected is None:
        raise SourceError("no expected side was given (--expected)")
    try:
        side = open_side(spec.expected, pick=spec.pick, runner=spec.golden_runner, iteration=spec.iteration,
                         step=spec.step, rank=spec.rank, options=expected_options(spec, golden, npu))
    except SourceError as exc:
        raise SourceError(f"--expected: {exc}") from None
    by_golden: dict[int, Tensor] = {}
    by_name: dict[str, Tensor] = {}
    for pair in map_tensors(side, golden).pairs:
        if pair.golden is not None and not pair.npu.problem:
            by_golden.setdefault(id(pair.golden), pair.npu)
            by_name.setdefault(pair.npu.name, pair.npu)
    if not by_golden:
        raise SourceError(f"--expected {spec.expected}: none of its tensors pairs with the golden side's "
                          f"({side.kind}: {len(side.tensors):,} tensors; give the reference run at the candidate's "
                          "precision, named as the golden side is)")
    # a row's expected tensor: the one named as its NPU tensor (the same model's, as a QDQ candidate's
    # simulation is: several of its tensors may pair with one golden tensor, and a row the plan re-paired to
    # a fused chain's output is measured against that golden tensor too), else the first that pairs with its
    # golden tensor
    found = {}
    for row, p in enumerate(pairs):
        if p.golden is not None and not p.golden.problem:
            e = by_name.get(p.npu.name) or by_golden.get(id(p.golden))
            if e is not None:
                found[row] = e
    return found


def excess_cells(observed: dict, expected: dict) -> dict:
    """A row's expected error and excess from its own cells and the expected side's (both a pair's
    metric cells); {} when either error is unknown."""
    over, shared = _overflow(observed), _overflow(expected)
    if over:  # NaN/inf beyond golden's: the precision's own when its reference overflows as much
        return {"exp_err": math.inf if shared else error_of(expected), "excess": over / shared if shared else math.inf}
    seen, err = error_of(observed), error_of(expected)
    if math.isnan(seen) or math.isnan(err):
        return {}
    return {"exp_err": err, "excess": seen / max(err, FLOOR)}


def _overflow(cells: dict) -> int:
    """NaN/inf in a pair's NPU-side tensor beyond the golden one's (0 where the counts are unknown)."""
    npu, golden = cells.get("npu_nonfinite", -1), cells.get("golden_nonfinite", -1)
    return max(int(npu) - int(golden), 0) if npu is not None and golden is not None and npu >= 0 and golden >= 0 else 0


def within(excess: np.ndarray) -> np.ndarray:
    """Rows whose error is at most EXCESS_LIMIT times the expected one (NaN: not known, False)."""
    with np.errstate(invalid="ignore"):
        return excess <= EXCESS_LIMIT
