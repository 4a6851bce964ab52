"""Statistics-first triage: compare what a dump tool recorded about two tensors instead of their data.

msprobe records Max, Min, Mean and L2 norm of every tensor (and, in md5 mode, a CRC-32 of its
bytes). Comparing those needs no tensor I/O at all: a 100k-call dump.json is triaged in seconds, and
the calls worth a tensor dump are the ones it flags. The columns and rules are msprobe's compare
(summary mode): `Max diff` ... `L2norm diff` = npu - bench; `MaxRelativeErr` ... = |diff / bench|
in percent (inf when bench is 0 and they differ); a row is worth a double check when some statistic
differs by more than half its magnitude, |diff| / (max(|npu|, |bench|) + 1e-10) > 0.5 (kept here as
`stat_mag`, so the threshold can be changed); md5 mode passes a row only with equal checksums.

A non-tensor argument or output (`Tensor.value`: dim=1, p=0.1, training=True, None) is compared as a
value, equal or not, as msprobe's scalar-parameter check does (`values_differ`); no metric or statistic
is made of it. Its row carries both values (npu_value, golden_value).

A tensor merged from a parallel run's shards (`--shards`) has a shape the merge made, not one the dumper
recorded: where it differs from the other side's, the row is not compared and its reason says so, as a
tensor comparison's is (a concatenation along a wrong dimension keeps every statistic, not the shape).
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.compare.columns import STATS
from accuscope.engine.sources.tensor import Tensor

MERGED = "TP merge: "  # how a tensor merged from a parallel run's shards (shards.py) starts its conversion
SHARDS_BY_NAMES = "names"  # --shards names: the split from Megatron's class names (else a layout file's path);
# here, not in shards.py, so that task.json's reader does not import the merge (8 ms of every compare's start)
DIFF_KEYS = tuple(f"{s}_diff" for s in STATS)
REL_KEYS = tuple(f"{s}_relerr" for s in STATS)
MAGNITUDE = 0.5  # msprobe's CompareConst.MAGNITUDE
EPSILON = 1e-10  # msprobe's CompareConst.EPSILON


def recorded(t: Tensor) -> bool:
    """The tensor carries statistics or a checksum a comparison can use without its data."""
    return t.stats is not None or bool(t.checksum)


def values_differ(npu: np.ndarray, golden: np.ndarray) -> np.ndarray:
    """Rows where both sides hold a non-tensor value and the two differ: as text, unless both are numbers
    of equal value (1 and 1.0 as msprobe's Python compare takes them; NaN never equals)."""
    both = (npu != "") & (golden != "")
    differ = both & (npu != golden)
    for k in np.flatnonzero(differ):
        try:
            if float(npu[k]) == float(golden[k]):
                differ[k] = False
        except ValueError:  # not numbers: the texts decide
            pass
    return differ


def value_cells(npu: str | None, npu_type: str, golden: str | None, golden_type: str) -> dict:
    """The cells of a pair where a side is a non-tensor value (None: that side holds a tensor): both
    values, or why they are not compared."""
    cells = {"npu_value": npu or "", "golden_value": golden or ""}
    if npu is None or golden is None:
        kind = f"a {npu_type if npu is not None else golden_type} value"
        cells["reason"] = (f"the NPU side holds {kind}, the golden side a tensor" if npu is not None else
                           f"the NPU side holds a tensor, the golden side {kind}") + ": not compared"
    return cells


def compare(npu: Tensor, golden: Tensor) -> dict:
    """The statistics cells of one pair (see compare_many)."""
    return compare_many([(0, npu, golden)])[0][1]


# keyword arguments that name a thing rather than compute with it (a process group, a device, a tag)
NAMING_KEYS = frozenset({"group", "process_group", "pg", "group_name", "device", "device_type", "tag", "name"})


def names_not_computes(x: Tensor, y: Tensor) -> str:
    """Why two non-tensor values name rather than compute, across frameworks: the argument's keyword is a
    name's (NAMING_KEYS: `group`, `device` ...), a side's value is a process group or a device, or a string on
    one side stands where the other passes None (MindSpore's group name for PyTorch's default group);
    "" when they compute (numbers, flags, a mode such as "nearest", which still fail when they differ)."""
    key = x.tensor_name.rsplit(".", 1)[-1] if x.tensor_name else ""
    if key in NAMING_KEYS:
        return f"the argument `{key}` names"
    for t in (x, y):
        if "processgroup" in t.dtype_name.lower() or "device" in t.dtype_name.lower():
            return f"a {t.dtype_name} names"
    if {x.dtype_name, y.dtype_name} == {"str", "None"}:
        return "a name on one side stands for the default (None) on the other"
    return ""


def naming_cells(x: Tensor, y: Tensor, why: str) -> dict:
    """A pair of values that name (names_not_computes) across frameworks: shown in the reason, not judged."""
    return {"reason": f"{why}, not computes: {x.value} against {y.value} in golden (across frameworks: shown, "
                      "not judged)"}


def compare_many(pairs: list[tuple[int, Tensor, Tensor]], across: bool = False) -> list[tuple[int, dict]]:
    """(row, cells) of every (row, npu, golden): diffs, relative errors in %, stat_mag, checksums, and
    a reason when a side recorded nothing to compare. One vectorized pass: 100k pairs in well under
    a second. `across`: the sides are two frameworks' (MindSpore against PyTorch): values that name
    (names_not_computes) are shown, not judged."""
    none = (None,) * 4  # float arrays read None as NaN
    both = np.array([x.stats is not None and y.stats is not None for _row, x, y in pairs], dtype=bool)
    a = np.array([x.stats if x.stats is not None and y.stats is not None else none for _row, x, y in pairs],
                 dtype=float).reshape(-1, 4)
    b = np.array([y.stats if x.stats is not None and y.stats is not None else none for _row, x, y in pairs],
                 dtype=float).reshape(-1, 4)
    diff, rel, worst, known = differences(a, b)
    out = []
    for k, (row, x, y) in enumerate(pairs):
        if x.value is not None or y.value is not None:
            why = names_not_computes(x, y) if across and x.value is not None and y.value is not None else ""
            out.append((row, naming_cells(x, y, why) if why else value_cells(x.value, x.dtype_name, y.value,
                                                                              y.dtype_name)))
            continue
        cells: dict = {"npu_md5": x.checksum, "golden_md5": y.checksum} if x.checksum or y.checksum else {}
        missing = missing_reason(recorded(x), recorded(y))
        if missing:
            cells["reason"] = missing
        elif reason := shape_mismatch(x, y, data=False):
            cells["reason"] = reason
        elif both[k]:
            for j in range(4):
                if known[k, j]:
                    cells[DIFF_KEYS[j]] = float(diff[k, j])
                    cells[REL_KEYS[j]] = float(rel[k, j])
            cells["stat_mag"] = float(worst[k])
        out.append((row, cells))
    return out


def differences(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """msprobe's columns for npu statistics `a` against golden `b` ((n, 4), NaN where not recorded):
    diff, relative error in %, the worst |diff| / magnitude (stat_mag), and where both are known."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.where(a == b, 0.0, a - b)
        rel = np.where(diff == 0, 0.0, np.where(b != 0, np.abs(diff / b) * 100, np.inf))
        rel[np.isnan(diff)] = np.nan
        mag = np.abs(diff) / (np.maximum(np.abs(a), np.abs(b)) + EPSILON)
        mag[~np.isfinite(diff)] = np.nan
        worst = np.where(np.isnan(mag).all(axis=1), np.where(np.isnan(a).all(axis=1), np.nan, 0.0),
                         np.nanmax(np.where(np.isnan(mag), -np.inf, mag), axis=1))
    return diff, rel, worst, ~np.isnan(a) & ~np.isnan(b)


def shape_mismatch(npu: Tensor, golden: Tensor, data: bool = True) -> str:
    """Why a pair cannot be compared by its shapes ("" when it can). Data compared element by element
    (`data`) needs as many elements on both sides (each side's layout already converted); a tensor
    merged from a parallel run's shards (--shards) needs the other side's very shape, size-1
    dimensions aside: a concatenation along a wrong dimension keeps the element count and every
    statistic, not the shape."""
    merged = npu.conversion.startswith(MERGED) or golden.conversion.startswith(MERGED)
    if (data and npu.size != golden.size) or (merged and _squeezed(npu.shape) != _squeezed(golden.shape)):
        return (f"shape {list(npu.shape)} of the NPU tensor does not match shape {list(golden.shape)} of golden "
                f"{golden.op}" + (" (merged from shards)" if merged and npu.size == golden.size else ""))
    return ""


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def missing_reason(npu_recorded: bool, golden_recorded: bool) -> str:
    """Why a pair has nothing to compare ("" when both sides recorded something)."""
    missing = [side for side, ok in (("NPU", npu_recorded), ("golden", golden_recorded)) if not ok]
    return (f"{' and '.join(missing)} side has neither data nor statistics (a statistics dump, or "
            "--stats-only, needs both sides' dump.json)") if missing else ""
