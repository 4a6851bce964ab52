"""The Textual application: screens, global keys, the command palette."""
# lazy: app.browser, app.dialogs
from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.screen import Screen

from ..engine.sources.names import printable
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import Task, TaskFolder, load_head
from .formatting import shown
from .taskscreen import TaskScreen

if TYPE_CHECKING:
    from ..engine.compare.spec import CompareSpec

# The task browser and the dialogs are imported when shown: `accuscope open TASK` draws neither in its
# first frame.

QUIT_QUESTION = "A comparison is running. Cancel it and quit? (the task keeps its previous result)"


@runtime_checkable
class Running(Protocol):
    """A screen whose work may be under way (a comparison, an export): quitting sets its `cancel`."""

    cancel: threading.Event

    @property
    def running(self) -> bool: ...


class AccuscopeApp(App):
    TITLE = "accuscope"
    BINDINGS = [
        Binding("ctrl+q", "quit_app", "quit", priority=True, id="app.quit_app"),
        Binding("question_mark,f1", "help", "help", id="app.help"),
    ]
    ENABLE_COMMAND_PALETTE = True
    CSS = """
    #crumbs { height: 1; background: $primary-background; padding: 0 1; }  /* every screen's path line */
    """

    def __init__(self, workspace: Path, open_path: Path | Task | None = None,
                 compare: tuple[CompareSpec, Path] | None = None) -> None:
        super().__init__()
        self.workspace = Path(workspace)
        self.open_path, self.compare = open_path, compare
        self.trusted_plugins: set[str] = set()  # plugin folders the user confirmed in this run

    def rerun_spec(self, task: TaskFolder, then: Callable[[CompareSpec], object]) -> None:
        """Call `then(spec)` to re-run `task` as its task.json says. The plugin folder task.json names
        holds Python code in a file anyone may have written: it is used only once the user confirmed
        that folder in this run of the app; declined (n), `then` gets the spec without plugins; esc
        calls nothing."""
        path = task.path("custom_dir")

        def spec(plugins: bool) -> CompareSpec:
            return task.spec(**({"custom_dir": str(path)} if plugins else {}))
        if path is None or os.path.realpath(path) in self.trusted_plugins:
            then(spec(path is not None))
            return
        from .dialogs import ConfirmDialog

        def answer(yes: bool | None) -> None:
            if yes:
                self.trusted_plugins.add(os.path.realpath(path))
            if yes is not None:
                then(spec(yes))
        self.push_screen(ConfirmDialog(
            f"This task was compared with algorithm plugins: the Python files (alg_*.py) in\n"
            f"[b]{shown(path)}[/]\nRe-running with them runs that code on this machine. Trust it?",
            "[b]y[/] run them   [b]n[/] re-run without plugins   [b]esc[/] cancel"), answer)

    def on_mount(self) -> None:
        self.call_after_refresh(_collect_again)
        # The task browser under a task given at start is made when the task screen is left (see
        # pop_screen): its list and keys cost the task's first frame a tenth of a second or more.
        if self.open_path is not None:  # a Task its caller opened already (`accuscope open`), else its folder
            if not self.open_task(self.open_path):  # the notice says why, over the workspace's tasks
                from .browser import BrowserScreen
                self.push_screen(BrowserScreen(self.workspace))
        elif self.compare is not None:
            self.push_screen(TaskScreen(run=self.compare))
        else:
            from .browser import BrowserScreen
            self.push_screen(BrowserScreen(self.workspace))

    def pop_screen(self) -> AwaitComplete:
        """Back from the first screen over textual's default one (a task given at start): the task
        browser of the workspace takes its place."""
        from .browser import BrowserScreen
        if len(self.screen_stack) == 2 and not isinstance(self.screen_stack[0], BrowserScreen):
            return self.switch_screen(BrowserScreen(self.workspace))
        return super().pop_screen()

    def open_task(self, path: Path | Task) -> bool:
        """The task at `path` in its screen, on top of the current one: the one way a task is opened to
        be shown (the start, the browser, a chain's stage, the precision search's result). Its first rows
        are read here (load_head: milliseconds), the rest by the screen's worker after its first frame
        (TaskScreen.load_worker); a Task opened so already (`accuscope open`) is shown as it is. False,
        with a notice saying why, when the task cannot be opened."""
        try:
            task = path if isinstance(path, Task) else load_head(path)
        except SourceError as exc:
            self.notify(str(exc), title="cannot open", severity="error", timeout=8)
            return False
        self.push_screen(TaskScreen(task=task))
        return True

    @property
    def running_screens(self) -> list[Running]:
        return [s for s in self.screen_stack if isinstance(s, Running) and s.running]

    def action_quit_app(self) -> None:
        if not self.running_screens:
            self.exit()
            return
        from .dialogs import ConfirmDialog

        def answer(yes: bool | None) -> None:
            if yes:
                for screen in self.running_screens:
                    screen.cancel.set()
                self.exit()
        self.push_screen(ConfirmDialog(QUIT_QUESTION), answer)

    def get_css_variables(self) -> dict[str, str]:
        """Adds the styles of the marks that carry a meaning (`[$mark-fail]✗[/]` in markup): coloured,
        and without colour (NO_COLOR) reversed or bold so they still stand out. The fail colour is one
        that stays red with 16 colours."""
        variables = super().get_css_variables()
        if self.no_color:
            marks = {"fail": "bold reverse", "warn": "bold", "info": "bold", "pass": "bold"}
        else:
            marks = {"fail": f"bold {variables['error-lighten-2']}", "warn": f"bold {variables['warning']}",
                     "info": variables["accent-lighten-2"], "pass": variables["success"]}
        variables.update({f"mark-{kind}": style for kind, style in marks.items()})
        return variables

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Notifications show text, often from data (paths, op names, errors): never markup; control
        characters as `?`, but a message's line breaks stay (an error's last lines, the export's toast)."""
        super().notify(printable(message, newlines=True), title=printable(title), severity=severity,
                       timeout=timeout, markup=markup)

    def action_help_quit(self) -> None:
        """ctrl+c (in a text field it copies): say how to quit instead."""
        self.notify("ctrl+q quits accuscope (q or esc goes back a screen; ? lists the keys)",
                    title="Quit?", timeout=5)

    def action_help(self) -> None:
        from .dialogs import HelpScreen
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen, getattr(self.screen, "HELP", "")))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The current screen's keys as commands (found by their description), then textual's; a key
        textual has a command for (Maximize) is left to it, a key its screen has turned off (check_action:
        the pair keys on a task that is not two msprobe dumps) is not offered."""
        textual = list(super().get_system_commands(screen))
        seen = {command.title.split()[0].lower() for command in textual}
        for node in [screen.focused, screen] if screen.focused else [screen]:
            for binding in getattr(node, "BINDINGS", []):
                if not isinstance(binding, Binding) or not binding.description or not _allowed(node, binding.action):
                    continue
                if binding.description not in seen and binding.description.split()[0].lower() not in seen:
                    seen.add(binding.description)
                    key = binding.key.split(",")[0]
                    yield SystemCommand(binding.description.capitalize(), f"key {key}",
                                        _runner(node, binding.action))
        yield from textual


def _collect_again() -> None:
    """After the first frame: the cyclic collector, held off by the CLI while it imported the app
    (cli.py), on again; what start-up made (modules, classes, the first screen: ~80,000 objects) is
    frozen first, so its first walks do not visit all of it (a no-op where it was never held off)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _allowed(node, action: str) -> bool:
    """Whether `node` offers `action` now (its check_action does not turn it off)."""
    _, name, parameters = parse_action(action)
    return node.check_action(name, parameters) is not False


def _runner(node, action: str):
    async def run() -> None:
        await node.run_action(action)
    return run
