"""A mixed-precision search as it runs (`accuscope precision`): the trials, the output metric of
each against the target as a chart, the op set being tried; c cancels (the trials so far stay in
the log, and starting again resumes); enter opens the final model's task once the target is met.
The result names the command that reproduces it and, where the lists alone do not act on the user's
model, the prepared model they name (precision/recipe.py)."""
from __future__ import annotations

import math
import threading

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ..engine.precision.spec import PrecisionSpec
from ..engine.precision.trials import Trial
from ..engine.precision.workflow import Event, PrecisionResult, run_precision
from .chart import Chart
from .footer import Footer
from .formatting import shown
from .messages import PrecisionDone, deliver
from .opener import opener


class TrialChart(Chart):
    """Each trial's worst output value of the first target metric, the target as a line."""

    DEFAULT_CSS = """
    TrialChart { height: 10; border-top: solid $panel; border-title-align: left; }
    """

    def __init__(self, metric: str, bound: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.metric, self.bound = metric, bound
        self.points: list[tuple[int, float, bool]] = []

    def add(self, trial: Trial) -> None:
        value = trial.values.get(self.metric, math.nan)
        if not math.isnan(value):
            self.points.append((trial.n, value, trial.passed))
        self.replot()

    def draw(self, plt) -> str:
        for passed, marker, color in ((True, "•", "green"), (False, "x", "red")):
            pts = [(n, v) for n, v, p in self.points if p == passed]
            if pts:
                plt.scatter([float(n) for n, _ in pts], [v for _, v in pts], marker=marker, color=color)
        plt.hline(self.bound, "orange")
        plt.xlabel("trial")
        return f"{self.metric} of the network outputs by trial · • meets x misses · ─ target {self.bound:g}"


class PrecisionScreen(Screen[None]):
    TITLE = "precision"
    BINDINGS = [Binding("c", "cancel", "cancel", id="precision.cancel"),
                Binding("enter", "open_task", "open the result's task", id="precision.open", priority=True),
                Binding("escape,q", "back", "back", id="precision.back")]
    DEFAULT_CSS = """
    PrecisionScreen #trials { height: 1fr; }
    PrecisionScreen #status { height: auto; max-height: 40%; border-top: solid $panel; padding: 0 1; }
    """
    HELP = ("The search for the fewest ops to keep in fp32 (accuscope precision): the full conversion, then "
            "the ranked ops one at a time, then a bisection and pruning. Each row is a trial with its worst "
            "network-output value; the chart draws them against the target. c cancels (the trial log stays: "
            "starting again resumes); enter opens the final model's task against the reference.")

    def __init__(self, spec: PrecisionSpec, task_name: str) -> None:
        super().__init__()
        self.spec, self.task_name = spec, task_name
        self.cancel = threading.Event()
        self.result: PrecisionResult | None = None
        self.error = ""
        self.stage = "starting"

    def compose(self) -> ComposeResult:
        targets = ", ".join(str(t) for t in self.spec.targets)
        yield Static(f"accuscope › tasks › {shown(self.task_name)} › [b]precision[/] · --to {self.spec.to} · "
                     f"target {shown(targets)}", id="crumbs")
        yield DataTable(id="trials", cursor_type="row", zebra_stripes=True)
        first = self.spec.targets[0]
        yield TrialChart(first.metric, first.bound, id="chart")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#trials", DataTable)
        table.add_columns("#", "phase", "fp32 ops", *(t.metric for t in self.spec.targets), "", "ops kept in fp32")
        self._status()
        self.search_worker(self.spec)

    @work(thread=True, exclusive=True, group="precision", exit_on_error=False)
    def search_worker(self, spec: PrecisionSpec) -> None:
        deliver(self, PrecisionDone,
                lambda: run_precision(spec, lambda e: self.app.call_from_thread(self.show_event, e), self.cancel))

    def show_event(self, e: Event) -> None:
        if not self.is_attached:  # left with escape: the search stops after its trial, unseen
            return
        if e.trial is not None:
            t = e.trial
            values = [_num(t.values.get(m.metric)) for m in self.spec.targets]
            self.query_one("#trials", DataTable).add_row(
                str(t.n), t.phase, str(len(t.keep)), *values, "✓" if t.passed else "✗",
                shown(", ".join(t.keep[:6]) + (f" … (+{len(t.keep) - 6})" if len(t.keep) > 6 else "")))
            self.query_one(TrialChart).add(t)
            self.stage = f"trial {t.n} done"
        else:
            self.stage = f"{e.stage}: {e.detail}" if e.detail else e.stage
        self._status()

    @on(PrecisionDone)
    def finished(self, message: PrecisionDone) -> None:
        if message.error is not None:
            self.error = str(message.error)
        else:
            self.result = message.result
        self._status()

    def _status(self) -> None:
        lines = []
        if self.error:
            lines.append(f"[$mark-fail]✗[/] the search could not run: {shown(self.error)}")
        elif self.result is None:
            lines.append(f"[dim]{'cancelling after this trial…' if self.cancel.is_set() else 'running'}:[/] "
                         f"{shown(self.stage)}")
        else:
            o = self.result.outcome
            if o.met:
                lines.append(f"[$mark-info]✓[/] [b]target met[/] keeping {len(o.keep)} op(s) in fp32: "
                             f"{shown(', '.join(o.keep)) or 'none'}")
            else:
                lines.append(f"[$mark-fail]✗[/] [b]target not met[/]: {shown(o.reason)}")
            lines += self._recipe()
            lines.append(f"[dim]{len(o.trials)} trials ({o.ran} run now, {self.result.resumed} from the log), "
                         f"{self.result.seconds:.1f} s[/]")
        rows = self.query_one("#trials", DataTable)
        if rows.row_count and self.result is None:
            last = rows.get_row_at(rows.row_count - 1)
            lines.append(f"[dim]current op set[/] {last[-1] or 'none'}")
        self.query_one("#status", Static).update("\n".join(lines))

    def _recipe(self) -> list[str]:
        """Where the result's files are and the command that reproduces it (recipe.py): the lists name the
        prepared model's nodes where they alone do not act on the user's model."""
        r = self.result
        if r is None:
            return []
        lines = ["files in " + shown(str(r.folder / "result")) + (" · enter opens the final model's task" if r.task else "")]
        if not r.command:
            return lines
        prepared = r.files.get("prepared")
        if prepared is not None and r.obstacles:
            lines.append(f"[$mark-warn]![/] the lists alone do not act on your model ({shown('; '.join(r.obstacles))}): "
                         f"they name the nodes of the prepared model {shown(prepared.name)} there")
        elif prepared is None:
            lines.append("the lists work on your model as it is")
        lines.append(f"[b]reproduce:[/] sh {shown(r.files['command'].name)} there (the converter with the list)")
        return lines

    def action_cancel(self) -> None:
        if self.result is None and not self.error:
            self.cancel.set()
            self._status()

    def action_open_task(self) -> None:
        if self.result is None or self.result.task is None:
            return
        opener(self).open_task(self.result.task)  # the app opens tasks: this screen is opened from one

    def action_back(self) -> None:
        self.cancel.set()  # a search left running stops after its trial; the log keeps it
        self.dismiss(None)


def _num(v: float | None) -> str:
    return "—" if v is None or math.isnan(v) else f"{v:.6g}"
