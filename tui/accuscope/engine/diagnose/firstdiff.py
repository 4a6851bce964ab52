"""The first call that diverges: inputs agree with the reference, outputs do not.

A training or LLM dump (msprobe) holds every API and module call of a step in execution order; once
one call goes wrong, every later call inherits the difference, so the failing rows do not say where
it started. The call that introduced it is the first whose input tensors all agree (compared and not
failing) while an output fails. Per rank; across ranks, the ranks that diverge and the earliest call
among them (a fault on one rank of eight is a broken device or a rank-specific input, one on all
ranks is the code or the precision). Works on any table whose rows are grouped by `npu_op` with an
`io` column: statistics rows (stat_mag, checksums) as well as tensor metrics.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accuscope.engine.compare.results import ResultTable


@dataclass(frozen=True)
class Divergence:
    rank: str  # "" when the table holds one rank
    row: int  # the first failing output row of the call
    call: str
    position: int  # the call's position in its rank's execution order (0-based)


def _compared(table: ResultTable) -> np.ndarray:
    """Rows with a comparison result: a metric, a statistic or a checksum, not only a reason."""
    c = table.columns
    done = np.zeros(len(table), dtype=bool)
    for key in table.metric_keys:
        done |= ~np.isnan(table.numbers(key))
    for key in ("npu_md5", "tpu_verdict"):
        if key in table.present:
            done |= c[key] != ""
    return done


def first_divergence(table: ResultTable, rows: np.ndarray | None = None) -> Divergence | None:
    """The first call among `rows` (default: all, in order) whose inputs agree and outputs do not."""
    c = table.columns
    order = np.arange(len(table)) if rows is None else rows
    fail, compared = c["fail"], _compared(table)
    calls: dict[str, list[int]] = {}
    for r in order.tolist():
        calls.setdefault(c["npu_op"][r], []).append(r)
    for position, (call, members) in enumerate(calls.items()):
        inputs = [r for r in members if c["io"][r] == "input"]
        outputs = [r for r in members if c["io"][r] != "input"]
        bad = [r for r in outputs if fail[r]]
        if bad and not any(fail[r] for r in inputs) and all(compared[r] for r in inputs):
            return Divergence("", bad[0], call, position)
    return None


def by_rank(table: ResultTable) -> list[Divergence]:
    """The first divergence of each rank (the table's `rank` column when it has one), earliest call first."""
    ranks = table.columns.get("rank")
    if ranks is None or (ranks.dtype.kind in "iu" and not (ranks >= 0).any()):  # ResultTable's rank: -1 = none
        found = first_divergence(table)
        return [found] if found is not None else []
    out = []
    for rank in dict.fromkeys(ranks.tolist()):
        found = first_divergence(table, np.flatnonzero(ranks == rank))
        if found is not None:
            out.append(Divergence(str(rank), found.row, found.call, found.position))
    return sorted(out, key=lambda d: (d.position, d.rank))
