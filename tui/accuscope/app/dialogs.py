"""Modal dialogs: confirm, ask for a line of text, and the per-screen help."""
from __future__ import annotations

from typing import Callable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static
from .formatting import shown


class ConfirmDialog(ModalScreen[bool]):
    """`y`/enter confirms, `n`/esc declines."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical { width: 64; max-width: 90%; height: auto; border: thick $warning;
                               padding: 1 2; background: $surface; }
    ConfirmDialog .keys { margin: 1 0 0 0; }
    """
    BINDINGS = [Binding("y,enter", "answer(True)", "yes"), Binding("n,escape,q", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question)
            yield Static("[b]y[/] yes   [b]n[/] no", classes="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class AskDialog(ModalScreen["str | None"]):
    """One line of input; `check(text)` returns an error message or "" (shown as you type)."""

    DEFAULT_CSS = """
    AskDialog { align: center middle; }
    AskDialog > Vertical { width: 80%; max-width: 100; height: auto; border: thick $accent;
                           padding: 0 1; background: $surface; }
    AskDialog #problem { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, value: str = "", check: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.title_text, self.value, self.check = title, value, check or (lambda text: "")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text)
            yield Input(self.value, id="answer")
            yield Static("", id="problem")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#problem", Static).update(shown(self.check(event.value)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        problem = self.check(event.value)
        if problem:
            self.query_one("#problem", Static).update(shown(problem))
        else:
            self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The keys of the screen it was opened from (its own and its widgets'), plus a text."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: thick $accent;
                                  padding: 0 1; background: $surface; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close")]

    def __init__(self, screen: Screen, text: str = "") -> None:
        super().__init__()
        self.for_screen, self.text = screen, text

    def compose(self) -> ComposeResult:
        keys = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        keys.add_column(style="bold")
        keys.add_column()
        seen = set()
        for node in [self.for_screen, *self.for_screen.query("*"), self.app]:
            for binding in getattr(node, "BINDINGS", []):
                if not isinstance(binding, Binding) or not binding.description:
                    continue
                key = ", ".join(_key_name(k) for k in binding.key.split(","))
                if (key, binding.description) not in seen:
                    seen.add((key, binding.description))
                    keys.add_row(key, binding.description)
        with VerticalScroll():
            yield Static(f"[b]{shown(self.for_screen.title or self.for_screen.__class__.__name__)}[/] keys")
            yield Static(keys)
            if self.text:
                yield Static(self.text)
            yield Static("\nesc / q / ? closes this help", classes="dim")


def _key_name(key: str) -> str:
    names = {"question_mark": "?", "exclamation_mark": "!", "left_square_bracket": "[",
             "right_square_bracket": "]", "slash": "/", "escape": "esc", "plus": "+", "minus": "-"}
    return names.get(key.strip(), key.strip())
