"""A copy of an opened task for a thread worker: every worker that reads the task (the task screen's
advisor and threshold save, the advice screen's ranking and verify, the graph, the op detail, a row's
call stack) works on one, so no worker reads what the screen edits meanwhile or changes what it renders.
What a worker found on its copy (the plan, a graph) comes back to the opened task on the screen's
thread (`keep_found`), so it is found once per opened task."""
from __future__ import annotations

import copy
import dataclasses

from ..engine.compare.results import ResultTable
from ..engine.tasks.task import Task

FOUND = ("plan", "graph", "model_file", "modules", "framework_model", "framework_graph")  # Task's cached properties
PER_RUN = ("_stacks", "_modules")  # what Task reads once per step and rank (call_stacks, modules_at)


def snapshot(task: Task) -> Task:
    """A copy of the opened task for a worker (the advisor, the save): its own thresholds and table
    object (the column arrays shared: the judged columns it sets replace them, nothing is written in
    place), so neither changes under the worker when the screen edits them, nor does the task the
    screen shows change under the screen; what the task found once (plan, graph, framework model,
    call stacks) is handed over when found already."""
    table = task.table
    copied = dataclasses.replace(
        task, thresholds=copy.deepcopy(task.thresholds), warnings=list(task.warnings), stale=list(task.stale),
        table=ResultTable(dict(table.columns), table.custom, table.present))
    for found in FOUND:
        if found in vars(task):
            vars(copied)[found] = vars(task)[found]
    for cache in PER_RUN:
        if cache in vars(task):
            vars(copied)[cache] = dict(vars(task)[cache])
    return copied


def keep_found(task: Task, worked: Task) -> None:
    """What a worker found on `worked`, its snapshot of `task` (the plan, a graph, call stacks), kept by
    `task` for the next worker's snapshot; called on the screen's thread once the worker is done. What
    `task` found meanwhile stays."""
    for found in FOUND:
        if found in vars(worked) and found not in vars(task):
            vars(task)[found] = vars(worked)[found]
    for cache in PER_RUN:
        if cache in vars(worked):
            vars(task)[cache] = {**vars(worked)[cache], **vars(task).get(cache, {})}
