"""The new-task form: what to compare; fields are checked as you type, enter starts the run."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, SelectionList, Static

from ..engine.compare.columns import CSV_OF
from ..engine.compare.comparison import ALGORITHMS, CompareSpec
from ..engine.compare.thresholds import Thresholds
from ..engine.graphs.oprange import OpRange
from ..engine.sources.golden import RAW_SUFFIXES
from ..engine.sources.registry import detect
from ..engine.sources.tensor import SourceError
from .footer import Footer
from .formatting import shown

FIELDS = [  # id, label, placeholder
    ("npu", "NPU dump", "Ascend dump folder or file (any level of the dump tree)"),
    ("golden", "golden dump", "npy folder, .npz, .bin or Polygraphy .json"),
    ("shape", "golden shape", "a raw .bin golden only: its shape, e.g. 1,3,224,224"),
    ("dtype", "golden dtype", "a raw .bin golden only: its dtype, e.g. float32"),
    ("model", "model", "optional: offline-model .json, .onnx or .prototxt for op mapping"),
    ("name", "task folder", "where the task is written"),
    ("range", "range", "optional: start,end,step over op sequence ids, e.g. 1,-1,1"),
    ("thresholds", "thresholds", "NAME=VALUE ..., e.g. cos=0.99 red=0.05 (empty: msit defaults)"),
    ("custom", "custom algorithms", "optional: folder with algorithm/alg_<Name>.py plugins"),
]


class NewTaskScreen(Screen):
    TITLE = "new task"
    BINDINGS = [Binding("ctrl+s", "start", "start comparison"), Binding("escape", "app.pop_screen", "back")]
    DEFAULT_CSS = """
    NewTaskScreen .field { height: auto; }
    NewTaskScreen .field Label { width: 18; padding: 1 1 0 0; text-align: right; }
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
        values = {"name": str(self.workspace / name)}
        if self.spec:
            values.update(npu=self.spec.npu, golden=self.spec.golden, model=self.spec.model or "",
                          range=self.spec.op_range or "")
        with VerticalScroll():
            for key, label, placeholder in FIELDS:
                with Horizontal(classes="field"):
                    yield Label(label)
                    yield Input(values.get(key, ""), placeholder=placeholder, id=key)
                yield Static("", id=f"why-{key}", classes="why")
            yield Label("algorithms (space toggles):")
            yield SelectionList[str](*[(f"{CSV_OF.get(k, k)}", k, True) for k in ALGORITHMS], id="algorithms")
        yield Footer()

    def on_mount(self) -> None:
        for key, _, _ in FIELDS:
            self.show_check(key)
        self.query_one("#npu", Input).focus()

    def value(self, key: str) -> str:
        return self.query_one(f"#{key}", Input).value.strip()

    def check(self, key: str) -> tuple[str, bool]:
        """(message, ok) for one field."""
        text = os.path.expanduser(self.value(key))
        optional = key in ("model", "range", "thresholds", "custom", "shape", "dtype")
        if key in ("shape", "dtype") and not text and self.value("golden").lower().endswith(RAW_SUFFIXES):
            return "a raw binary golden file needs its shape and dtype", False
        if not text:
            return ("", True) if optional else ("required", False)
        try:
            if key in ("npu", "golden", "model"):
                fmt = detect(text)
                if fmt.model != (key == "model"):
                    return f"this is {fmt.what}, not {'a model' if key == 'model' else 'dumped tensors'}", False
                return f"✓ {fmt.kind}", True
            if key == "name":
                p = Path(text)
                if p.exists() and not p.is_dir():
                    return "a file, not a folder", False
                if p.exists() and not (p / "task.json").exists() and any(p.iterdir()):
                    return "exists and is not a task folder", False
                return ("✓ replaces the result of that task" if p.exists() else "✓ new folder"), True
            if key == "shape":
                return ("✓", True) if self.golden_shape() else ("expected integers, e.g. 1,3,224,224", False)
            if key == "dtype":
                return f"✓ {np.dtype(text)}", True
            if key == "range":
                OpRange.parse(text)
                return "✓", True
            if key == "thresholds":
                self.thresholds()
                return "✓", True
            if key == "custom":
                if not os.path.isdir(os.path.join(text, "algorithm")):
                    return "no algorithm/ folder inside", False
                return "✓", True
        except (SourceError, ValueError, TypeError, OSError) as exc:
            return str(exc), False
        return "", True

    def golden_shape(self) -> tuple[int, ...] | None:
        parts = [p for p in self.value("shape").replace("x", ",").split(",") if p.strip()]
        return tuple(int(p) for p in parts) if parts and all(p.strip().isdigit() for p in parts) else None

    def thresholds(self) -> Thresholds:
        result = Thresholds()  # the msit defaults, changed where the field says so
        result.edit(self.value("thresholds"))
        return result

    def show_check(self, key: str) -> bool:
        message, ok = self.check(key)
        why = self.query_one(f"#why-{key}", Static)
        why.update(shown(message))
        why.set_class(ok, "ok")
        return ok

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id:
            self.show_check(event.input.id)
        if event.input.id == "golden":  # whether shape and dtype are needed follows the golden path
            self.show_check("shape")
            self.show_check("dtype")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_start()

    def action_start(self) -> None:
        bad = [key for key, _, _ in FIELDS if not self.show_check(key)]
        if bad:
            self.notify(f"check {', '.join(bad)}", severity="error")
            self.query_one(f"#{bad[0]}", Input).focus()
            return
        chosen = list(self.query_one(SelectionList).selected)
        ex = os.path.expanduser
        spec = CompareSpec(ex(self.value("npu")), ex(self.value("golden")), ex(self.value("model")) or None,
                           chosen if len(chosen) < len(ALGORITHMS) else None, self.value("range") or None,
                           None, ex(self.value("custom")) or None, self.thresholds(),
                           golden_shape=self.golden_shape(), golden_dtype=self.value("dtype") or None)
        from .taskscreen import TaskScreen
        self.app.switch_screen(TaskScreen(run=(spec, Path(ex(self.value("name"))))))
