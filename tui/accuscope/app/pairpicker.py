"""The counterpart picker: the golden tensors one NPU tensor may be paired with (engine/compare/
counterpart.py ranks them: same call first, then alike in shape and dtype), narrowed as you type;
enter picks one and the task screen saves `npu tensor: golden tensor` in the task's pairs.yaml."""
from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Input, Static

from ..engine.compare.counterpart import Candidate, candidates, narrowed
from ..engine.sources.names import printable
from ..engine.tasks.task import Task
from . import formatting as fmt
from .cursorlist import CursorList
from .messages import CandidatesFound, deliver
from .tasksnapshot import keep_found, snapshot

SHAPE, DTYPE, MATCH = 10, 8, 11  # cells of the columns after the name


class CandidateList(CursorList):
    """The candidates, best first: golden tensor, shape, dtype, why it ranks there; `*` marks the current one."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"candidatelist--header", "candidatelist--cursor",
                                             "candidatelist--current", "candidatelist--empty"}
    DEFAULT_CSS = """
    CandidateList {
        height: 1fr;
        background: $surface;
        & > .candidatelist--header { text-style: bold; background: $panel; }
        & > .candidatelist--cursor { background: $block-cursor-background; color: $block-cursor-foreground;
                                     text-style: $block-cursor-text-style; }
        & > .candidatelist--current { text-style: bold; }
        & > .candidatelist--empty { color: $text-muted; text-style: italic; }
        &:nocolor > .candidatelist--cursor { text-style: reverse; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = []

    class Picked(Message):
        """The cursor row was clicked again: pick it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shown: list[Candidate] = []
        self.message = "finding the golden tensors…"

    def show(self, found: list[Candidate], message: str = "") -> None:
        self.shown, self.message = found, message
        self.set_reactive(CandidateList.cursor, 0)
        self.virtual_size = Size(self.line_width, len(found) + 1)
        self.scroll_to(0, 0, animate=False, force=True)
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self.shown)

    def action_select(self) -> None:
        self.post_message(self.Picked())

    @property
    def name_width(self) -> int:
        longest = max((len(c.name) for c in self.shown), default=20)
        room = self.scrollable_content_region.width - (SHAPE + DTYPE + MATCH + 5)
        return max(20, min(longest, room))

    @property
    def line_width(self) -> int:
        return 2 + self.name_width + SHAPE + DTYPE + MATCH + 3

    def line_text(self, i: int | None) -> str:
        if i is None:
            texts = ("", "golden tensor", "shape", "dtype", "match")
        else:
            c = self.shown[i]
            texts = ("*" if c.current else "", fmt.fit(c.name, self.name_width, keep="end"), c.shape_text, c.dtype_text, c.match)
        widths = (1, self.name_width, SHAPE, DTYPE, MATCH)
        return "".join(fmt.pad(s, w) + " " for s, w in zip(texts, widths))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        st = self.component_styles
        base = st["base"]
        x0 = int(self.scroll_x)
        if y == 0:
            style = base + st["header"]
            return Strip([Segment(self.line_text(None), style)]).crop(x0, x0 + width).adjust_cell_length(width, style)
        position = int(self.scroll_y) + y - 1
        if not 0 <= position < self.row_count:
            if position == 0:
                style = base + st["empty"]
                return Strip([Segment(fmt.fit(" " + self.message, width), style)]).adjust_cell_length(width, style)
            return Strip.blank(width, base)
        style = base
        if self.shown[position].current:
            style += st["current"]
        if position == self.cursor:
            style += st["cursor"]
        return Strip([Segment(self.line_text(position), style)]).crop(x0, x0 + width).adjust_cell_length(width, style)

    def on_resize(self, event) -> None:
        self.virtual_size = Size(self.line_width, len(self.shown) + 1)
        super().on_resize(event)


class PairPicker(ModalScreen["str | None"]):
    """The golden counterparts of one NPU tensor (`call:input:1`); dismisses with the golden tensor's
    name (`call:input:2`) or None."""

    TITLE = "pick the golden counterpart"
    DEFAULT_CSS = """
    PairPicker { align: center middle; }
    PairPicker > Vertical { width: 95%; max-width: 120; height: 90%; border: thick $accent;
                            background: $surface; padding: 0 1; }
    PairPicker #picker-title { height: auto; max-height: 2; }
    PairPicker #picker-filter { border: none; height: 1; padding: 0 1; background: $boost; }
    PairPicker #picker-hint { height: 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "cancel", id="picker.cancel"),
        Binding("up", "move('cursor_up')", "up", show=False, id="picker.cursor_up"),
        Binding("down", "move('cursor_down')", "down", show=False, id="picker.cursor_down"),
        Binding("pageup", "move('page(-1)')", "page up", show=False, id="picker.page_up"),
        Binding("pagedown", "move('page(1)')", "page down", show=False, id="picker.page_down"),
    ]

    def __init__(self, task: Task, tensor: str) -> None:
        """`task`: the opened task (its plan: the pairs as its comparison made them, the golden side);
        `tensor`: the NPU tensor, `call:input:1`."""
        super().__init__()
        self.opened_task, self.tensor = task, tensor
        self.found: list[Candidate] = []
        self.computing = True

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]golden counterpart of[/] {fmt.shown(self.tensor)}", id="picker-title")
            yield Input(placeholder="type to filter by name, shape or dtype", id="picker-filter")
            yield CandidateList(id="candidates")
            yield Static("enter picks (saved in pairs.yaml; R re-runs with it) · esc cancels · ↑↓ move",
                         id="picker-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self._reading = snapshot(self.opened_task)  # its plan kept by the task once found (keep_found)
        self.find_worker(self._reading, self.tensor)

    @work(thread=True, exclusive=True, group="candidates", exit_on_error=False)
    def find_worker(self, task: Task, tensor: str) -> None:
        """The golden tensors `tensor` may pair with, on `task`, the screen's snapshot of the opened task."""
        def find() -> list[Candidate]:
            plan = task.plan
            return candidates(plan.pairs, plan.golden.tensors, tensor)
        deliver(self, CandidatesFound, find)

    @on(CandidatesFound)
    def candidates_found(self, message: CandidatesFound) -> None:
        keep_found(self.opened_task, self._reading)
        widget = self.query_one(CandidateList)
        self.computing = False
        if message.error is not None:
            widget.show([], f"the golden side cannot be read: {printable(str(message.error))}")
            return
        self.found = message.result or []
        self.refilter()

    @on(Input.Changed, "#picker-filter")
    def refilter(self) -> None:
        if self.computing:
            return
        text = self.query_one(Input).value
        shown = narrowed(self.found, text)
        why = f"no golden tensor matches {text!r}" if self.found else "the golden side has no tensor of this call"
        self.query_one(CandidateList).show(shown, "" if shown else why)

    @on(Input.Submitted, "#picker-filter")
    @on(CandidateList.Picked)
    def pick(self) -> None:
        widget = self.query_one(CandidateList)
        if widget.row_count:
            self.dismiss(widget.shown[widget.cursor].name)

    def action_move(self, action: str) -> None:
        widget = self.query_one(CandidateList)
        name, _, arg = action.partition("(")
        if arg:
            getattr(widget, f"action_{name}")(float(arg.rstrip(")")))
        else:
            getattr(widget, f"action_{name}")()

    def action_cancel(self) -> None:
        self.dismiss(None)
