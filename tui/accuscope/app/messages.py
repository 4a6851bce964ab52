"""What the app's workers send back: one Message class per kind of result, posted by the worker.

A thread worker runs its engine call through `deliver(screen, SomethingDone, call)`, which posts
`SomethingDone(result)`, or `SomethingDone(error=...)` when the call raised; the screen handles it
in one `@on(SomethingDone)` method. A worker that was cancelled meanwhile (a newer one of its
exclusive group replaced it, or its screen closed) posts nothing.

Progress messages (`Progress` subclasses) are posted as often as the engine reports; a burst of
them waiting in the queue is merged into the newest (`merge`), so the screen handles one per turn
and repaints on its own timer tick, not once per message.
"""
# lazy: engine.sources.tensor
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import get_current_worker

if TYPE_CHECKING:
    import numpy as np

    from ..engine.compare.chainview import ChainView
    from ..engine.compare.counterpart import Candidate
    from ..engine.diagnose.advisor import Advice
    from ..engine.diagnose.opdetail import OpDetail
    from ..engine.diagnose.oppair import OpPair
    from ..engine.diagnose.sensitivity import Ranking
    from ..engine.export.folder import ExportResult
    from ..engine.graphs.graph import Graph
    from ..engine.graphs.lanes import Lanes
    from ..engine.precision.workflow import PrecisionResult
    from ..engine.tasks.rankrun import RanksRun
    from ..engine.tasks.task import Task
    from ..engine.tasks.taskrun import RunResult
    from .graphview import OpResults

@dataclass(frozen=True)
class TensorRef:
    """One tensor of the operator: a row of the result table."""

    row: int
    op: str
    io: str
    index: int
    param: str = ""  # a module parameter's name (weight, bias): the slot it is shown by

    @property
    def key(self) -> tuple[str, str, int]:
        return self.op, self.io, self.index

    @property
    def name(self) -> str:
        return f"{self.op}:{self.io}:{self.index}"

    @property
    def slot(self) -> str:
        return self.param or ("in:" if self.io == "input" else "out:") + str(self.index)


# ------------------------------------------------------------------ the two kinds


class Done(Message):
    """A worker finished: its `result`, or the `error` it raised (then `result` is None). Each subclass
    declares its `result`'s type."""

    result: object

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        # Any: `deliver` passes whatever its call returned; the subclass's `result` declares the type
        super().__init__()
        self.result, self.error = result, error


class Progress(Message):
    """Work under way; a newer one of the same class waiting behind it replaces it."""

    def can_replace(self, message: Message) -> bool:
        # textual asks the older message whether the pending one may replace it
        if type(message) is not type(self):
            return False
        message.merge(self)
        return True

    def merge(self, older: Progress) -> None:
        """Take over what `older` carried and this one does not repeat (nothing by default)."""


def error_text(error: BaseException | None, *plain: type[BaseException]) -> str:
    """A worker's error as a screen says it: a SourceError's own words (and those of the `plain` types:
    a tensor's OSError or ValueError names its file and problem), else its type and text."""
    from ..engine.sources.tensor import SourceError
    if isinstance(error, (SourceError, *plain)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def deliver(node: MessagePump, done: type[Done], call: Callable[[], Any]) -> None:
    """Run `call` in this worker and post `done(result)` or `done(error=...)` to `node`, unless the
    worker was cancelled meanwhile."""
    try:
        message = done(call())
    except Exception as error:  # noqa: BLE001 -- the screen shows it; the worker itself never fails
        message = done(error=error)
    if not get_current_worker().is_cancelled:
        node.post_message(message)


# ------------------------------------------------------------------ the task screen


class Stack(NamedTuple):
    lines: list[str]  # a row's call stack, innermost first (msprobe's stack.json)
    why: str  # why there is none ("" when there is)


class StackLoaded(Done):
    """A row's call `Stack`."""

    result: Stack | None


class CandidatesFound(Done):
    """The golden tensors one NPU tensor may be paired with, best first (counterpart.Candidate list)."""

    result: list[Candidate] | None


class TaskLoaded(Done):
    """The whole task (`Task`) whose first rows the screen shows."""

    result: Task | None


class AdviceDone(Done):
    """The advisor's `Advice` for the task."""

    result: Advice | None


class ChainDone(Done):
    """A chain task's stages op by op, judged under the thresholds shown, and the op table's stage group
    (stageviews.prepared)."""

    result: tuple[ChainView, dict[str, np.ndarray]] | None


class ThresholdsSaved(Done):
    """The task's result saved again under edited thresholds: `result` the worker's snapshot `Task`
    that saved it (its `csv` and `doc` name what was written)."""

    result: Task | None


class ComparePlanned(Message):
    """The comparison is planned: its `plan` says which pairs will come."""

    def __init__(self, plan) -> None:
        super().__init__()
        self.plan = plan


class CompareRows(Progress):
    """Rows the comparison finished (`rows`: (plan row index, cells)), `done` pairs so far, and the
    progress line."""

    def __init__(self, rows: list, done: int, text: str) -> None:
        super().__init__()
        self.rows, self.done, self.text = rows, done, text

    def merge(self, older: Progress) -> None:
        assert isinstance(older, CompareRows)  # can_replace merges messages of one class only
        self.rows[:0] = older.rows


class RankCompared(Message):
    """One rank of a multi-rank comparison ended: its `RankResult`, `done` ranks of `total`."""

    def __init__(self, result, done: int, total: int) -> None:
        super().__init__()
        self.result, self.done, self.total = result, done, total


class CompareDone(Done):
    """The comparison ended: `run_task`'s result (its table None when it was cancelled), or a
    multi-rank comparison's `RanksRun`."""

    result: RunResult | RanksRun | None


# ------------------------------------------------------------------ the graph screen


class LoadedGraph(NamedTuple):
    graph: Graph
    lanes: Lanes
    results: OpResults  # the badges
    at: int  # which of the screen's ranks
    task: Task  # the snapshot it was read on (what it found: tasksnapshot.keep_found)


class GraphLoaded(Done):
    """The task's model as the graph screen draws it (`LoadedGraph`)."""

    result: LoadedGraph | None


class FrameworkLoaded(Done):
    """The framework model's graph (the ops an export maps device ops to)."""

    result: Graph | None


class ExportProgress(Progress):
    """The step an export is at, as a line for the status bar."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Exported(NamedTuple):
    result: ExportResult | None  # None when cancelled
    files: int  # files written


class ExportDone(Done):
    """A submodel export's `Exported`."""

    result: Exported | None


# ------------------------------------------------------------------ the operator detail


class DetailProgress(Progress):
    """`done` of `total` elements compared (total 0: still reading)."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total


class Detailed(NamedTuple):
    serial: int  # the request it answers (a newer one makes it stale)
    ref: TensorRef
    pair: OpPair
    detail: OpDetail | None  # None when cancelled
    task: Task  # the snapshot it was read on (what it found: tasksnapshot.keep_found)


class DetailDone(Done):
    """One tensor pair's `Detailed`."""

    result: Detailed | None


class Counted(NamedTuple):
    key: tuple  # what was counted (opscreen's count key)
    exact: int  # the exact count above a typed threshold (not `count`: tuple's method)


class CountDone(Done):
    """An exact count (`Counted`)."""

    result: Counted | None


# ------------------------------------------------------------------ the advisor screen


class RankingDone(Done):
    """The ops ranked by the error each one made (`Ranking`)."""

    result: Ranking | None


class VerifyDone(Done):
    """The advice again, its headline verified by replaying the conversion (`Advice`)."""

    result: Advice | None


# ------------------------------------------------------------------ the precision screen


class PrecisionDone(Done):
    """The mixed-precision search's `PrecisionResult`."""

    result: PrecisionResult | None
