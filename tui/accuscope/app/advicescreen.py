"""The advisor's findings, one per line with its advice; enter jumps to the op in the table."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..engine.diagnose.advice import Advice, Finding
from .chart import GrowthChart
from .footer import Footer
from .formatting import shown

SEVERITY = {"error": ("✗", "$mark-fail"), "warning": ("!", "$mark-warn"), "info": ("i", "$mark-info")}


def finding_line(f: Finding) -> str:
    mark, style = SEVERITY.get(f.severity, ("?", "$mark-warn"))
    where = f" · #{f.row}" if f.row is not None else ""
    return f"[{style}]{mark}[/] [b]{shown(f.title)}[/]{shown(where)}"


class AdviceScreen(Screen["int | None"]):
    """Dismisses with the table row of the chosen finding (None: back without jumping)."""

    TITLE = "advisor"
    BINDINGS = [Binding("enter", "jump", "jump to op", priority=True),
                Binding("escape,q", "dismiss(None)", "back")]
    DEFAULT_CSS = """
    AdviceScreen OptionList { height: 1fr; }
    AdviceScreen #text { height: auto; max-height: 50%; border-top: solid $panel; padding: 0 1; }
    """
    HELP = ("The advisor's findings, the most important first: MindStudio's rules (fp16 overflow, "
            "input mismatch, global consistency) and ours (the op that introduced the error, found by "
            "re-running the framework op on the NPU side's inputs; where NaN/inf start; which "
            "preprocessing difference explains an input mismatch). enter jumps to the op.")

    def __init__(self, advice: Advice, task_name: str) -> None:
        super().__init__()
        self.advice, self.task_name = advice, task_name

    def compose(self) -> ComposeResult:
        a = self.advice
        yield Static(f"accuscope › tasks › {shown(self.task_name)} › [b]advisor[/] · method: "
                     f"{shown(a.method or '-')}", id="crumbs")
        yield OptionList(*[Option(finding_line(f), id=str(i)) for i, f in enumerate(a.findings)])
        with VerticalScroll(id="text"):
            yield Static("", id="detail")
        yield GrowthChart(id="growth")
        yield Footer()

    def on_mount(self) -> None:
        if not self.advice.findings:
            self.query_one("#detail", Static).update("The advisor has nothing to say about this task.")
        self.query_one(OptionList).focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        f = self.advice.findings[int(event.option.id)]
        evidence = " · ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in (f.evidence or {}).items() if not isinstance(v, (dict, list)))
        lines = [f"{shown(f.text)}"]
        if f.op:
            lines.append(f"[dim]op[/] {shown(f.op)}" + (f"  [dim]tensor[/] {shown(f.tensor)}" if f.tensor else ""))
        if evidence:
            lines.append(f"[dim]{shown(evidence)}[/]")
        lines.append(f"[dim]rule {shown(f.rule)} ({shown(f.source)})[/]")
        self.query_one("#detail", Static).update("\n".join(lines))
        growth = (f.evidence or {}).get("growth")
        metric = (f.evidence or {}).get("metric", "")
        self.query_one(GrowthChart).show(growth if isinstance(growth, list) else [],
                                         "1 - cos" if metric == "cos" else "rel. error")

    def action_jump(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.advice.findings:
            self.dismiss(None)
            return
        self.dismiss(self.advice.findings[options.highlighted].row)
