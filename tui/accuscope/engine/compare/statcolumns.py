"""Statistics triage at scale: two msprobe dump.json compared as columns, no Tensor, Pair or row dict
per entry (a 100k-call dump holds 300k tensors a side).

It takes the common case and nothing else: both sides msprobe, statistics only (a statistics dump or
--stats-only), no mapping file, op selection, model or plugin, both dump.json read without a problem,
and every NPU tensor name on the golden side in the same call and direction, one to one (so
msprobe's equal-count rule holds for every call). `compare` returns None otherwise, and plan /
execute (the general path) compare it; where it applies, the rows are those plan / execute give
(tests/engine/test_msprobe.py checks it on the real fixtures and a synthetic dump).
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.compare import statistics
from accuscope.engine.compare.comparison import CompareSpec, Coverage
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.sources import msprobe
from accuscope.engine.sources.registry import detect
from accuscope.engine.sources.tensor import OUTPUT, SourceError


def applies(spec: CompareSpec) -> bool:
    """The comparison asks for nothing the columns do not hold (the dumps decide the rest)."""
    if (spec.mapping or spec.op_range or spec.ops or spec.custom_dir or spec.model or spec.npu_model
            or spec.golden_model):
        return False
    try:
        return all(detect(path).kind == msprobe.KIND for path in (spec.npu, spec.golden))
    except SourceError:
        return False


def compare(spec: CompareSpec) -> tuple[ResultTable, Coverage] | None:
    """The result table and coverage of a statistics comparison of two msprobe ranks, or None when the
    general path must compare them (see the module's docstring)."""
    if not applies(spec):
        return None
    ours = msprobe.recorded(spec.npu, step=spec.step, rank=spec.rank, stats_only=spec.stats_only)
    theirs = ours and msprobe.recorded(spec.golden, step=spec.step, rank=spec.rank, stats_only=spec.stats_only)
    if not ours or not theirs or len(ours.names) != len(theirs.names):
        return None
    where = {name: j for j, name in enumerate(theirs.names)}
    if len(where) != len(theirs.names) or len(set(ours.names)) != len(ours.names):
        return None
    golden = np.array([where.get(name, -1) for name in ours.names], dtype=np.int64)
    calls, io = np.array(ours.calls, dtype=object), np.array(ours.io, dtype=object)
    if (golden < 0).any() or not ((np.array(theirs.calls, dtype=object)[golden] == calls).all()
                                  and (np.array(theirs.io, dtype=object)[golden] == io).all()):
        return None
    # rows as the general path lists them: calls in dump order, each call's inputs, then its outputs
    first: dict[str, int] = {}
    ordinal = np.array([first.setdefault(c, len(first)) for c in ours.calls], dtype=np.int64)
    is_output = io == OUTPUT
    rows = np.lexsort((is_output, ordinal))
    golden = golden[rows]
    n = len(rows)
    if not n:
        return None

    def pick(values: list, at: np.ndarray) -> np.ndarray:
        return np.array(values, dtype=object)[at]

    a, b = _stats(ours.stats)[rows], _stats(theirs.stats)[golden]
    has = np.array([s is not None for s in ours.stats], dtype=bool)[rows]
    has_golden = np.array([s is not None for s in theirs.stats], dtype=bool)[golden]
    both = has & has_golden
    a[~both], b[~both] = np.nan, np.nan
    diff, rel, worst, known = statistics.differences(a, b)
    npu_md5, golden_md5 = pick(ours.checksums, rows), pick(theirs.checksums, golden)
    npu_rec, golden_rec = has | (npu_md5 != ""), has_golden | (golden_md5 != "")
    reasons = [statistics.missing_reason(x, y) for x, y in zip(npu_rec.tolist(), golden_rec.tolist())]
    calls, ordinal = calls[rows], ordinal[rows]
    index = np.array(ours.index, dtype=np.int64)[rows]
    columns = {
        "op_seq": ordinal + 1, "type": pick(ours.modules, rows), "npu_op": calls,
        "npu_dtype": pick(ours.dtypes, rows), "golden_op": pick(theirs.calls, golden),
        "golden_dtype": pick(theirs.dtypes, golden), "io": io[rows],
        "tensor": [f"{c}:{d}:{k}" for c, d, k in zip(calls.tolist(), io[rows].tolist(), index.tolist())],
        "shape": ["[" + ",".join(map(str, s)) + "]" for s in pick(ours.shapes, rows).tolist()],
        "how": np.full(n, "tensor", dtype=object), "npu_file": np.full(n, ours.doc, dtype=object),
        "golden_file": np.full(n, theirs.doc, dtype=object), "is_output": is_output[rows] & (ordinal == ordinal.max()),
        "reason": reasons,
    }
    compared = both & ~np.array([bool(r) for r in reasons], dtype=bool)
    for j in range(4):
        keep = compared & known[:, j]
        if keep.any():
            columns[statistics.DIFF_KEYS[j]] = np.where(keep, diff[:, j], np.nan)
            columns[statistics.REL_KEYS[j]] = np.where(keep, rel[:, j], np.nan)
    if compared.any():
        columns["stat_mag"] = np.where(compared, worst, np.nan)
    if ((npu_md5 != "") | (golden_md5 != "")).any():
        columns["npu_md5"], columns["golden_md5"] = npu_md5, golden_md5
    table = ResultTable.from_columns(columns)
    spec.thresholds.apply(table)
    outputs = int(columns["is_output"].sum())
    return table, Coverage(n, n, n, n, outputs, outputs)


def _stats(stats: list[tuple | None]) -> np.ndarray:
    """(n, 4) floats, NaN where a statistic (or all of them) was not recorded."""
    none = (None,) * 4
    return np.array([none if s is None else s for s in stats], dtype=float).reshape(-1, 4)
