"""The operator detail screen: where inside one tensor pair of an operator the error lives.

Opened with `enter` on a row of the task screen's operator table. The engine's single chunked pass
(`engine.opdetail`) runs in a thread worker with a progress line (esc cancels it and goes back);
the screen then shows, in three panes:

1. TopN: the N worst elements by absolute or relative error with coordinates in the logical
   layout, both values and both errors (a lazy Line-API table: 10,000 rows cost what 20 do);
2. distribution: "A% of tensor elements (B elements) have an absolute error greater than C" with
   a movable C (`+`/`-` step along the exact bin edges of the error sketch, so B is exact without
   another pass; a typed C between edges is counted exactly by a second worker), the cumulative
   curve and the histogram;
3. stats & channels: statistics of both tensors (NaN/inf counts), whole-tensor errors, and the
   per-channel cosine / max error with the worst channels listed and a sparkline over all.

80x24 shows one pane at a time (keys 1/2/3, a tab line names them); 140x36 and up shows all
three side by side. `[`/`]` switch among the operator's tensors (its other rows in the result
table), `m` between absolute and relative error, `N` sets N. The task screen keeps its cursor.
"""
# lazy: app.stageviews
from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

import numpy as np
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from ..engine.compare.results import ResultTable
from ..engine.diagnose.opdetail import (
    C_DEFAULT,
    TOP_DEFAULT,
    TOP_MAX,
    WORDS,
    OpDetail,
    exact_count,
)
from ..engine.diagnose.oppair import OpPair, open_op
from ..engine.progress import Progress
from ..engine.sources.names import parse_tensor_name
from ..engine.tasks.task import Task
from . import formatting as fmt
from .dialogs import AskDialog
from .errorchart import (
    CumulativeChart,
    ErrorHistogram,
    channel_block,
    error_lines,
    stats_table,
    step_threshold,
    threshold_stops,
)
from .footer import Footer
from .formatting import shown
from .messages import CountDone, Counted, DetailDone, Detailed, DetailProgress, TensorRef, deliver, error_text
from .tasksnapshot import keep_found, snapshot
from .toptable import TopTable

if TYPE_CHECKING:
    from ..engine.compare.chainview import ChainView

WIDE = (140, 36)  # from this terminal size on, the three panes sit side by side
PANES = ("TopN", "distribution", "stats & channels")


def tensor_refs(table: ResultTable, row: int) -> list[TensorRef]:
    """The tensors of the row's operator (its rows in the table) in execution order."""
    cols = table.columns
    op = str(cols["npu_op"][row])
    rows = np.flatnonzero(cols["npu_op"] == op)
    rows = rows[np.argsort(cols["index"][rows], kind="stable")]
    refs: dict[tuple[str, int], TensorRef] = {}
    for r in map(int, rows):
        ref = _ref(table, r)
        if (ref.io, ref.index) not in refs or r == row:
            refs[(ref.io, ref.index)] = ref
    order = {int(r): i for i, r in enumerate(rows)}
    return sorted(refs.values(), key=lambda t: order[t.row])


def _ref(table: ResultTable, row: int) -> TensorRef:
    cols = table.columns
    op, tensor, io = str(cols["npu_op"][row]), str(cols["tensor"][row]), str(cols["io"][row])
    named, param = parse_tensor_name(tensor), str(cols["param"][row])
    if named:
        return TensorRef(row, op or named.op, named.io, named.index, param)
    return TensorRef(row, op or tensor, io if io in ("input", "output") else "output", 0, param)


# ------------------------------------------------------------------ the screen


class _Stop(Exception):
    """Raised inside a counting walk when it is no longer wanted."""


class OpScreen(Screen):
    """One operator's tensor pair in detail; `q`/esc goes back to the operator table."""

    PANE_KEYS = Binding.Group("pane", compact=True)
    C_KEYS = Binding.Group("C", compact=True)
    TENSOR_KEYS = Binding.Group("tensor", compact=True)
    BINDINGS = [
        Binding("escape", "back", "back", id="op.back"), Binding("q", "back", "back to the table", show=False, id="op.back_to_the_table"),
        Binding("1", "pane(1)", "TopN", group=PANE_KEYS, id="op.pane_1"), Binding("2", "pane(2)", "distribution", group=PANE_KEYS, id="op.pane_2"),
        Binding("3", "pane(3)", "stats & channels", group=PANE_KEYS, id="op.pane_3"),
        Binding("m", "metric", "abs/rel", id="op.metric"),
        Binding("+", "step(1)", "C to the next exact edge up", group=C_KEYS, id="op.step_next"),
        Binding("-", "step(-1)", "C to the next exact edge down", group=C_KEYS, id="op.step_previous"),
        Binding(">", "decade(1)", "C x10 (exact edge)", show=False, id="op.decade_next"),
        Binding("<", "decade(-1)", "C /10 (exact edge)", show=False, id="op.decade_previous"),
        Binding("=,C", "ask_threshold", "type C", show=False, id="op.ask_threshold"),
        Binding("[", "tensor(-1)", "previous tensor of the op", group=TENSOR_KEYS, id="op.tensor_previous"),
        Binding("]", "tensor(1)", "next tensor of the op", group=TENSOR_KEYS, id="op.tensor_next"),
        Binding("N", "ask_top", "top N", show=False, id="op.ask_top"),
    ]
    DEFAULT_CSS = """
    OpScreen #info { height: auto; max-height: 2; padding: 0 1; }
    OpScreen #stages { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; display: none; }
    OpScreen #tabs { height: 1; padding: 0 1; background: $panel; }
    OpScreen #loading { height: 1; padding: 0 1; display: none; }
    OpScreen.-computing #loading { display: block; }
    OpScreen #loading-text { width: auto; margin-right: 2; }
    OpScreen #loading ProgressBar { width: auto; }
    OpScreen #message { display: none; height: auto; padding: 1 2; }
    OpScreen.-failed #message { display: block; }
    OpScreen.-failed #panes { display: none; }
    OpScreen #panes { height: 1fr; }
    OpScreen .pane { display: none; height: 1fr; }
    OpScreen .pane.-current { display: block; }
    OpScreen #top-title { height: 1; padding: 0 1; }
    OpScreen #sentence { height: auto; padding: 0 1; }
    OpScreen #pane-stats > Static { height: auto; padding: 0 1; margin-bottom: 1; }
    OpScreen.-wide #tabs { display: none; }
    OpScreen.-wide #panes { layout: grid; grid-size: 2 2; grid-columns: 1fr 1fr; grid-rows: 1fr 1fr; }
    OpScreen.-wide .pane { display: block; border: solid $panel; border-title-align: left; }
    OpScreen.-wide .pane:focus-within { border: solid $accent; }
    OpScreen.-wide #pane-top { row-span: 2; }
    """
    HELP = (
        "What the numbers mean:\n"
        "  abs error = |npu - golden|; rel error = |npu - golden| / |golden|, shown as - where golden is 0.\n"
        "  An element holding NaN/inf on one side only has the error +inf: it is listed FIRST in both TopN\n"
        "  lists (note NaN/inf) and counts above every C. The same NaN/inf on both sides is no error.\n"
        "  Coordinates: N C (2-D), N C H (3-D), N C H W (4-D), N C D H W (5-D), else the flat index (ID).\n"
        "  Percentages are of all elements of the tensor.\n"
        "Threshold C: + and - move C to the next edge of the error sketch where the count changes (the\n"
        "  count is exact there); < and > jump by about x10; = or C types any value, then the exact count\n"
        "  is taken by a second pass (the sentence says 'about' until it is done).\n"
        "Per channel (4-D/5-D tensors, axis 1): cosine, max and mean abs error per channel; the worst\n"
        "  channels by cosine are listed, the sparklines show 1 - cosine and max abs over all channels\n"
        "  (? no cosine, ! inf) with ^ under the worst.\n"
        "The same numbers headless: accuscope op TASK_DIR OP --top N --above C (msaccucmp files).")

    def __init__(self, task: Task, row: int, chain: ChainView | None = None) -> None:
        """`task`: the opened task with the table the task screen shows (its plan serves every
        tensor); `row`: the table row opened; `chain`: a chain task's stages, the tensor's op shown at
        every stage (stageviews.stage_line)."""
        super().__init__()
        self.opened_task, self.folder, self.chain = task, task.folder, chain
        self.table: ResultTable = task.table
        self.refs = tensor_refs(self.table, row) or [_ref(self.table, row)]
        self.pos = next((i for i, r in enumerate(self.refs) if r.row == row), 0)
        self.metric = "abs"
        self.top_n = TOP_DEFAULT
        self.c = {"abs": C_DEFAULT, "rel": C_DEFAULT}
        self.pane = 1
        self.detail: OpDetail | None = None
        self.pair: OpPair | None = None
        self.shown: TensorRef | None = None
        self.error = ""
        self.computing = False
        self.counting = False
        self.shown_count: int | None = None  # the B of the sentence when it is exact
        self.took = 0.0  # seconds from the request to the detail on screen
        self._pairs: dict[tuple[str, str, int], OpPair] = {}
        self._exact: dict[tuple, int] = {}
        self._cancel = threading.Event()
        self._count_cancel = threading.Event()
        self._serial = 0
        self._started = 0.0
        self._progress = (0, 0)

    @property
    def ref(self) -> TensorRef:
        return self.refs[self.pos]

    # ---- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="crumbs")
        yield Static("", id="info")
        yield Static("", id="stages")
        yield Static("", id="tabs")
        with Horizontal(id="loading"):
            yield Static("", id="loading-text")
            yield ProgressBar(total=100, show_eta=False, id="progress")
        yield Static("", id="message")
        with Container(id="panes"):
            with Vertical(id="pane-top", classes="pane -current"):
                yield Static("", id="top-title")
                yield TopTable(id="top")
            with Vertical(id="pane-dist", classes="pane"):
                yield Static("", id="sentence")
                yield CumulativeChart(id="cumulative")
                yield ErrorHistogram(id="histogram")
            with VerticalScroll(id="pane-stats", classes="pane"):
                yield Static("", id="stats")
                yield Static("", id="errors")
                yield Static("", id="channels")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "operator detail"
        for n, pane in enumerate(("#pane-top", "#pane-dist", "#pane-stats"), 1):
            self.query_one(pane).border_title = f"{n} {PANES[n - 1]}"
        self._fit()
        self._timer = self.set_interval(0.1, self._tick, pause=True)
        self.query_one(TopTable).focus()
        self._header()
        self.compute()

    def on_resize(self) -> None:
        self._fit()
        self._header()
        if self.detail is not None:
            self._show_channels()

    def on_unmount(self) -> None:
        self._cancel.set()
        self._count_cancel.set()

    def _fit(self) -> None:
        w, h = self.app.size
        self.set_class(w >= WIDE[0] and h >= WIDE[1], "-wide")

    @property
    def wide(self) -> bool:
        return self.has_class("-wide")

    # ---- computing ---------------------------------------------------------------------------
    def compute(self) -> None:
        """(Re)compute the detail of the current tensor with the current N in a thread."""
        self._cancel.set()
        self._cancel = threading.Event()
        self._serial += 1
        self.computing = True
        self._started = time.perf_counter()
        self._progress = (0, 0)
        self.add_class("-computing")
        self.query_one(ProgressBar).update(total=100, progress=0)
        self._tick()
        self._timer.resume()
        self._detail_worker(snapshot(self.opened_task), self._pairs.get(self.ref.key), self._serial, self.ref,
                            self.top_n, self._cancel)

    @work(thread=True, exclusive=True, group="opdetail", exit_on_error=False)
    def _detail_worker(self, task: Task, pair: OpPair | None, serial: int, ref: TensorRef, top: int,
                       cancel: threading.Event) -> None:
        """The detail of `ref` (its `pair` when opened before, else opened on `task`, the screen's snapshot
        of the opened task, whose plan it finds once: keep_found)."""
        def progress(p: Progress) -> None:
            self.post_message(DetailProgress(p.done, p.total))

        def run() -> Detailed:
            opened = pair if pair is not None else open_op(task, ref.op, ref.io, ref.index)
            return Detailed(serial, ref, opened, opened.detail(top=top, progress=progress, cancel=cancel), task)
        deliver(self, DetailDone, run)

    @on(DetailProgress)
    def detail_progress(self, message: DetailProgress) -> None:
        """Kept for the next tick of `_tick` (one repaint per tick)."""
        if self.computing:
            self._progress = (message.done, message.total)

    def _tick(self) -> None:
        done, n = self._progress
        elapsed = time.perf_counter() - self._started
        what = f"reading {self.ref.name}" if n == 0 else f"comparing {done:,}/{n:,} elements"
        self.query_one("#loading-text", Static).update(shown(f"{what} · {elapsed:.1f} s · esc cancels"))
        if n:
            self.query_one(ProgressBar).update(total=n, progress=done)

    def _stop_computing(self) -> None:
        self.computing = False
        self._timer.pause()
        self.remove_class("-computing")

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count_worker(self, key: tuple, pair: OpPair, c: float, by: str, cancel: threading.Event) -> None:
        chunks = pair.source()

        def source():
            for chunk in chunks():
                if cancel.is_set():
                    raise _Stop
                yield chunk
        deliver(self, CountDone, lambda: Counted(key, exact_count(source, c, by)))

    @on(DetailDone)
    def detail_done(self, message: DetailDone) -> None:
        if message.result is None:
            self._stop_computing()
            self.show_error(message.error)
            return
        done = message.result
        keep_found(self.opened_task, done.task)
        if done.serial != self._serial or done.detail is None:
            return
        self._pairs[done.ref.key] = done.pair
        self._stop_computing()
        self.took = time.perf_counter() - self._started
        self.show_detail(done.ref, done.pair, done.detail)

    @on(CountDone)
    def count_done(self, message: CountDone) -> None:
        if message.result is not None:
            key = message.result.key
            self._exact[key] = message.result.exact
            if key == self._count_key():
                self.update_threshold()
        elif not isinstance(message.error, _Stop):
            self.counting = False
            self.notify(f"exact count failed: {message.error}", severity="error")

    # ---- showing -----------------------------------------------------------------------------
    def show_detail(self, ref: TensorRef, pair: OpPair, detail: OpDetail) -> None:
        self.detail, self.pair, self.shown = detail, pair, ref
        self.error = ""
        self.remove_class("-failed")
        self._header()
        self._show_top(detail)
        self.update_threshold()
        d = detail
        self.query_one("#stats", Static).update(stats_table(d, pair.info))
        self.query_one("#errors", Static).update(error_lines(d))
        self._show_channels()

    def show_error(self, error: BaseException | None) -> None:
        self.error = text = error_text(error, OSError, ValueError)
        self.detail = None
        self.add_class("-failed")
        others = "   [b]\\[ ][/] another tensor of the op" if len(self.refs) > 1 else ""
        self.query_one("#message", Static).update(
            f"[b]cannot show {shown(self.ref.name)}[/]\n{shown(text)}\n\n[b]esc[/] back{others}")
        self._header()

    def _header(self) -> None:
        width = max(20, self.app.size.width - 2)
        ref = self.ref
        head = f"accuscope › tasks › {self.folder.name} › "
        self.query_one("#crumbs", Static).update(
            shown(head) + "[b]" + shown(fmt.fit(ref.op, max(8, width - len(head)), keep="end")) + "[/]")
        slots = " ".join(f"[b reverse]▸{r.slot}[/]" if i == self.pos else r.slot for i, r in enumerate(self.refs))
        parts = [slots]
        d = self.detail if self.shown == ref else None
        if d is not None:
            assert self.pair is not None  # show_detail sets the pair with the detail
            info = self.pair.info
            shape = "[" + ",".join(map(str, d.shape)) + "]"
            parts += [shown(info.op_type or "?"), shape, shown(fmt.dtypes(info.npu_dtype, info.golden_dtype) or "?"),
                      f"{d.n:,} elements"]
            line2 = f"cos {fmt.number(d.cosine, 9, -1)}"
            if d.abs.nonfinite:
                line2 += f" · [b]{d.abs.nonfinite:,} NaN/inf[/]"
            line2 += (f" · max abs {fmt.number(d.abs.max, 9)} · max rel {fmt.number(d.rel.max, 9)} · "
                      f"mean abs {fmt.number(d.mean_abs, 9)} · {self.took:.2f} s")
            text = " · ".join(parts) + "\n" + line2
        else:
            text = " · ".join(parts) + ("\n" if self.computing else "")
        self.query_one("#info", Static).update(text)
        if self.chain is not None and len(self.chain.table) == len(self.table):
            from .stageviews import stage_line
            stages = self.query_one("#stages", Static)
            stages.display = True
            stages.update(stage_line(self.chain, ref.row))
        tabs = []
        for n, name in enumerate(PANES, 1):
            tabs.append(f"[b reverse] ▸{n} {name} [/]" if n == self.pane else f" {n} {name} ")
        by = WORDS[self.metric]
        self.query_one("#tabs", Static).update(" ".join(tabs) + f" │ {by} (m) · top {self.top_n} (N)")

    def _show_top(self, d: OpDetail) -> None:
        top = d.top(self.metric)
        table = self.query_one(TopTable)
        word = WORDS[self.metric]
        empty = f"no element has a {word} error" if not len(top) else ""
        table.show(top, d.shape, self.metric, empty)
        self.query_one("#top-title", Static).update(
            f"[b]Top {len(top):,}[/] of {d.n:,} elements by [b]{word}[/] error ▼ · NaN/inf first")

    def _show_channels(self) -> None:
        d = self.detail
        if d is None:
            return
        pane = self.query_one("#pane-stats")
        width = (pane.size.width or self.app.size.width) - 4
        self.query_one("#channels", Static).update(channel_block(d.channels, d.shape, max(30, width)))

    def _count_key(self) -> tuple:
        return (self.shown.key if self.shown else None, self.metric, self.c[self.metric])

    def update_threshold(self) -> None:
        """The sentence for the current C (exact from the sketch, from the cache, or counted in a
        worker), the charts' C line."""
        d = self.detail
        if d is None:
            return
        sk = d.sketch(self.metric)
        c = self.c[self.metric]
        low, high = sk.count_above(c)
        count: int | None = low if low == high else self._exact.get(self._count_key())
        pending = ""
        self._count_cancel.set()  # a walk for an earlier C is no longer wanted
        self.counting = count is None
        if count is None:
            self._count_cancel = threading.Event()
            self._count_worker(self._count_key(), self.pair, c, self.metric, self._count_cancel)
            pending = " [i](counting exactly…)[/]"
        self.shown_count = count
        exact = "exact" if count is not None else "estimate"
        self.query_one("#sentence", Static).update(
            f"[b]{shown(sk.sentence(c, count))}[/]{pending}\n"
            f"C = {c!r} ({exact}) · [b]+[/]/[b]-[/] next exact edge · [b]<[/]/[b]>[/] x10 · [b]=[/] type C")
        self.query_one(CumulativeChart).show(sk, c)
        self.query_one(ErrorHistogram).show(sk, c)

    # ---- actions -----------------------------------------------------------------------------
    def action_back(self) -> None:
        if self.computing:
            self._cancel.set()
        self._count_cancel.set()
        self.app.pop_screen()

    def action_pane(self, n: int) -> None:
        self.pane = n
        for i, pane in enumerate(("#pane-top", "#pane-dist", "#pane-stats"), 1):
            self.query_one(pane).set_class(i == n, "-current")
        if n == 1:
            self.query_one(TopTable).focus()
        elif n == 3:
            self.query_one("#pane-stats").focus()
        else:
            self.set_focus(None)
        self._header()

    def action_metric(self) -> None:
        self.metric = "rel" if self.metric == "abs" else "abs"
        self._header()
        if self.detail is not None:
            self._show_top(self.detail)
            self.update_threshold()
        self.notify(f"by {WORDS[self.metric]} error", timeout=2)

    def _set_threshold(self, c: float) -> None:
        self.c[self.metric] = float(c)
        self.update_threshold()

    def action_step(self, step: int) -> None:
        if self.detail is None:
            return
        sk = self.detail.sketch(self.metric)
        c = self.c[self.metric]
        new = step_threshold(sk, c, step)
        if new == c:
            self.notify("C is at the " + ("largest" if step > 0 else "smallest") + " exact edge", timeout=2)
            return
        self._set_threshold(new)

    def action_decade(self, step: int) -> None:
        if self.detail is None:
            return
        stops = threshold_stops(self.detail.sketch(self.metric))
        c = self.c[self.metric]
        if step > 0:
            target = c * 10 if c > 0 else 0.0
            above = stops[stops > max(target, c) * (1 - 1e-12)] if c > 0 else stops[stops > 0]
            new = float(above[0]) if len(above) else float(stops[-1])
        else:
            below = stops[stops <= c / 10]
            new = float(below[-1]) if len(below) else 0.0
        if new != c:
            self._set_threshold(new)

    def action_ask_threshold(self) -> None:
        if self.detail is None:
            return

        def check(text: str) -> str:
            try:
                v = float(text)
            except ValueError:
                return f"{text!r} is not a number"
            if math.isnan(v) or v < 0:
                return "C must be a number >= 0"
            return ""

        def done(text: str | None) -> None:
            if text is not None:
                self._set_threshold(float(text))
        word = WORDS[self.metric]
        self.app.push_screen(AskDialog(f"Threshold C of the {word} error (>= 0, e.g. 0.001 or 1e-4):",
                                       f"{self.c[self.metric]:g}", check), done)

    def action_ask_top(self) -> None:
        def check(text: str) -> str:
            if not text.strip().isdigit() or not 1 <= int(text) <= TOP_MAX:
                return f"a whole number within 1..{TOP_MAX}"
            return ""

        def done(text: str | None) -> None:
            if text is not None and int(text) != self.top_n:
                self.top_n = int(text)
                self._header()
                self.compute()
        self.app.push_screen(AskDialog(f"TopN: how many elements to list (1..{TOP_MAX}):", str(self.top_n),
                                       check), done)

    def action_tensor(self, step: int) -> None:
        new = self.pos + step
        if not 0 <= new < len(self.refs):
            self.notify(f"{self.ref.slot} is the {'last' if step > 0 else 'first'} tensor of the op", timeout=2)
            return
        self.pos = new
        self.clear()
        self.compute()

    def clear(self) -> None:
        """Forget the shown detail (another tensor is on its way)."""
        self.detail, self.shown, self.shown_count = None, None, None
        self.query_one(TopTable).show(None, (1,), self.metric, "computing…")
        self.query_one("#top-title", Static).update("")
        self.query_one("#sentence", Static).update("")
        self.query_one(CumulativeChart).show(None, 0.0)
        self.query_one(ErrorHistogram).show(None, 0.0)
        for name in ("#stats", "#errors", "#channels"):
            self.query_one(name, Static).update("")
        self._header()
