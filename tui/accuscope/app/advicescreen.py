"""The advisor's findings, one per line with its advice; `s` toggles to the ops ranked by the error
each one made (the sensitivity ranking); enter jumps to the op in the table."""
from __future__ import annotations

import math
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option

from ..engine.diagnose.advice import Advice, Finding
from ..engine.diagnose.advisor import advise
from ..engine.diagnose.chartdata import growth_series
from ..engine.diagnose.replay import BUDGET
from ..engine.diagnose.rules.drift import DRIFT
from ..engine.diagnose.rules.introduced import INTRODUCED
from ..engine.diagnose.sensitivity import Ranking, rank
from ..engine.precision.fromtask import spec_from_task
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import Task
from .chart import GrowthChart
from .footer import Footer
from .formatting import shown
from .messages import RankingDone, VerifyDone, deliver
from .precisionscreen import PrecisionScreen
from .tasksnapshot import snapshot

SEVERITY = {"error": ("✗", "$mark-fail"), "warning": ("!", "$mark-warn"), "info": ("i", "$mark-info")}


def finding_line(f: Finding) -> str:
    mark, style = SEVERITY.get(f.severity, ("?", "$mark-warn"))
    where = f" · #{f.row}" if f.row is not None else ""
    return f"[{style}]{mark}[/] [b]{shown(f.title)}[/]{shown(where)}"


class AdviceScreen(Screen["int | None"]):
    """Dismisses with the table row of the chosen finding (None: back without jumping)."""

    TITLE = "advisor"
    # enter is an ordinary binding: the focused list (findings) or table (ranked ops) takes it in turn after
    # the keys typed before it have moved its cursor, and says so (OptionSelected / RowSelected: jump); a
    # priority enter ran as it arrived, so `↓↓⏎` typed fast jumped to the first finding
    BINDINGS = [Binding("enter", "jump", "jump to op", id="advice.jump"),
                Binding("s", "toggle_ranking", "findings/ranked ops", id="advice.toggle_ranking"),
                Binding("p", "precision", "search mixed precision", id="advice.precision"),
                Binding("v", "verify", "verify the headline", id="advice.verify"),
                Binding("escape,q", "dismiss(None)", "back", id="advice.back")]
    DEFAULT_CSS = """
    AdviceScreen OptionList { height: 1fr; }
    AdviceScreen #ranked { height: 1fr; display: none; }
    AdviceScreen #text { height: auto; max-height: 50%; border-top: solid $panel; padding: 0 1; }
    """
    HELP = ("The advisor's findings, the most important first: MindStudio's rules (fp16 overflow, "
            "input mismatch, global consistency) and ours (the op that introduced the error, found by "
            "re-running the framework op on the NPU side's inputs; where NaN/inf start; which "
            "preprocessing difference explains an input mismatch). s toggles to the ops ranked by the error each "
            "one made by itself (`accuscope sensitivity`). p starts the search for the fewest ops to keep in fp32 "
            "(`accuscope precision`), on a task with a framework ONNX model. v verifies the headline where the "
            "candidate is a conversion accuscope can make again: each top op kept in fp32, converted again and run "
            "(`accuscope advise --verify`). enter jumps to the op.")

    def __init__(self, advice: Advice | None, task: Task,
                 on_advice: Callable[[Advice], None] | None = None) -> None:
        """`task`: the opened task the advice is on (`v` advises on it again and `s` ranks its ops on
        it, its thresholds as shown; `p` sets the search up from it); `on_advice` gets the advice again when `v` verified it (the task screen shows it too).
        `advice` None: the advice for the thresholds shown is still being made (the screen says judging…
        until the task screen hands it over: `arrived`)."""
        super().__init__()
        self.advice, self.opened_task, self.on_advice = advice, task, on_advice
        self.task_name = task.folder.name
        self.verifying = False
        self.ranking: Ranking | None = None
        self.ranking_error = ""

    def compose(self) -> ComposeResult:
        yield Static(self._crumbs(), id="crumbs")
        yield OptionList(*self._options())
        yield DataTable(id="ranked", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="text"):
            yield Static("", id="detail")
        yield GrowthChart(id="growth")
        yield Footer()

    def _crumbs(self) -> str:
        method = self.advice.method if self.advice is not None else ""
        return f"accuscope › tasks › {shown(self.task_name)} › [b]advisor[/] · method: {shown(method or '-')}"

    def on_mount(self) -> None:
        if self.advice is None:
            self.query_one("#detail", Static).update("judging… (the advice for the thresholds shown is on its way)")
        elif not self.advice.findings:
            self.query_one("#detail", Static).update("The advisor has nothing to say about this task.")
        self.query_one(OptionList).focus()

    def arrived(self, advice: Advice | None, why: str = "") -> None:
        """The advice this screen waited for (opened with None), or None and `why` there is none."""
        if self.advice is not None:
            return
        if advice is None:
            self.query_one("#detail", Static).update(f"no advice: {shown(why or 'the advisor gave none')}")
            return
        self.advice = advice
        self.query_one("#crumbs", Static).update(self._crumbs())
        self.query_one(OptionList).add_options(self._options())
        if advice.findings:
            self.query_one(OptionList).highlighted = 0
        else:
            self.query_one("#detail", Static).update("The advisor has nothing to say about this task.")

    def waiting(self) -> bool:
        """The advice is not here yet (it says so)."""
        if self.advice is None:
            self.notify("judging: the advice for the thresholds shown is on its way", timeout=3)
        return self.advice is None

    def _options(self) -> list[Option]:
        return [Option(finding_line(f), id=str(i)) for i, f in enumerate(self.advice.findings if self.advice else [])]

    # ---- verifying the headline ---------------------------------------------------------------
    def action_verify(self) -> None:
        if self.waiting():
            return
        assert self.advice is not None
        if self.verifying:
            self.notify("already verifying", timeout=3)
            return
        if not any(f.rule in (INTRODUCED, DRIFT) for f in self.advice.findings) or \
                (self.advice.primary is not None and self.advice.primary.severity != "error"):
            self.notify("nothing to verify: the outputs do not fail or no op is named", timeout=4)
            return
        self.verifying = True
        self.query_one("#detail", Static).update("converting the model again without each top op and running it "
                                                 "(about a second per op)…")
        self.verify_worker(snapshot(self.opened_task))

    @work(thread=True, exclusive=True, group="verify", exit_on_error=False)
    def verify_worker(self, task: Task) -> None:
        deliver(self, VerifyDone, lambda: advise(task, verify=BUDGET))

    @on(VerifyDone)
    def verify_done(self, message: VerifyDone) -> None:
        self.verifying = False
        if message.error is not None or message.result is None:
            self.query_one("#detail", Static).update(f"not verified: {shown(str(message.error or 'cancelled'))}")
            return
        self.advice = message.result
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(self._options())
        head = next((i for i, f in enumerate(self.advice.findings) if f.rule == INTRODUCED), 0)
        if self.advice.findings:
            options.highlighted = head
            self._show_finding(head)
        if self.on_advice is not None:
            self.on_advice(self.advice)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        assert event.option.id is not None  # every finding's option is made with its index as its id
        self._show_finding(int(event.option.id))

    def _show_finding(self, index: int) -> None:
        if self.advice is None:
            return
        f = self.advice.findings[index]
        evidence = " · ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in (f.evidence or {}).items() if not isinstance(v, (dict, list)))
        lines = [f"{shown(f.text)}"]
        if f.op:
            lines.append(f"[dim]op[/] {shown(f.op)}" + (f"  [dim]tensor[/] {shown(f.tensor)}" if f.tensor else ""))
        if evidence:
            lines.append(f"[dim]{shown(evidence)}[/]")
        lines.append(f"[dim]rule {shown(f.rule)} ({shown(f.source)})[/]")
        self.query_one("#detail", Static).update("\n".join(lines))
        self.query_one(GrowthChart).show(*growth_series(f))

    # ---- the ranked ops ------------------------------------------------------------------------
    @property
    def showing_ranking(self) -> bool:
        return self.query_one("#ranked", DataTable).display

    def action_toggle_ranking(self) -> None:
        if self.waiting():
            return
        ranked, options = self.query_one("#ranked", DataTable), self.query_one(OptionList)
        show = not ranked.display
        ranked.display, options.display = show, not show
        (ranked if show else options).focus()
        if not show:
            if options.highlighted is not None:
                self._show_finding(options.highlighted)
            return
        if self.ranking is None and not self.ranking_error:
            self.query_one("#detail", Static).update("ranking the ops by the error each one made…")
            self.ranking_worker(snapshot(self.opened_task), self.advice)
        else:
            self._show_rank_detail()

    @work(thread=True, exclusive=True, group="ranking", exit_on_error=False)
    def ranking_worker(self, task: Task, advice: Advice) -> None:
        """The ops of `advice` ranked on `task`, a snapshot of the opened task (its rows and the
        thresholds shown, saved or not), never a copy read again from the folder."""
        deliver(self, RankingDone, lambda: rank(task, advice))

    @on(RankingDone)
    def ranking_done(self, message: RankingDone) -> None:
        if message.error is not None:
            self.ranking_error = str(message.error)
            self.query_one("#detail", Static).update(f"no ranking: {shown(self.ranking_error)}")
            return
        ranking = self.ranking = message.result
        assert ranking is not None  # no error: sensitivity returned its Ranking
        table = self.query_one("#ranked", DataTable)
        table.add_columns("#", "op", "out.cos", "1-cos", "rel.err", "breaks", "origin", "cause")
        for i, o in enumerate(ranking.ops, 1):
            table.add_row(str(i), shown(o.op), _num(o.output_cos_alone, 4), _num(None if o.isolated_cos is None else 1 - o.isolated_cos),
                          _num(o.isolated_red),
                          shown(o.broken_text), shown(o.origin),
                          shown(o.cause or "—"), key=str(i - 1))
        self._show_rank_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_rank_detail()

    def _show_rank_detail(self) -> None:
        r = self.ranking
        if r is None:
            return
        lines = [f"network outputs: {shown(r.verdict)} · method {shown(r.method)}"]
        table = self.query_one("#ranked", DataTable)
        if r.ops and 0 <= table.cursor_row < len(r.ops):
            o = r.ops[table.cursor_row]
            lines.append(f"[b]{shown(o.op)}[/] ({shown(o.type)}) {shown(o.origin)}: {shown(o.why)}")
            if o.output_cos_alone is not None:
                lines.append(f"[dim]network output with only its own error[/] cos {o.output_cos_alone:.4f}")
            if o.chain:
                lines.append(f"[dim]framework ops[/] {shown(', '.join(o.chain))}")
            if o.changes:
                lines.append(f"[dim]{shown(o.cause)}[/] {shown('; '.join(o.changes))}")
        elif not r.ops:
            lines.append("no failing op to rank")
        names = r.block_list()
        if names:
            lines.append(f"[dim]node_block_list / nodes_to_exclude[/] {shown(', '.join(names))}")
        lines += [f"[dim]note: {shown(n)}[/]" for n in r.notes]
        self.query_one("#detail", Static).update("\n".join(lines))
        self.query_one(GrowthChart).show([], "")

    def action_precision(self) -> None:
        if self.waiting():
            return
        assert self.advice is not None
        model = self.advice.framework_model
        if self.advice.method != "rerun" or not model:
            self.notify("no framework ONNX model to convert: the search needs one", severity="warning")
            return
        try:
            spec = spec_from_task(self.opened_task, model)
        except SourceError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(PrecisionScreen(spec, self.task_name))

    @on(OptionList.OptionSelected)
    @on(DataTable.RowSelected, "#ranked")
    def chosen(self) -> None:
        self.action_jump()

    def action_jump(self) -> None:
        if self.showing_ranking:
            table = self.query_one("#ranked", DataTable)
            ops = self.ranking.ops if self.ranking is not None else []
            self.dismiss(ops[table.cursor_row].row if 0 <= table.cursor_row < len(ops) else None)
            return
        options = self.query_one(OptionList)
        if options.highlighted is None or self.advice is None or not self.advice.findings:
            self.dismiss(None)
            return
        self.dismiss(self.advice.findings[options.highlighted].row)


def _num(v: float | None, digits: int = 3) -> str:
    return "—" if v is None or math.isnan(v) else f"{v:.{digits}g}"
