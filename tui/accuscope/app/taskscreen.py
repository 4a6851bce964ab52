"""The task screen: operator table, metric chart, summary strip and status bar; it also runs a
comparison in a thread worker, rows appearing as they are computed."""
# lazy: app.advicescreen, app.dialogs, app.graphscreen, app.opscreen, app.pairpicker, app.rowdetail, app.stageviews,
# lazy: engine.compare.comparison, engine.compare.crossmap, engine.diagnose.advisor, engine.tasks.rankrun,
# lazy: engine.tasks.taskrun
from __future__ import annotations

import math
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, ProgressBar, Static

from ..engine.compare.columns import CSV_OF, METRIC
from ..engine.compare.results import FilterError, ResultTable, text_array
from ..engine.compare.thresholds import Thresholds, parse_assignments
from ..engine.sources.names import parse_tensor_name, printable
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import Task, TaskFolder, load_head, load_task
from ..engine.tasks.taskdoc import TASK_JSON, TaskDoc
from .chart import MetricChart
from .footer import Footer
from .formatting import shown
from .messages import (
    AdviceDone,
    ChainDone,
    CompareDone,
    ComparePlanned,
    CompareRows,
    RankCompared,
    TaskLoaded,
    ThresholdsSaved,
    deliver,
    error_text,
)
from .opcolumns import measured
from .opener import opener
from .optable import OperatorTable
from .stageviews import ChainChart, judged_chain
from .summary import summary_lines
from .tasksnapshot import snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..engine.compare import comparison as engine
    from ..engine.compare.chainview import ChainView
    from ..engine.compare.spec import CompareSpec
    from ..engine.diagnose.advice import Advice
    from ..engine.progress import Progress
    from .advicescreen import AdviceScreen

# Imported where they are used, not before the first frame: the advisor, the comparison runners and
# the screens and dialogs a key opens (advice, graph, op, row detail) cost 0.2 s of a start that has 1 s.

CANCEL_QUESTION = "Cancel the running comparison? (the previous result stays)"


def advice_columns(advice: Advice, rows: int) -> dict[str, np.ndarray]:
    """The advice's per-row columns as the op table shows them beside the result (filters like
    `origin == "introduced"` or `iso_cos < 0.99` and sorting see them): `origin` and `iso_cos` as text."""
    columns = advice.columns(rows)
    return {"origin": columns["origin"],
            "iso_cos": text_array("" if math.isnan(v) else f"{v:.6f}" for v in columns["iso_cos"])}


class TaskScreen(Screen):
    BINDINGS = [
        Binding("slash", "prompt('search')", "search", id="task.search"), Binding("f", "prompt('filter')", "filter", id="task.filter"),
        Binding("a", "advice", "advisor", id="task.advice"), Binding("g", "graph", "graph", id="task.graph"),
        Binding("t", "thresholds", "thresholds", id="task.thresholds"), Binding("c", "chart_metric(1)", "chart metric", id="task.chart_metric_next"),
        Binding("C", "chart_metric(-1)", "previous chart metric", show=False, id="task.chart_metric_previous"),
        Binding("z", "zoom", "maximize pane", id="task.zoom"),
        Binding("s", "stages", "a chain's stages", show=False, id="task.stages"),
        Binding("plus", "decide_pair(True)", "accept the structural pair", key_display="+", show=False,
                id="task.accept_pair"),
        Binding("minus", "decide_pair(False)", "reject the structural pair", key_display="-", show=False,
                id="task.reject_pair"),
        Binding("equals_sign", "decide_tensor(True)", "accept this tensor's pair", key_display="=", show=False,
                id="task.accept_tensor"),
        Binding("underscore", "decide_tensor(False)", "reject this tensor's pair", key_display="_", show=False,
                id="task.reject_tensor"),
        Binding("p", "pick_pair", "pick this tensor's golden counterpart", show=False, id="task.pick_pair"),
        Binding("R", "rerun", "re-run", show=False, id="task.rerun"), Binding("D", "row_details", "row details", show=False, id="task.row_details"),
        Binding("escape", "back", "back / clear / cancel", show=False, id="task.back"),
        Binding("q", "back(True)", "back to the tasks", show=False, id="task.back_to_tasks"),
    ]
    DEFAULT_CSS = """
    TaskScreen #summary { height: auto; max-height: 2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    TaskScreen OperatorTable { height: 1fr; min-height: 5; }
    TaskScreen MetricChart { height: 8; }
    TaskScreen #prompt { display: none; border: none; height: 1; padding: 0 1; }
    TaskScreen #prompt.shown { display: block; }
    TaskScreen #statusline { height: 1; background: $panel; padding: 0 1; }
    TaskScreen #status { width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    TaskScreen ProgressBar { width: auto; display: none; }
    TaskScreen ProgressBar.running { display: block; }
    TaskScreen.-tall MetricChart { height: 14; }
    TaskScreen MetricChart.-maximized { height: 1fr; }  /* z: the whole screen, not its 8 rows amid hatching */
    """
    HELP_TEXT = ("Filter expressions: comparisons of columns with numbers or text, joined by and/or/not, e.g.\n"
                 "  cos < 0.99 and type == \"Conv2D\"      \"conv\" in name      isnan(kl) or max_abs > 1\n"
                 "  under(type, \"layers.1\"): a module path and every one under it (layers.1.attn, not layers.10)\n"
                 f"Columns by short key ({', '.join(METRIC)}) or CSV name.\n"
                 "Rows breaking a threshold are marked ✗ and red; exempt rows (TransData, inputs, "
                 "device-only ops) never fail. Thresholds: t, then e.g. `cos=0.98 kl=off`.")
    PAIRS_HELP = ("Two msprobe dumps: + accepts a --match structure row's call pair (how == \"structure\", its "
                "confidence in the reason) and - rejects it; = accepts the row's one tensor pair and _ rejects it, "
                "the rest of its call as before; p picks the row's golden counterpart from a list (same call first, then "
                "alike in shape and dtype; type to filter). Saved in the task's pairs.yaml, which its next run (R) "
                "reads (accepted or picked: how mapping; rejected: unpaired), as \"call:input:1\": \"golden "
                "call:input:2\".")
    PAIR_ACTIONS = ("decide_pair", "decide_tensor", "pick_pair")  # the keys of PAIRS_HELP: + - = _ p

    def __init__(self, task: Task | None = None, run: tuple[CompareSpec, Path] | None = None) -> None:
        super().__init__()
        self.opened = task
        self.run_request = run
        self.folder = Path(run[1]) if run else task.folder if task else Path(".")
        self.prompt_mode = ""
        self.cancel = threading.Event()
        self.running = False
        self._arrived: list[tuple[int, dict]] = []  # rows the worker sent, not in the table yet
        self._plan: engine.Plan | None = None
        self._live: ResultTable | None = None
        self._done = 0
        self._progress_text = ""
        self.advice: Advice | None = None  # the advice for the thresholds shown (None while it is made)
        self.advising = False
        self.awaiting: AdviceScreen | None = None  # the advisor screen opened before its advice came (judging…)
        self.chain_columns: dict[str, np.ndarray] = {}  # a chain task's stage group per row (chain_worker)
        self.chain_view: ChainView | None = None  # its stages op by op, under the thresholds shown
        self.saving, self._save_again = False, False  # thresholds being saved by save_worker
        self._edited_while_running: Thresholds | None = None  # applied to the run's result (reload)
        self.run_error = ""  # why the last run started here failed
        self.decided: dict[str, bool] = {}  # NPU call or tensor -> accepted: the pairs decided since the last run

    # what HelpScreen shows below the keys; textual declares HELP a class attribute, this screen's depends
    # on its task (textual reads it on the instance)
    @property
    def HELP(self) -> str:  # type: ignore[override]
        return f"{self.HELP_TEXT}\n{self.PAIRS_HELP}" if self.msprobe_pairs else self.HELP_TEXT

    @property
    def msprobe_pairs(self) -> bool:
        """The task compares two msprobe dumps: its pairs may be decided here (PAIR_ACTIONS)."""
        return self.opened is not None and self.opened.doc.pairs_calls

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """The keys deciding pairs are keys of a task of two msprobe dumps only: elsewhere neither they
        nor the help know them."""
        return self.msprobe_pairs if action in self.PAIR_ACTIONS else True

    # ---- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="crumbs")
        yield Static("", id="summary")
        yield OperatorTable(id="table")
        yield ChainChart(id="chart")
        yield Input(id="prompt")
        with Horizontal(id="statusline"):
            yield Static("", id="status")
            yield ProgressBar(total=None, show_eta=True, id="progress")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.app.size.height >= 40, "-tall")
        csv = self.opened.csv if self.opened is not None and self.opened.doc.foreign else None  # a foreign CSV's
        name = csv.name if csv is not None else self.folder.name
        self.title = f"task {name}"
        self.query_one("#crumbs", Static).update(f"accuscope › tasks › [b]{shown(name)}[/]")
        if self.opened is not None:
            self.show_table(*self.opened.result)
            for warning in self.opened.warnings:
                self.notify(warning, severity="warning", timeout=8)
        if self.run_request is not None:
            self.start_run(*self.run_request)
        elif self.reading_rest:  # after the first frame: the rest of the table, then the advisor
            self.after_first_frame(self.load_worker, self.folder)
        else:  # after the first frame: reading a saved advice.json of a large task takes seconds
            self.after_first_frame(self.opened_whole)
        self.query_one(OperatorTable).focus()

    def after_first_frame(self, callback: Callable[..., object], *args: object) -> None:
        """`callback(*args)` once the screen's first frame is written. One call_after_refresh from
        on_mount runs before it (the footer's keys arrive by a refresh of their own, and the frame
        with them comes after): a worker started there took the GIL from the first paint (importing
        the advisor, 25-40 ms; the demo task's first frame 4-6% later). Two run after it."""
        self.call_after_refresh(self.call_after_refresh, callback, *args)

    def on_resize(self) -> None:
        self.set_class(self.app.size.height >= 40, "-tall")

    @property
    def reading_total(self) -> int | None:
        """The whole table's rows while it holds the task's first rows only (load_task's head) and the
        rest is read; None when it holds them all."""
        return self.opened.total if self.opened is not None else None

    @property
    def reading_rest(self) -> bool:
        """The table holds the task's first rows only while the rest is read (not `loading`: textual's
        Widget.loading, its loading indicator, which disables the widget)."""
        return self.reading_total is not None

    def still_loading(self) -> bool:
        """Whether the table is still being read (then it says so): keys that need every row wait."""
        total = self.reading_total
        if total is not None:
            self.notify(f"still reading the table ({total:,} rows): a moment", timeout=3)
        return total is not None

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_worker(self, folder: Path) -> None:
        """The whole task of an opened one that holds its first rows only (load_head): every task shown
        is opened so (AccuscopeApp.open_task, `reload`), and this is where the rest is read."""
        def load() -> Task:
            task = load_task(folder)
            measured(task.result[0])  # the op table's column widths, here rather than on the app's thread
            return task
        deliver(self, TaskLoaded, load)

    @on(TaskLoaded)
    def task_loaded(self, message: TaskLoaded) -> None:
        """The whole table replaces its first rows (the cursor stays on its row), then the advisor."""
        task = message.result
        if task is None:
            self.notify(f"reading the task: {printable(str(message.error))}", severity="error", timeout=15)
            if self.opened is not None:  # it is: load_worker reads the rest of the opened task's rows
                self.opened.total = None  # what is shown is all there is
            self.refresh_views()
            return
        self.opened = task
        self.show_table(*task.result)
        for warning in task.warnings:
            self.notify(warning, severity="warning", timeout=8)
        self.opened_whole()

    def opened_whole(self) -> None:
        """The opened task's whole table is shown: thresholds edited during the run that made it apply
        to it now (and are saved), else the advisor starts."""
        edited, self._edited_while_running = self._edited_while_running, None
        if edited is not None:
            self.use_thresholds(edited)
        else:
            self.start_advice()

    @property
    def table_widget(self) -> OperatorTable:
        return self.query_one(OperatorTable)

    @property
    def thresholds(self) -> Thresholds:
        return self.opened.result[1] if self.opened is not None else self.requested_run[0].thresholds

    @property
    def requested_run(self) -> tuple[CompareSpec, Path]:
        """The comparison the screen was opened to run where it shows no opened task (it is given one
        of the two); LookupError where it was given neither."""
        if self.run_request is None:
            raise LookupError("the task screen was given neither a task nor a comparison to run")
        return self.run_request

    def show_table(self, table: ResultTable, thresholds: Thresholds) -> None:
        """Load the table; its ViewChanged message then refreshes chart, summary and status."""
        chart = self.query_one(MetricChart)
        if chart.metric not in table.metric_keys and table.metric_keys:
            chart.metric = table.metric_keys[0]
        self.table_widget.load(table, thresholds, total=self.reading_total)

    def refresh_views(self) -> None:
        widget = self.table_widget
        if not self.reading_rest:  # a chart of the first rows would look like the whole
            self.query_one(MetricChart).show(widget.table, widget.view, widget.thresholds, widget.cursor_row)
        lines = summary_lines(widget.table, widget.thresholds, running=self.running, advice=self.advice,
                              advising=self.advice_coming,
                              warnings=self.opened.doc.coverage_warnings if self.opened else [],
                              counting=self.reading_total,
                              basis=self.opened.basis if self.opened else None,
                              chain=judged_chain(self.opened.doc.chain, self.chain_view)
                              if self.opened and self.opened.doc.chain else None)
        self.query_one("#summary", Static).update("\n".join(lines))
        self.update_status()

    def update_status(self) -> None:
        state = self.state_line()
        decided = ""
        if self.decided:  # first: the pairs the re-run will read
            accepted = sum(self.decided.values())
            decided = f"pairs +{accepted} -{len(self.decided) - accepted} (R re-runs with them)"
        self.query_one("#status", Static).update(
            shown(" · ".join(p for p in (decided, self.table_widget.status, state) if p)))
        self.table_widget.empty_text = state or "no rows"  # a reactive: repaints when it changes

    def state_line(self) -> str:
        """The run's progress, why the last run here failed, or the state a failed or cancelled task
        was left in with its error."""
        if self.running:
            return self._progress_text or "comparing: starting"
        if self.saving:
            return "thresholds: saving…"
        if self.run_error:
            return f"failed: {printable(self.run_error)}"
        doc = self.opened.doc if self.opened else TaskDoc()
        state = doc.state
        if state in ("failed", "cancelled") or (state == "running" and self.opened is not None
                                                 and not len(self.opened.result[0])):
            error = printable(doc.error)
            return f"{state}: {error}" if error else state
        return ""

    # ---- table events -------------------------------------------------------------------------
    def on_operator_table_highlighted(self, event: OperatorTable.Highlighted) -> None:
        self.query_one(MetricChart).select(event.row)

    def on_operator_table_view_changed(self, event: OperatorTable.ViewChanged) -> None:
        self.refresh_views()

    def shown_task(self) -> Task:
        """The task whose table is shown, handed with a row to the screens a key opens: the opened
        one; during a run (or when none could be opened) the folder's task.json with the rows shown
        so far and the thresholds they are judged by."""
        if self.opened is not None and not self.running:
            return self.opened
        found = TaskFolder.at(self.folder, strict=False)
        return Task(found.folder, found.doc, found.csv, table=self.table_widget.table,
                    thresholds=self.table_widget.thresholds)

    def on_operator_table_selected(self, event: OperatorTable.Selected) -> None:
        if self.still_loading():
            return
        from .opscreen import OpScreen
        self.app.push_screen(OpScreen(self.shown_task(), event.row, None if self.running else self.chain_view))

    def action_row_details(self) -> None:
        widget = self.table_widget
        if widget.cursor_row is not None and not self.still_loading():
            from .rowdetail import RowDetail
            view = None if self.running else self.chain_view  # its stage group is the detail's stage table
            extra = {k: v for k, v in widget.extra.items() if view is None or k not in self.chain_columns}
            self.app.push_screen(RowDetail(self.shown_task(), widget.cursor_row, extra, view))

    # ---- prompt: search and filter ------------------------------------------------------------
    def action_prompt(self, mode: str) -> None:
        if self.still_loading():
            return
        prompt = self.query_one("#prompt", Input)
        self.prompt_mode = mode
        widget = self.table_widget
        prompt.placeholder = ("search op, type or tensor name (n/N: next/previous)" if mode == "search"
                              else 'filter, e.g. cos < 0.99 and type == "Conv2D"')
        prompt.value = widget.search_text if mode == "search" else widget.filter
        prompt.add_class("shown")
        prompt.focus()

    def close_prompt(self) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.remove_class("shown")
        self.prompt_mode = ""
        self.table_widget.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "prompt":
            return
        widget = self.table_widget
        text = event.value.strip()
        if self.prompt_mode == "search":
            if text and not widget.search(text):
                self.notify(f"no op matches {text!r}", severity="warning")
        else:
            try:
                shown = widget.set_filter(text) if text else widget.clear_filter()
            except FilterError as exc:
                self.notify(str(exc), title="filter", severity="error", timeout=8)
                return  # keep the prompt open to fix it
            if text and not shown:
                self.notify("no row matches the filter", severity="warning")
        self.close_prompt()  # the table's ViewChanged refreshes the views

    def action_back(self, leave: bool = False) -> None:
        """esc: close the prompt, else cancel a run, else clear the filter, else leave; q: leave."""
        if self.prompt_mode:
            self.close_prompt()
        elif self.running:
            from .dialogs import ConfirmDialog

            def answer(yes: bool | None) -> None:
                if yes:
                    self.cancel.set()
            self.app.push_screen(ConfirmDialog(CANCEL_QUESTION), answer)
        elif self.table_widget.filter and not leave:
            self.table_widget.clear_filter()
        else:
            self.app.pop_screen()

    # ---- chart, thresholds, zoom --------------------------------------------------------------
    def action_chart_metric(self, step: int) -> None:
        chart = self.query_one(MetricChart)
        keys = self.table_widget.table.metric_keys
        if not keys:
            return
        at = keys.index(chart.metric) if chart.metric in keys else -1
        chart.metric = keys[(at + step) % len(keys)]
        self.refresh_views()
        self.notify(f"chart: {CSV_OF.get(chart.metric, chart.metric)}", timeout=2)

    def action_thresholds(self) -> None:
        if self.still_loading():
            return
        def check(text: str) -> str:
            try:
                parse_assignments(text)
            except ValueError as exc:
                return str(exc)
            return ""

        def done(text: str | None) -> None:
            if text and text.strip():
                self.use_thresholds(self.thresholds.edited(text))  # only the named ones change
        from .dialogs import AskDialog
        self.app.push_screen(AskDialog(f"Thresholds now: {shown(self.thresholds)}\nChange (NAME=VALUE, e.g. "
                                       "cos=0.98 kl=off; off removes one; cos fails below, the rest above):",
                                       "", check), done)

    def use_thresholds(self, thresholds: Thresholds) -> None:
        """Judge the rows by `thresholds`, a new value in place of the task's (what a worker holds, the
        running comparison's included, never changes under it), and save them; edited during a run,
        they are applied to its result when it lands (`reload`)."""
        if self.opened is not None:
            self.opened.thresholds = thresholds
        else:
            spec, folder = self.requested_run
            self.run_request = (replace(spec, thresholds=thresholds), folder)
        if self.running:
            self._edited_while_running = thresholds
        self.advice = None  # it judged the rows under the thresholds replaced: the advisor judges them again
        self.show_table(self.table_widget.table, thresholds)  # the RowState shows them at once
        if not self.save_thresholds():
            self.start_advice()

    def save_thresholds(self) -> bool:
        """Save the result again under the thresholds in a worker (the status says saving… until it
        lands; an edit meanwhile saves once more after it); False when this task is not saved."""
        if self.opened is None or self.opened.doc.foreign or self.running:
            return False
        if self.saving:
            self._save_again = True
            return True
        self.saving, self._save_again = True, False
        self.update_status()
        task = snapshot(self.opened)
        self.save_worker(task, task.thresholds)
        return True

    @work(thread=True, exclusive=True, group="save", exit_on_error=False)
    def save_worker(self, task: Task, thresholds: Thresholds) -> None:
        """Save `task`, the worker's own snapshot of the opened task, under `thresholds` (its copy of
        those shown); what it wrote (result file, task.json) comes back to `thresholds_saved`."""
        def save() -> Task:
            task.set_thresholds(thresholds)
            return task
        deliver(self, ThresholdsSaved, save)

    @on(ThresholdsSaved)
    def thresholds_saved(self, message: ThresholdsSaved) -> None:
        self.saving = False
        saved = message.result  # the worker's snapshot that saved (None: it failed)
        if saved is not None and self.opened is not None:  # the opened task names what was written
            self.opened.csv, self.opened.doc = saved.csv, saved.doc
        if self._save_again:
            self.save_thresholds()
            return
        self.update_status()
        if message.error is not None:  # not saved: the advice still follows the thresholds shown
            self.notify(f"saving thresholds in {printable(str(self.folder / TASK_JSON))}: "
                        f"{printable(str(message.error))}", severity="error", timeout=8)
        else:
            self.notify("thresholds saved in task.json", timeout=3)
        self.start_advice()  # on the saved result, or on the result shown when it could not be saved
        if not self.advising:  # none comes (a task the advisor does not advise on)
            self.apply_advice(None, "no advice for this task")

    def action_stages(self) -> None:
        """A chain task (tasks/chainrun.py): choose a stage's comparison with the reference, or its step
        against the stage before, and open it."""
        chain = (self.opened.doc.chain if self.opened else None) or {}
        stages = [st for st in chain.get("stages") or [] if isinstance(st, dict)]
        if not stages:
            self.notify("not a chain of stages: compare --npu A=.. --npu B=.. makes one", timeout=4)
            return
        folders: list[Path] = []
        choices: list[tuple[str, int]] = []
        for st in stages:
            for key, against in (("task", "the reference"), ("step", "the stage before")):
                where = st.get(key)
                if isinstance(where, str) and not Path(where).is_absolute() and ".." not in Path(where).parts:
                    choices.append((f"{printable(st.get('label', ''))}: {st.get('verdict', '') if key == 'task' else 'step'}"
                                    f" against {against}", len(folders)))
                    folders.append(self.folder / where)

        def chosen(k: int | None) -> None:
            if k is None or folders[k].resolve() == self.folder.resolve():
                return
            opener(self).open_task(folders[k])  # a notice says why when it cannot be opened
        from .dialogs import ChooseDialog
        self.app.push_screen(ChooseDialog(f"the chain's stages ({printable(str(chain.get('line', '')))})", choices),
                             chosen)

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused)

    def decision_row(self) -> dict | None:
        """The row under the cursor where a pair may be decided now (a task of ours, not running or loading)."""
        widget = self.table_widget
        if widget.cursor_row is None or self.running or self.opened is None or self.opened.doc.foreign \
                or self.still_loading():
            return None
        return widget.table.row(widget.cursor_row)

    def save_decision(self, npu: str, golden: str, accept: bool, what: str = "", verb: str = "") -> None:
        """Save one decision in the task's pairs.yaml (Task.decide_pair) and say so; an error is a notice."""
        assert self.opened is not None
        try:
            path = self.opened.decide_pair(npu, golden if accept else None)
        except (SourceError, OSError) as exc:
            self.notify(printable(str(exc)), title="pair", markup=False, severity="error", timeout=10)
            return
        self.decided[npu] = accept
        verb = verb or ("accepted" if accept else "rejected")
        self.notify(f"{what}{verb}: {npu} ~ {golden} (saved in {path.name})"
                    + ("; R re-runs with it" if verb == "picked" else ""), markup=False, timeout=8 if verb == "picked" else 5)
        self.update_status()

    def action_decide_pair(self, accept: bool) -> None:
        """+ / -: accept or reject the inferred pair under the cursor (by name variants or --match structure),
        for the task's next run."""
        row = self.decision_row()
        if row is None:
            return
        npu, golden = str(row.get("npu_op", "")), str(row.get("golden_op", ""))
        from ..engine.compare.crossmap import INFERRED
        if row.get("how") not in INFERRED:
            how = row.get("how") or "unpaired"
            self.notify(f"{npu} is not an inferred pair (how: {how}): + and - decide the pairs made by "
                        "name variants or --match structure", markup=False, timeout=5)
            return
        self.save_decision(npu, golden, accept)

    def action_decide_tensor(self, accept: bool) -> None:
        """= / _: accept or reject the pair of the one tensor under the cursor (`call:input:1`), for the task's
        next run; the other tensors of its call are paired as before."""
        row = self.decision_row()
        if row is None or self.opened is None:
            return
        tensor, golden = parse_tensor_name(str(row.get("tensor", ""))), str(row.get("golden_op", ""))
        if not self.msprobe_pairs or tensor is None:
            self.notify("= and _ decide one tensor's pair between two msprobe dumps", markup=False, timeout=5)
            return
        name = f"{tensor.op}:{tensor.io}:{tensor.index}"
        if not row.get("how") or not golden:
            self.notify(f"{name} is not paired: pair it by hand in the task's pairs.yaml "
                        f'("{name}": "golden call:{tensor.io}:{tensor.index}")', markup=False, timeout=8)
            return
        if accept and row.get("how") == "mapping":
            self.notify(f"{name} is paired by the task's mapping file already", markup=False, timeout=5)
            return
        # every rule a decision may follow pairs slot for slot: the golden tensor is the golden call's same slot
        self.save_decision(name, f"{golden}:{tensor.io}:{tensor.index}", accept, "tensor ")

    def action_pick_pair(self) -> None:
        """p: choose the golden tensor the row's NPU tensor pairs with (paired wrongly, or unpaired), from the
        golden side's tensors (PairPicker); saved as `npu call:input:1: golden call:input:2` for the next run."""
        row = self.decision_row()
        if row is None or self.opened is None:
            return
        tensor = parse_tensor_name(str(row.get("tensor", "")))
        if not self.msprobe_pairs or tensor is None:
            self.notify("p picks one tensor's golden counterpart between two msprobe dumps", markup=False, timeout=5)
            return
        from .pairpicker import PairPicker
        name = f"{tensor.op}:{tensor.io}:{tensor.index}"

        def picked(golden: str | None) -> None:
            if golden:
                self.save_decision(name, golden, True, "tensor ", "picked")
        self.app.push_screen(PairPicker(self.opened, name), picked)

    def action_rerun(self) -> None:
        if self.running or self.saving or self.opened is None or self.opened.doc.foreign or self.still_loading():
            return
        opener(self).rerun_spec(self.opened, lambda spec: self.start_run(spec, self.folder))

    def action_graph(self) -> None:
        if self.still_loading():
            return
        from .graphscreen import GraphResult, GraphScreen
        widget = self.table_widget

        def back(result: GraphResult | None) -> None:
            if result is None:
                return
            if result.table_filter:  # f on a module: the table shows that module's rows
                try:
                    self.notify(f"{widget.set_filter(result.table_filter):,} rows: {result.table_filter}",
                                markup=False, title="filter", timeout=5)
                except FilterError as exc:
                    self.notify(str(exc), markup=False, title="filter", severity="error", timeout=8)
            if result.row is not None and not widget.move_to(result.row):
                self.notify("that op's row is hidden by the filter or the in/out toggle", timeout=4)
        view = None if self.running else self.chain_view
        stages = (self.chain_columns["entered"], view.labels) if view is not None else None
        self.app.push_screen(GraphScreen(self.shown_task(), widget.cursor_row, stages), back)

    # ---- the advisor ------------------------------------------------------------------------
    def start_advice(self) -> None:
        """Show the saved advice when it fits the result and thresholds, else advise in a worker."""
        if self.opened is None or self.opened.doc.foreign or not len(self.opened.result[0]) or self.reading_rest:
            return
        self.advising = True
        self.advice_worker(snapshot(self.opened))
        if self.opened.doc.chain:
            self.chain_worker(snapshot(self.opened))
        self.refresh_views()

    @work(thread=True, exclusive=True, group="chain", exit_on_error=False)
    def chain_worker(self, task: Task) -> None:
        """A chain task's stages op by op, judged from its sub-tasks under the thresholds shown."""
        from .stageviews import prepared
        deliver(self, ChainDone, lambda: prepared(task))

    @on(ChainDone)
    def chain_done(self, message: ChainDone) -> None:
        if message.error is not None:
            self.notify(f"the chain's stages: {printable(str(message.error))}", severity="warning", timeout=8)
            return
        table = self.table_widget.table
        if message.result is None or len(message.result[0].table) != len(table):
            return
        self.chain_view, self.chain_columns = message.result
        self.table_widget.set_lead(tuple(self.chain_columns))
        self.query_one(ChainChart).show_chain(self.chain_view)
        self.table_widget.load(table, self.thresholds, extra={**self.table_widget.extra, **self.chain_columns})

    @work(thread=True, exclusive=True, group="advice", exit_on_error=False)
    def advice_worker(self, task: Task) -> None:
        """The saved advice when it fits the result and the thresholds shown (advice.json: 40 MB for
        1M rows, read here, not on the screen's thread), else the advisor's on `task`, a snapshot of
        the opened task: its thresholds as edited here, saved or not, and its plan when found."""
        from ..engine.diagnose.advisor import current_advice
        deliver(self, AdviceDone, lambda: current_advice(task))

    @on(AdviceDone)
    def advice_done(self, message: AdviceDone) -> None:
        if message.error is not None:
            self.notify(f"advisor: {message.error}", severity="warning", timeout=8)
        self.apply_advice(message.result, printable(str(message.error or "")))

    @property
    def advice_coming(self) -> bool:
        """Advice for the thresholds shown is on its way: being made, or made once they are saved."""
        return self.advising or self.saving

    def apply_advice(self, advice: Advice | None, why: str = "") -> None:
        """Show the advice in the summary and its per-row columns in the op table (beside the
        engine's table, never in it: the task saves only the comparison's columns); the advisor
        screen that waits for it (judging…) shows it (None: `why` there is none)."""
        self.advice, self.advising = advice, False
        awaiting, self.awaiting = self.awaiting, None
        if awaiting is not None and awaiting in self.app.screen_stack:
            awaiting.arrived(advice, why)
        table = self.table_widget.table
        if advice is not None and advice.task.get("rows") in (None, len(table)):
            self.table_widget.load(table, self.thresholds, extra={**advice_columns(advice, len(table)), **self.chain_columns})
        else:  # load's ViewChanged refreshed the views above
            self.refresh_views()

    def action_advice(self) -> None:
        """The advisor screen with the advice for the thresholds shown; while it is on its way (a save
        or the advisor running) the screen says judging… until it comes, never showing older advice."""
        if self.opened is None or (self.advice is None and not self.advice_coming):  # advice comes for an opened task only (start_advice)
            self.notify("the advisor is still working" if self.reading_rest else "no advice for this task",
                        timeout=3)
            return
        from .advicescreen import AdviceScreen
        def jump(row: int | None) -> None:
            if row is not None:
                self.table_widget.move_to(row)
        screen = AdviceScreen(None if self.advice_coming else self.advice, self.opened, self.apply_advice)
        if self.advice_coming:
            self.awaiting = screen
        self.app.push_screen(screen, jump)

    # ---- running a comparison -----------------------------------------------------------------
    def start_run(self, spec: CompareSpec, folder: Path) -> None:
        self.running, self.run_error, self.decided = True, "", {}
        self.cancel.clear()
        self._live, self._plan, self._done, self._arrived = None, None, 0, []
        self.query_one(ProgressBar).add_class("running")
        self._timer = self.set_interval(0.25, self.take_rows)
        self.compare_worker(spec, folder)
        self.refresh_views()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def compare_worker(self, spec: CompareSpec, folder: Path) -> None:
        """The comparison on the path it calls for (taskrun.run_comparison): two rank trees rank by rank
        on the local pool, their rows arriving per rank; else pair by pair, rows arriving in batches."""
        from ..engine.tasks.taskrun import run_comparison
        def planned(plan: engine.Plan) -> None:
            self.post_message(ComparePlanned(plan))

        arrived: list = []  # the rows, or the rank, that the next `progress` counts: sent on in one message
        landed: list = []

        def progress(p: Progress) -> None:
            if landed:
                self.post_message(RankCompared(landed.pop(), p.done, p.total))
                return
            batch = arrived[:]
            arrived.clear()
            self.post_message(CompareRows(batch, p.done, f"comparing {p.done:,}/{p.total:,} · {p.elapsed:.0f} s"))
        deliver(self, CompareDone,  # inline_bytes: see execute()
                lambda: run_comparison(spec, folder, cancel=self.cancel, planned=planned, progress=progress,
                                       rows=arrived.extend, rank_done=landed.append, inline_bytes=0))

    @on(RankCompared)
    def rank_compared(self, message: RankCompared) -> None:
        """A rank's rows join the table as it lands (a failed rank: a notification saying why)."""
        result = message.result
        self.query_one(ProgressBar).update(total=message.total, progress=message.done)
        self._progress_text = f"ranks {message.done}/{message.total}"
        if result.table is None:
            self.notify(f"{result.rank.label}: {result.state}: {result.error}", severity="warning", timeout=8,
                        markup=False)
            return
        self._live = result.table if self._live is None else ResultTable.concat([self._live, result.table])
        self.show_table(self._live, self.thresholds)

    @on(ComparePlanned)
    def compare_planned(self, message: ComparePlanned) -> None:
        self._plan = message.plan

    @on(CompareRows)
    def compare_rows(self, message: CompareRows) -> None:
        """Keep the rows for the next tick of `take_rows` (one table update per tick)."""
        self._arrived.extend(message.rows)
        self._done, self._progress_text = message.done, message.text

    def take_rows(self) -> None:
        """Move rows the worker finished into the table (called on a timer, on the UI thread)."""
        plan = self._plan
        if plan is None:
            return
        bar = self.query_one(ProgressBar)
        total = sum(1 for p in plan.pairs if p.golden is not None)
        bar.update(total=total, progress=self._done)
        batch, self._arrived = self._arrived, []
        if not batch:
            self.update_status()
            return
        from ..engine.compare.comparison import merged_row
        rows = [merged_row(plan, index, cells) for index, cells in batch]
        rows.sort(key=lambda r: r["index"])
        if self._live is None:
            self._live = ResultTable.from_rows(rows, custom=[p.name for p in plan.plugins])
        else:
            self._live.append_rows(rows)
        self.show_table(self._live, self.thresholds)

    @on(CompareDone)
    def compare_done(self, message: CompareDone) -> None:
        from ..engine.tasks.rankrun import RanksRun
        self.running = False
        self._timer.stop()
        self.query_one(ProgressBar).remove_class("running")
        result = message.result
        if isinstance(result, RanksRun) and not result.cancelled:
            self.reload(f"done: {result.rows:,} rows of {len(result.results)} ranks")
        elif result is not None and result.table is not None:
            self.reload(f"done: {len(result.table):,} rows")
        elif message.error is None:
            self.reload("cancelled: the previous result is kept")
        else:
            text = error_text(message.error)
            self.notify(text, title="comparison failed", severity="error", timeout=15)
            self.run_error = text  # before reload: its views say so
            self.reload(None)

    def reload(self, message: str | None) -> None:
        """The task opened again after a run, as every task is (load_head; the rest by load_worker):
        thresholds edited during the run apply to its whole result (opened_whole)."""
        try:
            self.opened = load_head(self.folder)
        except SourceError:
            self.opened = None
        self.advice, self.chain_columns, self.chain_view = None, {}, None
        self.query_one(ChainChart).show_chain(None)
        if self.opened is not None:
            self.show_table(*self.opened.result)
            if self.reading_rest:
                self.load_worker(self.folder)
            else:
                self.opened_whole()
        else:
            self._edited_while_running = None
            self.show_table(ResultTable.empty(), self.thresholds)
        if message:
            self.notify(message, timeout=4)

