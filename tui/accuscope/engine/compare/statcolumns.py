"""Statistics triage at scale: two msprobe dump.json compared as columns, no Tensor, Pair or row dict
per entry (a 100k-call dump holds 300k tensors a side). The two sides are read at once, each by the
compiled scanner (sources/_dumpscan.c: the text straight to columns, without the GIL) where it is
built, else by json and msprobe._scan.

It takes the common case and nothing else: both sides msprobe, statistics only (a statistics dump or
--stats-only), no mapping file, op selection, model or plugin, both dump.json read without a problem,
and every NPU tensor name on the golden side in the same call and direction, one to one (so
msprobe's equal-count rule holds for every call). `compare` returns None otherwise, and plan /
execute (the general path) compare it; where it applies, the rows are those plan / execute give
(tests/engine/test_msprobe.py checks it on the real fixtures and a synthetic dump).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from accuscope.engine.compare import judgement, statistics
from accuscope.engine.compare.coverage import Coverage
from accuscope.engine.compare.leftovers import identical
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sides.registry import detect
from accuscope.engine.sources import msprobe
from accuscope.engine.sources.names import parameter
from accuscope.engine.sources.tensor import OUTPUT, SourceError

KIND = msprobe.KIND  # the kind of source both sides are when the columns compare them


def applies(spec: CompareSpec) -> bool:
    """The comparison asks for nothing the columns do not hold (the dumps decide the rest)."""
    if (spec.mapping or spec.op_range or spec.ops or spec.custom_dir or spec.model or spec.npu_model
            or spec.golden_model or spec.match or spec.shards):
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
    ours, theirs = _both(spec)
    if ours is None or theirs is None or len(ours.names) != len(theirs.names):
        return None
    where = {name: j for j, name in enumerate(theirs.names)}
    if len(where) != len(theirs.names) or len(set(ours.names)) != len(ours.names):
        return None
    golden = np.fromiter((where.get(name, -1) for name in ours.names), dtype=np.int64, count=len(ours.names))
    if (golden < 0).any() or not ((theirs.calls[golden] == ours.calls).all() and (theirs.io[golden] == ours.io).all()):
        return None
    n = len(golden)
    if not n:
        return None
    # rows as the general path lists them: calls in dump order, each call's inputs, then its outputs
    first: dict[str, int] = {}
    ordinal = np.fromiter((first.setdefault(c, len(first)) for c in ours.calls), dtype=np.int64, count=n)
    rows = np.lexsort((ours.io == OUTPUT, ordinal))
    golden = golden[rows]
    a, b = ours.stats[rows].copy(), theirs.stats[golden].copy()
    has, has_golden = ours.has[rows], theirs.has[golden]
    both = has & has_golden
    a[~both], b[~both] = np.nan, np.nan
    diff, rel, worst, known = statistics.differences(a, b)
    npu_md5, golden_md5 = ours.checksums[rows], theirs.checksums[golden]
    npu_rec, golden_rec = has | (npu_md5 != ""), has_golden | (golden_md5 != "")
    reasons = np.full(n, "", dtype=object)
    for x, y in ((False, True), (True, False), (False, False)):
        reasons[(npu_rec == x) & (golden_rec == y)] = statistics.missing_reason(x, y)
    npu_value, golden_value = ours.values[rows], theirs.values[golden]
    values = (npu_value != "") | (golden_value != "")
    reasons[values] = ""  # a non-tensor value: compared as one (statistics.value_cells)
    for k in np.flatnonzero(values & ((npu_value == "") | (golden_value == ""))):
        reasons[k] = statistics.value_cells(npu_value[k] or None, ours.dtypes[rows[k]], golden_value[k] or None,
                                            theirs.dtypes[golden[k]])["reason"]
    calls, ordinal, io = ours.calls[rows], ordinal[rows], ours.io[rows]
    index = ours.index[rows]
    columns = {
        "op_seq": ordinal + 1, "type": ours.modules[rows], "npu_op": calls,
        "npu_dtype": ours.dtypes[rows], "golden_op": theirs.calls[golden],
        "golden_dtype": theirs.dtypes[golden], "io": io,
        "tensor": [f"{c}:{d}:{k}" for c, d, k in zip(calls.tolist(), io.tolist(), index.tolist())],
        "param": [parameter(name) for name in (ours.names[k] for k in rows.tolist())],
        "shape": ours.shapes[rows],
        "how": np.full(n, "tensor", dtype=object), "npu_file": np.full(n, ours.doc, dtype=object),
        "golden_file": np.full(n, theirs.doc, dtype=object), "is_output": np.zeros(n, dtype=bool),
        "reason": reasons,
    }
    compared = both & (reasons == "")
    for j in range(4):
        keep = compared & known[:, j]
        if keep.any():
            columns[statistics.DIFF_KEYS[j]] = np.where(keep, diff[:, j], np.nan)
            columns[statistics.REL_KEYS[j]] = np.where(keep, rel[:, j], np.nan)
    if compared.any():
        columns["stat_mag"] = np.where(compared, worst, np.nan)
    if ((npu_md5 != "") | (golden_md5 != "")).any():
        columns["npu_md5"], columns["golden_md5"] = npu_md5, golden_md5
    if values.any():
        columns["npu_value"], columns["golden_value"] = npu_value, golden_value
    table = ResultTable.from_columns(columns)
    judgement.apply(table, spec.thresholds)
    coverage = Coverage(n, n, n, n, 0, 0, step=True)  # a step's calls: no network output
    coverage.ladder = identical(n)  # every pair by identical names, as the general path counts them
    return table, coverage


def _both(spec: CompareSpec) -> tuple[msprobe.Recorded | None, msprobe.Recorded | None]:
    """The two sides' columns, read at once (the compiled scanner lets go of the GIL: two threads
    read two dump.json on two cores)."""
    read = partial(msprobe.recorded, step=spec.step, rank=spec.rank, stats_only=spec.stats_only)
    from concurrent.futures import ThreadPoolExecutor  # with logging: only when this runs
    with ThreadPoolExecutor(2) as pool:
        ours, theirs = pool.map(read, (spec.npu, spec.golden))
    return ours, theirs
