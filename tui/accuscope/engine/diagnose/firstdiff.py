"""The first call that diverges: inputs agree with the reference, outputs do not.

A training or LLM dump (msprobe) holds every API and module call of a step in execution order; once
one call goes wrong, every later call inherits the difference, so the failing rows do not say where
it started. The call that introduced it is the first whose input tensors all agree (compared and not
failing) while an output fails; its non-tensor arguments may differ (a dim, a p: that is then the cause). Per rank; across ranks, the ranks that diverge and the earliest call
among them (a fault on one rank of eight is a broken device or a rank-specific input, one on all
ranks is the code or the precision). A training step's updates (an optimizer's in-place writes to the
parameters, a module's parameters_grad call) store what earlier calls computed: never the call it starts
at. Works on any table whose rows are grouped by `npu_op` with an `io` column: statistics rows (stat_mag, checksums) as well as tensor metrics.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accuscope.engine.compare.judgement import compared, value_rows
from accuscope.engine.compare.results import ResultTable


@dataclass(frozen=True)
class Divergence:
    rank: str  # which rank: "" when the table holds one; "step 1 rank 2" when it holds several steps
    row: int  # the first failing output row of the call
    call: str
    position: int  # the call's position in its rank's execution order (0-based)

    @property
    def where(self) -> str:
        return where(self.rank)


def where(label: str) -> str:
    """A group's label in words: "rank 2", "step 1 rank 2", or "" (the table holds one rank)."""
    return label if not label or label.startswith("step") else f"rank {label}"


def first_divergence(table: ResultTable, rows: np.ndarray | None = None,
                     done: np.ndarray | None = None) -> Divergence | None:
    """The first call among `rows` (default: all, in order) whose inputs agree and outputs do not
    (`done`: compared(table), when the caller has it)."""
    c = table.columns
    order = np.arange(len(table)) if rows is None else np.asarray(rows)
    if not len(order):
        return None
    done = compared(table) if done is None else done
    calls, first_at, call_of = np.unique(c["npu_op"][order], return_index=True, return_inverse=True)
    is_input = c["io"][order] == "input"
    fail, seen = c["fail"][order], done[order]
    tensors = ~value_rows(table)[order]  # an argument that differs (dim, p) is where a call starts, not what it was fed
    n = len(calls)

    def per_call(mask: np.ndarray) -> np.ndarray:
        return np.bincount(call_of[mask], minlength=n) > 0
    starts = per_call(~is_input & fail) & ~per_call(is_input & fail & tensors) & ~per_call(is_input & ~seen & tensors)
    types = c["type"][order][first_at] if "type" in c else np.full(n, "", dtype=object)
    starts &= ~updates(calls, types, first_at)
    if not starts.any():
        return None
    candidates = np.flatnonzero(starts)
    j = candidates[np.argmin(first_at[candidates])]
    row = int(order[np.flatnonzero((call_of == j) & ~is_input & fail)[0]])
    return Divergence("", row, str(calls[j]), int((first_at < first_at[j]).sum()))


OPTIMIZER = "optimizer"  # the `type` of the calls an optimizer's step made (msprobe's construct.json parent)


def updates(calls: np.ndarray, types: np.ndarray, first_at: np.ndarray) -> np.ndarray:
    """Calls that only store what earlier calls computed, never the call a divergence starts at: an
    optimizer's updates (type "optimizer"; without construct.json, an in-place API such as Tensor.add_,
    mul_, addcdiv_ or Torch._foreach_add_ after the step's last backward call) and a module's
    parameters_grad call (the gradients its backward call already gave)."""
    names = [str(x) for x in calls]
    backward = [at for name, at in zip(names, first_at.tolist()) if ".backward" in name]
    after = max(backward) if backward else None
    out = np.zeros(len(names), dtype=bool)
    for j, name in enumerate(names):
        parts = name.split(".")
        api = parts[1] if len(parts) > 2 else ""
        in_place = api.endswith("_") and not api.endswith("__")
        out[j] = (str(types[j]) == OPTIMIZER or "parameters_grad" in parts
                  or (in_place and after is not None and first_at[j] > after))
    return out


def groups(table: ResultTable) -> list[tuple[str, np.ndarray]]:
    """The table's ranks (and steps, when it holds several) as (label, rows), in order; one group
    labelled "" when it has no step or rank columns."""
    c = table.columns

    def known(key: str) -> np.ndarray | None:
        col = c.get(key)
        if col is None or (col.dtype.kind in "iu" and not (col >= 0).any()):  # ResultTable's -1: none
            return None
        return col
    ranks, steps = known("rank"), known("step")
    n = len(table)
    if ranks is None and steps is None:
        return [("", np.arange(n))]
    ranks = ranks if ranks is not None else np.full(n, -1)
    steps = steps if steps is not None else np.full(n, -1)
    several_steps = len(set(steps.tolist())) > 1
    return [(f"step {step} rank {rank}" if several_steps else str(rank), np.flatnonzero((steps == step) & (ranks == rank)))
            for step, rank in dict.fromkeys(zip(steps.tolist(), ranks.tolist()))]


def by_rank(table: ResultTable) -> list[Divergence]:
    """The first divergence of each rank and step (see groups), earliest call first."""
    done = compared(table)
    out = []
    for label, rows in groups(table):
        found = first_divergence(table, rows, done)
        if found is not None:
            out.append(Divergence(label, found.row, found.call, found.position))
    return sorted(out, key=lambda d: (d.position, d.rank))
