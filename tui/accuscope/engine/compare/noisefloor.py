"""Noise at the scale of the computation: a tensor whose reference values sit at the noise floor of the
operation that made them carries no signal to judge against itself.

A key projection's bias gradient is zero in exact arithmetic (softmax ignores a per-query shift of the
keys): fp32 gives it |values| ~1e-10, a bf16-autocast step ~1e-5, so every metric of that row, each
relative to the reference's own magnitude, calls it a total failure (cos 0.67, red 5e4), and so do
the calls that carry it on (its all_reduce, the division by the world size, the optimizer's update).
The error is rounding at the scale of the values the operation computed with, and that is the scale
to judge it at: the noise floor of a row is

    F = C * u * S   (and at least what its call's inputs carry in, below)

- u: the unit roundoff of the lowest float precision the table's NPU side holds (the step computed
  in it: bfloat16 2^-8, float16 2^-11, float32 2^-24);
- S: the largest reference RMS among the tensors of the row's call (its operands and its siblings:
  the bias gradient's call holds the weight gradient), the reference RMS being rmse / red;
- C = 16: rounding of a reduction over many terms (a gradient summed over tokens) grows with their
  count; 16 covers the corpus' reductions and leaves every planted bug failing (conformance corpus);
- what a call's inputs carry in: an output's floor is at least the sum of the floors of its call's
  inputs that are noise themselves (an all_reduce of noise adds the ranks' noise; a softmax of real
  scores carries nothing), the outputs of a call fed noise alone are noise up to that floor (an
  all_reduce of a near-zero gradient sums the ranks' noise), and rows holding the same tensor (the same error
  signature: step, rank, shape, rmse and red) share the largest floor among them, a few hops along the
  step's calls.

A failing row (not NaN/inf) is at the floor when its reference RMS is within F / C (no more than one
rounding of its operands: zero in exact arithmetic, a cancellation; a softmax's small probabilities or a
normalization's output are far above it) and its error RMS within F: judged against the floor, it is
noise, not a failure, and the summary says so. In float32 against float32 u is 6e-8: only exact
cancellations qualify, never a planted bug's error. A network output is never at the floor: the verdict
judges it on its values (a sigmoid of large negative logits is small, not zero in exact arithmetic).
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.compare.results import ResultTable

C = 16.0
HOPS = 4  # rows of one tensor and calls' inputs to outputs: an all_reduce, a division, the optimizer's update
# unit roundoff by the dtype's name (as the result table's dtype columns spell it)
ROUNDOFF = (("bfloat16", 2.0 ** -8), ("float16", 2.0 ** -11), ("half", 2.0 ** -11), ("float32", 2.0 ** -24),
            ("float", 2.0 ** -24), ("float64", 2.0 ** -53), ("double", 2.0 ** -53))


def roundoff(dtypes) -> float | None:
    """The unit roundoff of the lowest float precision among `dtypes` (names); None without a float."""
    found = [u for name in set(dtypes) for key, u in ROUNDOFF if key in str(name).lower()]
    return max(found) if found else None


def at_floor(table: ResultTable, candidates: np.ndarray) -> np.ndarray:
    """Rows of `candidates` (failing, not NaN/inf) whose reference values and error both sit within the
    noise floor of their computation (see the module's text)."""
    found = np.zeros(len(table), dtype=bool)
    if not candidates.any() or "rmse" not in table.present or "red" not in table.present:
        return found
    u = roundoff(table.codes("npu_dtype").values)
    if u is None:
        return found
    c = table.columns
    rmse, red = table.numbers("rmse"), table.numbers("red")
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(np.isinf(red), 0.0, rmse / red)  # the reference's RMS (0 where it is all zeros)
    g = np.where(np.isfinite(g), g, np.nan)
    step = c["step"] if "step" in c else np.zeros(len(table), dtype=np.int64)
    rank = c["rank"] if "rank" in c else np.zeros(len(table), dtype=np.int64)
    calls = _ids(step, rank, np.asarray(c["npu_op"], dtype=object))
    scale = np.zeros(calls.max() + 1)
    np.fmax.at(scale, calls, np.nan_to_num(g, nan=0.0))
    floor = C * u * scale[calls]
    known = np.isfinite(rmse) & np.isfinite(red)
    same = _ids(step, rank, np.asarray(c["shape"], dtype=object), np.round(rmse, 12), np.round(red, 9))
    same = np.where(known, same, -1 - np.arange(len(table)))  # rows without metrics share with none
    same = np.unique(same, return_inverse=True)[1]
    inputs = np.asarray(c["io"], dtype=object) == "input"
    tensors = inputs & np.isfinite(g)  # the call's inputs that hold values (not an argument)
    signal = np.zeros(len(table), dtype=bool)  # outputs of a call fed noise alone: noise at the inputs' floor
    for _ in range(HOPS):
        shared = np.zeros(same.max() + 1)
        np.fmax.at(shared, same, floor)
        floor = np.fmax(floor, shared[same])
        noise = tensors & (g <= floor / C)  # inputs that are noise themselves
        carried = np.zeros(calls.max() + 1)
        np.add.at(carried, calls[noise], floor[noise])
        clean = np.zeros(calls.max() + 1, dtype=np.int64)
        np.add.at(clean, calls[tensors & ~noise], 1)
        floor = np.where(inputs, floor, np.fmax(floor, carried[calls]))
        signal = ~inputs & (carried[calls] > 0) & (clean[calls] == 0)
    with np.errstate(invalid="ignore"):
        level = np.where(signal, floor, floor / C)  # what a reference at the floor may reach
        found = candidates & known & (np.nan_to_num(g, nan=np.inf) <= level) & (rmse <= floor) & ~c["is_output"]
    return found


def _ids(*columns) -> np.ndarray:
    """One integer per distinct combination of the columns' values, row by row."""
    keys = list(zip(*(col.tolist() for col in columns)))
    index: dict = {}
    return np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))
