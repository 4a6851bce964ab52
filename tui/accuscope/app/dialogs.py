"""Modal dialogs: confirm, ask for a line of text, choose among several ops, and the per-screen help."""
from __future__ import annotations

import os
import re
from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from .formatting import shown


class ConfirmDialog(ModalScreen["bool | None"]):
    """`y`/enter confirms (True), `n` declines (False), esc/q closes (None: also a no)."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical { width: 64; max-width: 90%; height: auto; border: thick $warning;
                               padding: 1 2; background: $surface; }
    ConfirmDialog .keys { margin: 1 0 0 0; }
    """
    BINDINGS = [Binding("y,enter", "answer(True)", "yes", id="confirm.yes"), Binding("n", "answer(False)", "no", id="confirm.no"),
                Binding("escape,q", "answer(None)", "close", id="confirm.close")]

    def __init__(self, question: str, choices: str = "[b]y[/] yes   [b]n[/] no") -> None:
        super().__init__()
        self.question, self.choices = question, choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question)
            yield Static(self.choices, classes="keys")

    def action_answer(self, yes: bool | None) -> None:
        self.dismiss(yes)


class AskDialog(ModalScreen["str | None"]):
    """One line of input, the cursor after the prefilled text (nothing selected); `check(text)`
    returns an error message or "" (shown as you type). With `path`, tab completes a path, and a path
    typed from the root or home after the prefilled folder takes its place (`restarted`)."""

    DEFAULT_CSS = """
    AskDialog { align: center middle; }
    AskDialog > Vertical { width: 80%; max-width: 100; height: auto; border: thick $accent;
                           padding: 0 1; background: $surface; }
    AskDialog #problem { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel", id="ask.cancel"),
                Binding("tab", "complete", "complete the path", priority=True, id="ask.complete")]

    def __init__(self, title: str, value: str = "", check: Callable[[str], str] | None = None,
                 path: bool = False) -> None:
        super().__init__()
        self.title_text, self.value, self.check = title, value, check or (lambda text: "")
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text)
            yield Input(self.value, id="answer", select_on_focus=False)
            yield Static("", id="problem")

    def on_mount(self) -> None:
        self.query_one(Input).cursor_position = len(self.value)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        return self.path if action == "complete" else True

    def action_complete(self) -> None:
        answer = self.query_one(Input)
        completed, choices = complete_path(answer.value)
        answer.value = completed
        answer.cursor_position = len(completed)
        if len(choices) > 1:
            more = f" … {len(choices) - 8} more" if len(choices) > 8 else ""
            self.query_one("#problem", Static).update(shown("  ".join(choices[:8]) + more))

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.path and restarted(event.value) != event.value:  # its Changed comes next
            event.input.value = restarted(event.value)
            event.input.cursor_position = len(event.input.value)
            return
        self.query_one("#problem", Static).update(shown(self.check(event.value)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        problem = self.check(event.value)
        if problem:
            self.query_one("#problem", Static).update(shown(problem))
        else:
            self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


RESTART = re.compile(r".*/(?=/|~(?:/|$))")


def restarted(text: str) -> str:
    """The path a field holds once a path typed from the root or home after a folder starts it again,
    as in Emacs: `/ws//data/x` is /data/x, `/ws/~/x` is ~/x (`/ws/~x` stays: a name starting with ~)."""
    return RESTART.sub("", text, count=1)


def complete_path(text: str) -> tuple[str, list[str]]:
    """Shell-like completion of the path being typed: (the text completed as far as the entries of
    its folder agree, those entries' names); a folder completes with its trailing slash."""
    folder, start = os.path.split(os.path.expanduser(text))
    try:
        names = sorted(n for n in os.listdir(folder or ".") if n.startswith(start))
    except OSError:
        return text, []
    if not names:
        return text, []
    common = os.path.commonprefix(names)
    done = (text[:len(text) - len(start)] if text.endswith(start) else os.path.join(folder, "")) + common
    if len(names) == 1 and os.path.isdir(os.path.join(folder or ".", common)):
        done += os.sep
    return done, names


class ChooseDialog(ModalScreen["int | None"]):
    """A list of ops to jump to (several producers or consumers); dismisses with a graph position."""

    DEFAULT_CSS = """
    ChooseDialog { align: center middle; }
    ChooseDialog > Vertical { width: 90%; max-width: 110; height: auto; max-height: 80%;
                              border: thick $accent; padding: 0 1; background: $surface; }
    ChooseDialog OptionList { height: auto; max-height: 20; }
    """
    BINDINGS = [Binding("escape,q", "cancel", "cancel", id="choose.cancel")]

    def __init__(self, title: str, choices: list[tuple[str, int]]) -> None:
        super().__init__()
        self.title_text, self.choices = title, choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text)
            yield OptionList(*[Option(Text(label), id=str(position)) for label, position in self.choices])

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        assert event.option.id is not None  # every option is made with its position as its id
        self.dismiss(int(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The keys the screen it was opened from answers (its `active_bindings`: its focused widget's,
    its own and the app's, without the text-editing keys of a focused text field), the footer's
    first, then a text; j/k scroll."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: thick $accent;
                                  padding: 0 1; background: $surface; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close", id="help.dismiss"),
                Binding("j,down", "scroll(1)", "scroll down", show=False, id="help.scroll_next"),
                Binding("k,up", "scroll(-1)", "scroll up", show=False, id="help.scroll_previous"),
                Binding("pagedown,space", "scroll(10)", "page down", show=False, id="help.scroll_page_next"),
                Binding("pageup", "scroll(-10)", "page up", show=False, id="help.scroll_page_previous")]

    def __init__(self, screen: Screen, text: str = "") -> None:
        super().__init__()
        self.for_screen, self.text = screen, text

    def compose(self) -> ComposeResult:
        keys = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        keys.add_column(style="bold")
        keys.add_column()
        for key, description in help_rows(self.for_screen):
            keys.add_row(key, description)
        with VerticalScroll():
            yield Static(f"[b]{shown(self.for_screen.title or self.for_screen.__class__.__name__)}[/] keys")
            yield Static(keys)
            if self.text:
                yield Static(self.text)
            yield Static("\nesc / q / ? closes this help; j / k scroll it", classes="dim")

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)


def help_rows(screen: Screen) -> list[tuple[str, str]]:
    """(keys, description) of every key `screen` answers now, one row per binding (a binding's
    keys joined: "?, f1"): the keys the footer shows first; accuscope's (they have ids) before
    textual's own (tab, the scroll keys); the screen's, its widgets', then the app's."""
    rows: dict[tuple, list] = {}  # (hidden, textual's, rank, namespace, action, description) -> keys
    for key, (namespace, binding, _enabled, _tooltip) in screen.active_bindings.items():
        if not binding.description or namespace.check_consume_key("a", "a"):  # a text field's keys
            continue
        rank = 0 if namespace is screen else 2 if namespace is screen.app else 1
        row = (not binding.show, binding.id is None, rank, id(namespace), binding.action, binding.description)
        rows.setdefault(row, []).append(_key_name(key))
    return [(", ".join(rows[row]), row[-1]) for row in sorted(rows, key=lambda row: row[:3])]


def _key_name(key: str) -> str:
    names = {"question_mark": "?", "exclamation_mark": "!", "left_square_bracket": "[",
             "right_square_bracket": "]", "slash": "/", "escape": "esc", "plus": "+", "minus": "-",
             "equals_sign": "=", "underscore": "_"}
    return names.get(key.strip(), key.strip())
