"""What a task's result says at a glance: counts and the first failing op in execution order.

The advisor (metrics.md section 5) explains causes; this is the plain account it builds on.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .results import ResultTable
from .thresholds import Thresholds


@dataclass
class Summary:
    rows: int
    failing: int
    not_compared: int  # rows with a reason and no metric value
    nonfinite: int  # rows whose NPU tensor holds NaN/inf
    first_failing: int | None  # table row, the earliest in execution order
    broken: list[str]  # thresholds that row breaks, e.g. "cos 0.912 < 0.99"


def summarize(table: ResultTable, thresholds: Thresholds) -> Summary:
    n = len(table)
    fail = table.columns["fail"] if "fail" in table.columns else np.zeros(n, bool)
    failing = np.flatnonzero(fail)
    first = int(failing[np.argmin(table.columns["index"][failing])]) if len(failing) else None
    broken = []
    if first is not None:
        for key in thresholds.broken(table, first):
            t = thresholds.get(key)
            if t is None:  # the built-in NaN/inf rule
                broken.append(f"NaN/inf {table.columns['npu_nonfinite'][first]} on the NPU side, "
                              f"{max(table.columns['golden_nonfinite'][first], 0)} in golden")
            else:
                broken.append(f"{key} {table.numbers(key)[first]:.4g} {t.op} {t.value:g}")
    keys = table.metric_keys
    no_value = np.ones(n, bool)
    for key in keys:
        no_value &= np.isnan(table.numbers(key))
    not_compared = int((no_value & (table.columns["reason"] != "")).sum()) if keys else 0
    nonfinite = int((table.columns["npu_nonfinite"] > 0).sum())
    return Summary(n, len(failing), not_compared, nonfinite, first, broken)
