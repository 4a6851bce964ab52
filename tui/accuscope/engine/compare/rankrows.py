"""The rows of each step and rank in a multi-rank task's result table (its `step` and `rank`
columns, set when the ranks are compared): which (step, rank) pairs it holds, the rows of one."""
from __future__ import annotations

import numpy as np

from accuscope.engine.compare.results import ResultTable

StepRank = tuple["int | None", int]  # step None: the table has no step column


def step_ranks(table: ResultTable) -> list[StepRank]:
    """The (step, rank) pairs of the table's rows in order; [] when its rows are of one (or none)."""
    if "rank" not in table.columns or not len(table):
        return []
    has_step = "step" in table.columns
    ranks = np.nan_to_num(table.numbers("rank"), nan=-1).astype(np.int64)
    steps = np.nan_to_num(table.numbers("step"), nan=-1).astype(np.int64) if has_step else 0
    keys = np.unique((steps + 1) << 32 | (ranks + 1))  # one int per (step, rank): a fast unique
    found = [(int(k >> 32) - 1 if has_step and k >> 32 else None, int(k & 0xFFFFFFFF) - 1)
             for k in keys.tolist() if k & 0xFFFFFFFF]
    return found if len(found) > 1 else []


def step_rank_of(table: ResultTable, row: int) -> StepRank:
    """(step, rank) of one row, as step_ranks names it."""
    step = table.numbers("step")[row] if "step" in table.columns else -1
    return (int(step) if step >= 0 else None, int(np.nan_to_num(table.numbers("rank")[row], nan=-1)))


def step_rank_rows(table: ResultTable, pair: StepRank) -> np.ndarray:
    """Mask of the rows of one (step, rank)."""
    step, rank = pair
    keep = table.numbers("rank") == rank
    if step is not None:
        keep &= table.numbers("step") == step
    return keep
