"""The new-task form: what to compare; fields are checked as you type, enter starts the run."""
# lazy: app.taskscreen
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, SelectionList, Static

from ..engine.compare.columns import ALGORITHMS, CSV_OF
from ..engine.compare.inputs import BY_NAME, INPUTS, build_spec, check, texts_of
from ..engine.compare.spec import CompareSpec
from ..engine.sources.tensor import SourceError
from .footer import Footer
from .formatting import shown

FIELDS = [i for i in INPUTS if i.form]  # the comparison's inputs, as declared for `compare` too


class NewTaskScreen(Screen):
    TITLE = "new task"
    BINDINGS = [Binding("ctrl+s", "start", "start comparison", id="newtask.start"),
                Binding("escape", "app.pop_screen", "back", id="newtask.back")]
    DEFAULT_CSS = """
    NewTaskScreen .field { height: auto; }
    NewTaskScreen .field { margin: 1 0 0 0; }
    NewTaskScreen .field Label { width: 18; padding: 0 1 0 0; text-align: right; }
    NewTaskScreen .field Input { width: 1fr; }
    NewTaskScreen .why { height: auto; padding: 0 0 0 19; color: $error; }
    NewTaskScreen .why.ok { color: $success; }
    NewTaskScreen SelectionList { height: 6; margin: 0 0 0 19; }
    """
    HELP = ("Fill in the fields (tab moves between them); each is checked as you type. Enter in any "
            "field or ctrl+s starts the comparison; it runs in the background and the task opens.")

    def __init__(self, workspace: Path, spec: CompareSpec | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.spec = spec

    def compose(self) -> ComposeResult:
        yield Static("accuscope › tasks › [b]new task[/]", id="crumbs")
        name = f"task-{datetime.now():%Y%m%d-%H%M%S}"
        values = {"out": str(self.workspace / name)}
        if self.spec:  # `R` on a task: its inputs again
            values.update(texts_of(self.spec))
        with VerticalScroll():
            for item in FIELDS:
                with Horizontal(classes="field"):
                    yield Label(item.label)
                    yield Input(values.get(item.name, ""), placeholder=item.placeholder, id=item.name, compact=True)
                yield Static("", id=f"why-{item.name}", classes="why")
            yield Label("algorithms (space toggles):")
            yield SelectionList[str](*[(f"{CSV_OF.get(k, k)}", k, True) for k in ALGORITHMS], id="algorithms")
        yield Footer()

    def on_mount(self) -> None:
        for item in FIELDS:
            self.show_check(item.name)
        self.query_one("#npu", Input).focus()

    def value(self, key: str) -> str:
        return self.query_one(f"#{key}", Input).value.strip()

    def check(self, key: str) -> tuple[str, bool]:
        """(message, ok) for one field."""
        return check(BY_NAME[key], self.value(key), golden=self.value("golden"), npu=self.value("npu"))

    def show_check(self, key: str) -> bool:
        message, ok = self.check(key)
        why = self.query_one(f"#why-{key}", Static)
        why.update(shown(message))
        why.set_class(ok, "ok")
        why.display = bool(message)  # an optional field left empty takes no line
        return ok

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id:
            self.show_check(event.input.id)
        if event.input.id == "golden":  # shape and dtype needed, and the options there are, follow the golden path
            self.show_check("golden_shape")
            self.show_check("golden_dtype")
            self.show_check("golden_options")
        if event.input.id == "npu":  # a step or rank must be one of the NPU dump's folders; its format's options
            self.show_check("step")
            self.show_check("rank")
            self.show_check("npu_options")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_start()

    def action_start(self) -> None:
        bad = [item.name for item in FIELDS if not self.show_check(item.name)]
        if bad:
            self.notify(f"check {', '.join(BY_NAME[k].label for k in bad)}", severity="error")
            self.query_one(f"#{bad[0]}", Input).focus()
            return
        values = {item.name: item.parse(self.value(item.name)) for item in FIELDS if self.value(item.name)}
        chosen = list(self.query_one(SelectionList).selected)
        values["algorithms"] = chosen if len(chosen) < len(ALGORITHMS) else None
        try:
            spec = build_spec(values)
        except (SourceError, ValueError) as exc:
            self.notify(shown(str(exc)), severity="error")
            return
        from .taskscreen import TaskScreen
        self.app.switch_screen(TaskScreen(run=(spec, Path(values["out"]))))

