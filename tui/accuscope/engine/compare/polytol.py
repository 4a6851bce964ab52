"""Polygraphy's own rule, when asked (`--atol A --rtol R --check-error-stat S`, as `polygraphy run` takes
them): a compared tensor fails exactly when Polygraphy's default comparator (SimpleCompareFunc,
polygraphy/comparator/compare.py, 0.53) prints `FAILED | Output: ...` for it.

Polygraphy compares the run under test (output0) with the reference (output1, its `--load-outputs`):

    absdiff = |cast_up(out0) - cast_up(out1)|    (float16 -> float32, 8/16-bit ints -> int32, uint32 -> int64)
    reldiff = absdiff / |cast_up(out1)|, out1's zeros raised by 2.220446049250313e-16 (float outputs)

- `elemwise` (its default): fails when any element has (absdiff > atol or NaN) and (reldiff > rtol or
  NaN), compared in the outputs' own precision (numpy's weak scalars: float32 against atol as float32);
- `max`, `mean`, `median`, `quantile`: fails when (stat(absdiff) > atol or NaN) and (stat(reldiff) > rtol
  or NaN), the statistic (the max in the array's dtype, the mean summed in float32, the median cast up,
  numpy's quantile at `--error-quantile` Q, linear interpolation) against the tolerance as Python floats.
Its defaults: atol = rtol = 1e-5, elemwise, Q = 0.99. Matching infinities differ by NaN (its
infinities_compare_equal is off by default), so they fail.

Per output (its `--atol [OUT:]A ...`, the same for --rtol, --check-error-stat, --error-quantile): a value
is one word or {output: value} with the default under "" (`_per_output`, as Polygraphy's
parse_arglist_to_dict), and each output takes its own, else the default, else Polygraphy's
(util.value_or_from_dict: `rule`, `Rule.of`); the row of an output given values of its own carries them
(pg_atol, pg_rtol, pg_stat) and `broken` judges it at them, the rest at the thresholds.

Shapes (its `_align_shapes`): an output whose shape differs from the reference's fails uncompared; with
`--no-shape-check` the reference is permuted or reshaped to the candidate's shape (util.try_match_shape:
`aligned`) and the values judged, and a size that differs cannot be (Polygraphy raises; here it fails).

The columns (one pass of numpy over each compared pair, only when asked: comparison.execute): `pg_abs`
and `pg_rel`, the checked statistic (the max for elemwise, as Polygraphy's "Minimum Required
Tolerance"), and `pg_mismatch`, the elements beyond both tolerances. The count is made at the
comparison's tolerances: like Polygraphy's own elemwise verdict it cannot be re-thresholded.
`Thresholds.set_polygraphy` makes the judging Polygraphy's (`pg_abs > A`, `pg_rel > R`, with elemwise
`pg_mismatch > 0`), `broken` is the rule on the table (judgement.polygraphy_broken applies it), and the verdict is on every compared tensor, as
`polygraphy run` judges every output its results hold.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from accuscope.engine.compare.pair import Pair
    from accuscope.engine.compare.results import ResultTable

STATS = ("elemwise", "max", "mean", "median", "quantile")  # --check-error-stat's choices
ATOL = RTOL = 1e-5  # Polygraphy's defaults
STAT = "elemwise"
QUANTILE = 0.99  # --error-quantile's default
EPSILON = 2.220446049250313e-16  # what Polygraphy adds to the reference's zeros
COLUMNS = ("pg_abs", "pg_rel", "pg_mismatch")  # judged (and pg_atol, pg_rtol, pg_stat: an output's own values)


class Rule(NamedTuple):
    atol: float
    rtol: float
    stat: str
    quantile: float = QUANTILE  # quantile's q
    check_shapes: bool = True  # False: --no-shape-check
    own: tuple[tuple[str, Rule], ...] = ()  # (output, its rule) for each output given a value of its own

    def of(self, output: str) -> Rule:
        """The rule of the output of that name: its own, else this one (the default)."""
        return next((r for name, r in self.own if name == output), self)


PerOutput = float | str | dict  # a value, or {output: value} ("" the default) as Polygraphy parses them


def rule(atol: PerOutput | None, rtol: PerOutput | None, stat: PerOutput | None, quantile: PerOutput | None = None,
         no_shape_check: bool = False) -> Rule | None:
    """The rule a spec's `--atol/--rtol/--check-error-stat/--error-quantile/--no-shape-check` ask for
    (Polygraphy's defaults for those not given), each output named in a per-output value with its own
    (Polygraphy's util.value_or_from_dict: the output's value, else the default's, else Polygraphy's);
    None when none is given."""
    given = (atol, rtol, stat, quantile)
    if all(v is None for v in given) and not no_shape_check:
        return None

    def of(output: str) -> Rule:
        defaults: tuple[float | str, ...] = (ATOL, RTOL, STAT, QUANTILE)
        a, r, s, q = (_value_of(v, output, d) for v, d in zip(given, defaults))
        return Rule(float(a), float(r), str(s), float(q), not no_shape_check)
    names = sorted({name for v in given if isinstance(v, dict) for name in v} - {""})
    return of("")._replace(own=tuple((name, of(name)) for name in names))


def _value_of(value: PerOutput | None, output: str, default: float | str) -> float | str:
    if not isinstance(value, dict):
        return default if value is None else value
    return value.get(output, value.get("", default))


def _per_output(text: str, parse_one) -> PerOutput:
    """Polygraphy's `[OUT:]VALUE ...` (space-separated; an output's name is all before the last colon; a
    later value replaces an earlier): the one value when no output is named, else {output: value}, the
    default under ""."""
    found: dict[str, float | str] = {}
    for part in text.split():
        name, _, value = part.rpartition(":")
        found[name] = parse_one(value)
    if not found:
        raise ValueError("expected a value, or OUTPUT:VALUE per output")
    return found[""] if list(found) == [""] else found


def per_output_text(value: PerOutput) -> str:
    """The text `_per_output` reads back (the default first)."""
    if not isinstance(value, dict):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return " ".join(per_output_text(v) if not name else f"{name}:{per_output_text(v)}"
                    for name, v in sorted(value.items()))


def _stat_word(text: str) -> str:
    word = text.strip().lower()
    if word not in STATS:
        raise ValueError(f"'{text}': use one of {', '.join(STATS)} (Polygraphy's --check-error-stat)")
    return word


def _number(text: str, example: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number, e.g. {example}") from None


def _tolerance(text: str) -> float:
    value = _number(text, "1e-3")
    if not value >= 0:
        raise ValueError(f"'{text}': a tolerance is a number >= 0")
    return value


def _quantile(text: str) -> float:
    value = _number(text, "0.99")
    if not 0 <= value <= 1:
        raise ValueError(f"'{text}': a quantile is a number from 0 to 1 (Polygraphy's --error-quantile)")
    return value


PARSE_ONE = {"tol": _tolerance, "errorstat": _stat_word, "quantile": _quantile}  # spec's per-output kinds


def stored_problem(value: object, kind: str) -> str:
    """What is wrong with a per-output value as task.json keeps it (one value, or {output: value} with the
    default under ""), "" when nothing: each value held to its flag's own check (`PARSE_ONE[kind]`), a
    tolerance or quantile a JSON number, not text."""
    for output, one in (value.items() if isinstance(value, dict) else [("", value)]):
        try:
            if kind != "errorstat" and (isinstance(one, bool) or not isinstance(one, (int, float))):
                raise ValueError(f"{one!r} is not a number")
            PARSE_ONE[kind](str(one))
        except ValueError as exc:
            return f"output {output!r}: {exc}" if output else str(exc)
    return ""


def parse_stat(text: str) -> PerOutput:
    return _per_output(text, _stat_word)


def parse_tolerance(text: str) -> PerOutput:
    return _per_output(text, _tolerance)


def parse_quantile(text: str) -> PerOutput:
    return _per_output(text, _quantile)


def aligned(npu: np.ndarray, golden: np.ndarray, check_shapes: bool) -> tuple[np.ndarray, np.ndarray] | str:
    """The pair as Polygraphy compares it (SimpleCompareFunc._align_shapes), or why it fails the pair: shapes
    that differ fail, unless --no-shape-check, where the reference is permuted or reshaped to the shape of
    the run under test (util.try_match_shape) and a pair whose sizes differ cannot be compared."""
    if npu.shape == golden.shape:
        return npu, golden
    shapes = f"{list(npu.shape)} and {list(golden.shape)}"
    if check_shapes:
        return f"Polygraphy will not compare outputs of different shapes ({shapes}; --no-shape-check reshapes)"
    if npu.size != golden.size:
        return f"Polygraphy cannot reshape outputs of different sizes into one another ({shapes})"
    return npu, _match_shape(golden, npu.shape)


def _match_shape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Polygraphy's util.try_match_shape on an array of the same size: reshaped to the rank, permuted when
    its dimensions are the shape's in another order (each dimension taken by its first unused axis of
    that length), then reshaped."""
    if a.ndim != len(shape):
        a = a.reshape(shape)
    if sorted(a.shape) != sorted(shape):
        return a.reshape(shape)
    unused = dict(enumerate(a.shape))
    perm = []
    for length in shape:
        axis = next(i for i, d in unused.items() if d == length)
        del unused[axis]
        perm.append(axis)
    return np.transpose(a, perm).reshape(shape)


def _cast_up(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float16:
        return a.astype(np.float32)
    if a.dtype in (np.int8, np.uint8, np.int16, np.uint16):
        return a.astype(np.int32)
    return a.astype(np.int64) if a.dtype == np.uint32 else a


def cells(npu: np.ndarray, golden: np.ndarray, r: Rule) -> dict:
    """One pair's columns under the rule, Polygraphy's arithmetic step by step (see the module's text)."""
    out0, out1 = _cast_up(np.asarray(npu).reshape(-1)), _cast_up(np.asarray(golden).reshape(-1))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if out0.dtype == bool and out1.dtype == bool:
            absdiff = np.logical_xor(out0, out1)
            denominator = out1
        else:
            absdiff = np.abs(np.subtract(out0, out1))
            denominator = out1.copy()
            if denominator.dtype.kind == "f":
                denominator[denominator == 0] += EPSILON
            denominator = np.abs(denominator)
        reldiff = np.divide(absdiff, denominator)
        mismatches = (np.greater(absdiff, r.atol) | np.isnan(absdiff)) & (np.greater(reldiff, r.rtol) | np.isnan(reldiff))
        if not absdiff.size:
            return {"pg_abs": np.nan, "pg_rel": np.nan, "pg_mismatch": 0}
        return {"pg_abs": _stat(absdiff, r.stat, r.quantile), "pg_rel": _stat(reldiff, r.stat, r.quantile),
                "pg_mismatch": int(mismatches.sum())}


def _stat(diff: np.ndarray, stat: str, q: float) -> float:
    if stat == "mean":
        return float(np.mean(diff, dtype=np.float32))
    if stat == "median":
        return float(np.median(_cast_up(diff)))
    if stat == "quantile":
        return float(np.quantile(diff, q))
    return float(np.amax(_cast_up(diff)))  # max, and elemwise's "Minimum Required Tolerance"


def pair_cells(pairs: list[Pair], computed: list[dict], r: Rule) -> dict[int, dict]:
    """Plan row (an index of `pairs`, the plan's) -> its columns under the rule, for every pair compared (or
    not, its shapes differing): a pair Polygraphy does not compare (`aligned`) fails, with every element
    beyond (pg_abs and pg_rel inf) and its reason when the row has none."""
    found: dict[int, dict] = {}
    for row, pair in enumerate(pairs):
        if not computed[row] or pair.golden is None or pair.npu.problem or pair.golden.problem:
            continue
        own = r.of(pair.npu.tensor_name or pair.npu.op)  # Polygraphy's per-output values: the candidate's name
        both = aligned(np.asarray(pair.npu.load()), np.asarray(pair.golden.load()), r.check_shapes)
        if isinstance(both, str):
            found[row] = {"pg_abs": np.inf, "pg_rel": np.inf, "pg_mismatch": max(pair.npu.size, pair.golden.size)}
            if not computed[row].get("reason"):
                found[row]["reason"] = both
        else:
            found[row] = cells(*both, own)
        if own is not r:  # judged at its own tolerances (`broken`)
            found[row].update(own_cells(own))
    return found


def own_cells(own: Rule) -> dict:
    """The columns of an output given values of its own: the values it is judged at."""
    return {"pg_atol": own.atol, "pg_rtol": own.rtol, "pg_stat": own.stat}


def limit(table: ResultTable, key: str, i: int, value: float) -> float:
    """The limit row i is judged at for a threshold of `key` at `value`: an output's own tolerance
    (pg_atol, pg_rtol; elemwise's 0 mismatches) where it was given values of its own."""
    stat = table.columns.get("pg_stat")
    if key not in COLUMNS or stat is None or stat[i] == "":
        return value
    return 0.0 if key == "pg_mismatch" else float(table.numbers("pg_atol" if key == "pg_abs" else "pg_rtol")[i])


def broken(table: ResultTable, atol: float, rtol: float, mismatches: float | None, free: np.ndarray) -> np.ndarray:
    """Rows failing Polygraphy's rule: both statistics beyond their tolerance (NaN beyond, as
    Polygraphy's `isnan(diff) or diff > tol`) and, for elemwise (`mismatches`: the pg_mismatch
    threshold), more than that many elements beyond both; only rows the rule was computed on. An output
    given values of its own (pg_stat not empty) is judged at them (pg_atol, pg_rtol, its statistic),
    the rest at the thresholds'."""
    pg_abs, pg_rel, count = table.numbers("pg_abs"), table.numbers("pg_rel"), table.numbers("pg_mismatch")
    own_atol, own_rtol = table.numbers("pg_atol"), table.numbers("pg_rtol")
    stat = table.columns.get("pg_stat")
    own = np.zeros(len(table), dtype=bool) if stat is None else stat != ""  # an output with values of its own
    atols, rtols = np.where(own, own_atol, atol), np.where(own, own_rtol, rtol)
    elemwise = np.where(own, stat == "elemwise", mismatches is not None)
    allowed = np.where(own, 0, 0 if mismatches is None else mismatches)  # elemwise: mismatches allowed
    with np.errstate(invalid="ignore"):
        beyond = (np.isnan(pg_abs) | (pg_abs > atols)) & (np.isnan(pg_rel) | (pg_rel > rtols)) & (count >= 0)
        beyond &= ~elemwise | (count > allowed)
    return beyond & free
