"""The task browser: task folders and foreign result CSVs under the workspace, newest first."""
# lazy: app.newtask, app.taskscreen
from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import TASK_JSON, TaskFolder
from ..engine.tasks.tasklist import TaskSummary, list_tasks
from . import formatting as fmt
from .dialogs import AskDialog, ConfirmDialog
from .footer import Footer
from .formatting import shown
from .opener import opener

STATE_MARK = {"done": ("✓", "mark-pass"), "running": ("…", "mark-warn"), "cancelled": ("-", "mark-warn"),
              "failed": ("✗", "mark-fail"), "": ("?", "")}  # the app's mark styles (see AccuscopeApp)
VERDICT_MARK = {"pass": ("✓", "mark-pass"), "fail": ("✗", "mark-fail"), "unknown": ("?", "mark-warn")}
FIXED_COLUMNS = 36  # cells of the columns beside the two names (when, mark, rows, failing, padding)


def ago(when: float, now: float | None = None) -> str:
    seconds = max(0.0, (now or time.time()) - when)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def _label(e) -> str:
    """The task's name, with its rank count for a multi-rank task."""
    return f"{e.name} [{e.ranks} ranks]" if e.ranks else e.name


class TaskList(DataTable):
    """The browser's table of tasks: enter, home and end are the screen's keys (open, first and last
    task), not the table's (select, scroll sideways). They are ordinary bindings that its own actions
    give way to, never priority ones: a priority key runs as it arrives, before the j / k typed just
    ahead of it have moved the cursor (they still travel through the table), so `jjj⏎` opened the first task."""

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        return action not in ("select_cursor", "scroll_home", "scroll_end")


class BrowserScreen(Screen):
    TITLE = "tasks"
    BINDINGS = [
        Binding("enter", "open", "open", id="browser.open"), Binding("n", "new", "new task", id="browser.new"),
        Binding("d", "delete", "delete", id="browser.delete"), Binding("r", "refresh", "refresh", id="browser.refresh"),
        Binding("o", "open_path", "open path", id="browser.open_path"), Binding("R", "rerun", "re-run", id="browser.rerun"),
        Binding("s", "save_as", "save as", id="browser.save_as"), Binding("q", "app.quit", "quit", id="browser.quit"),
        Binding("j", "cursor(1)", "down", show=False, id="browser.cursor_next"), Binding("k", "cursor(-1)", "up", show=False, id="browser.cursor_previous"),
        Binding("home", "first", "first task", show=False, id="browser.first"),
        Binding("end,G", "last", "last task", show=False, id="browser.last"),
    ]
    DEFAULT_CSS = """
    BrowserScreen DataTable { height: 1fr; }
    BrowserScreen #detail { height: auto; max-height: 4; padding: 0 1; color: $text-muted; }
    """
    HELP = ("Task folders (task.json) and result CSVs written by MindStudio, msaccucmp or msit found "
            "under the workspace, newest first. ✓ done, … running, - cancelled, ✗ failed.")

    def __init__(self, workspace: Path) -> None:
        super().__init__()
        self.workspace = workspace
        self.entries: list[TaskSummary] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="crumbs")
        table = TaskList(cursor_type="row", zebra_stripes=True)
        table.add_columns("when", "", "task", "rows", "failing", "first failing op")
        yield table
        yield Static("", id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def on_resize(self) -> None:
        self.action_refresh()

    @property
    def selected(self) -> TaskSummary | None:
        table = self.query_one(DataTable)
        if not self.entries or table.cursor_row is None or table.cursor_row >= len(self.entries):
            return None
        return self.entries[table.cursor_row]

    def action_refresh(self) -> None:
        crumbs = self.query_one("#crumbs", Static)
        try:
            self.entries = list_tasks(self.workspace)
        except SourceError as exc:
            self.entries = []
            crumbs.update(f"accuscope › [b]{shown(str(self.workspace))}[/] · [$mark-fail]{shown(str(exc))}[/]")
        else:
            crumbs.update(f"accuscope › [b]{shown(str(self.workspace))}[/] · {len(self.entries)} tasks")
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        now = time.time()
        styles = self.app.get_css_variables()
        # the names share what the counts leave: a long task name is cut, never the counts
        room = max(20, self.app.size.width - FIXED_COLUMNS)
        name_width = max(10, min(max((len(_label(e)) for e in self.entries), default=0), room // 2))
        for e in self.entries:
            mark, style = STATE_MARK.get(e.state, STATE_MARK[""]) if e.kind == "task" else ("csv", "mark-info")
            if e.state == "done" and e.verdict in VERDICT_MARK:  # the verdict task.json records (judgement.verdict)
                mark, style = VERDICT_MARK[e.verdict]
            elif e.state == "done" and e.coverage_warnings:  # a task of an older accuscope: never a pass unseen
                mark, style = "!", "mark-warn"
            failing = "" if e.failing is None else f"{e.failing:,}"
            table.add_row(ago(e.when, now), Text(mark, style=styles.get(style, "")),
                          Text(fmt.fit(_label(e), name_width)), "" if e.rows is None else f"{e.rows:,}",
                          Text(failing, style=styles["mark-fail"] if e.failing else ""),
                          Text(fmt.fit(e.first_failing_op or e.problem or e.error
                                       or (e.coverage_warnings[0] if e.coverage_warnings else ""),
                                       room - name_width, keep="end")))
        if self.entries:
            table.move_cursor(row=min(keep or 0, len(self.entries) - 1))
        else:
            self.query_one("#detail", Static).update(
                f"No tasks under {shown(str(self.workspace))} yet: [b]n[/] starts a comparison, "
                "[b]o[/] opens a result CSV or task folder; `accuscope demo` builds demo tasks.")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        e = self.selected
        if e is None:
            return
        lines = [f"{shown(str(e.path))}"]
        if e.npu or e.golden:
            lines.append(f"npu {shown(e.npu)} · golden {shown(e.golden)}"
                         + (f" · {e.ranks} ranks, {e.ranks_lost} not compared (re-run to resume)"
                            if e.ranks_lost else ""))
        if e.error or e.problem:
            lines.append(f"[$mark-fail]{shown(e.error or e.problem)}[/]")
        self.query_one("#detail", Static).update("\n".join(lines))

    def action_cursor(self, step: int) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=max(0, table.cursor_row + step))

    def action_first(self) -> None:
        self.query_one(DataTable).move_cursor(row=0)

    def action_last(self) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=max(0, table.row_count - 1))

    def action_open(self) -> None:
        if self.selected is not None:
            self.open_path(self.selected.path)

    def open_path(self, path: Path) -> None:
        opener(self).open_task(path)  # a notice says why when it cannot be opened

    def action_open_path(self) -> None:
        def check(text: str) -> str:
            p = Path(text).expanduser()
            if not text.strip():
                return "a task folder or a result CSV"
            if not p.exists():
                return f"{p}: no such file or folder"
            if p.is_dir() and not (p / TASK_JSON).exists():
                return f"{p}: not a task folder (no task.json)"
            return ""

        def opened(text: str | None) -> None:
            if text:
                self.open_path(Path(text).expanduser())
        self.app.push_screen(AskDialog("Open a task folder or result CSV (tab completes):", str(self.workspace) + "/",
                                       check, path=True), opened)

    def action_new(self) -> None:
        from .newtask import NewTaskScreen
        self.app.push_screen(NewTaskScreen(self.workspace))

    def action_rerun(self) -> None:
        from .taskscreen import TaskScreen
        e = self.selected
        if e is None or e.kind != "task":
            self.notify("only task folders can be re-run (a CSV does not say what was compared)")
            return
        try:  # what was compared is task.json's: the result is the run's to replace, not read here
            task: TaskFolder | None = TaskFolder.at(e.path)
        except SourceError:
            task = None
        if task is None or not task.doc.names_dumps:
            self.notify(f"{e.path}: task.json does not say what was compared", severity="error")
            return
        opener(self).rerun_spec(task, lambda spec: self.app.push_screen(TaskScreen(run=(spec, e.path))))

    def action_delete(self) -> None:
        e = self.selected
        if e is None:
            return
        if e.state == "running":
            self.notify("that task is running; cancel it first", severity="warning")
            return
        what = "task folder" if e.kind == "task" else "result CSV"

        def done(yes: bool | None) -> None:
            if not yes:
                return
            try:
                TaskFolder.at(e.path, strict=False).delete()
            except OSError as exc:
                self.notify(f"could not delete {e.path}: {exc}", severity="error")
            self.action_refresh()
        self.app.push_screen(ConfirmDialog(f"Delete the {what} [b]{shown(str(e.path))}[/] and all it holds?"),
                             done)

    def action_save_as(self) -> None:
        e = self.selected
        if e is None:
            return

        def check(text: str) -> str:
            p = Path(text).expanduser()
            if not text.strip():
                return "where to copy it"
            return f"{p} exists already" if p.exists() else ""

        def done(text: str | None) -> None:
            if not text:
                return
            target = Path(text).expanduser()
            try:
                TaskFolder.at(e.path, strict=False).copy(target)
            except OSError as exc:
                self.notify(f"could not copy to {target}: {exc}", severity="error")
                return
            self.notify(f"copied to {target}")
            self.action_refresh()
        self.app.push_screen(AskDialog(f"Copy {shown(e.name)} to:", str(e.path) + "-copy", check, path=True),
                             done)
