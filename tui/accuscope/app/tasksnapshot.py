"""A copy of an opened task for a thread worker: the task screen's advisor and threshold save and
the advice screen's verify work on one, so no worker reads what the screen edits meanwhile or
changes what it renders."""
from __future__ import annotations

import copy
import dataclasses

from ..engine.compare.results import ResultTable
from ..engine.tasks.task import Task


def snapshot(task: Task) -> Task:
    """A copy of the opened task for a worker (the advisor, the save): its own thresholds and table
    object (the column arrays shared: the judged columns it sets replace them, nothing is written in
    place), so neither changes under the worker when the screen edits them, nor does the task the
    screen shows change under the screen; what the task found once (plan, graph, framework model)
    is handed over when found already."""
    table = task.table
    copied = dataclasses.replace(
        task, thresholds=copy.deepcopy(task.thresholds), warnings=list(task.warnings), stale=list(task.stale),
        table=None if table is None else ResultTable(dict(table.columns), table.custom, table.present))
    for found in ("plan", "graph", "modules", "framework_model"):  # Task's cached properties
        if found in vars(task):
            vars(copied)[found] = vars(task)[found]
    return copied
