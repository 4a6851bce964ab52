"""Statistics-first triage: compare what a dump tool recorded about two tensors instead of their data.

msprobe records Max, Min, Mean and L2 norm of every tensor (and, in md5 mode, a CRC-32 of its
bytes). Comparing those needs no tensor I/O at all: a 100k-call dump.json is triaged in seconds, and
the calls worth a tensor dump are the ones it flags. The columns and rules are msprobe's compare
(summary mode): `Max diff` ... `L2norm diff` = npu - bench; `MaxRelativeErr` ... = |diff / bench|
in percent (inf when bench is 0 and they differ); a row is worth a double check when some statistic
differs by more than half its magnitude, |diff| / (max(|npu|, |bench|) + 1e-10) > 0.5 (kept here as
`stat_mag`, so the threshold can be changed); md5 mode passes a row only with equal checksums.
"""
from __future__ import annotations

import math

from accuscope.engine.sources.tensor import Tensor

STATS = ("max", "min", "mean", "norm")
DIFF_KEYS = tuple(f"{s}_diff" for s in STATS)
REL_KEYS = tuple(f"{s}_relerr" for s in STATS)
MAGNITUDE = 0.5  # msprobe's CompareConst.MAGNITUDE
EPSILON = 1e-10  # msprobe's CompareConst.EPSILON


def recorded(t: Tensor) -> bool:
    """The tensor carries statistics or a checksum a comparison can use without its data."""
    return t.stats is not None or bool(t.checksum)


def compare(npu: Tensor, golden: Tensor) -> dict:
    """The statistics cells of one pair (diffs, relative errors in %, stat_mag, checksums) and a reason
    when a side recorded nothing to compare."""
    cells: dict = {"npu_md5": npu.checksum, "golden_md5": golden.checksum} if npu.checksum or golden.checksum else {}
    missing = [side for side, t in (("NPU", npu), ("golden", golden)) if not recorded(t)]
    if missing:
        cells["reason"] = (f"{' and '.join(missing)} side has neither data nor statistics "
                           "(a statistics dump, or --stats-only, needs both sides' dump.json)")
        return cells
    if npu.stats is None or golden.stats is None:
        return cells
    worst = math.nan
    for diff_key, rel_key, a, b in zip(DIFF_KEYS, REL_KEYS, npu.stats, golden.stats):
        if a is None or b is None:
            continue
        diff = a - b if not (a == b) else 0.0
        cells[diff_key] = diff
        if diff == 0:
            cells[rel_key] = 0.0
        elif math.isnan(diff):
            cells[rel_key] = math.nan
        else:
            cells[rel_key] = abs(diff / b) * 100 if b != 0 else math.inf
            if math.isfinite(diff):
                magnitude = abs(diff) / (max(abs(a), abs(b)) + EPSILON)
                worst = magnitude if math.isnan(worst) else max(worst, magnitude)
    if any(k in cells for k in DIFF_KEYS) and math.isnan(worst):
        worst = 0.0
    cells["stat_mag"] = worst
    return cells
