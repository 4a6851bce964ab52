"""The real entry point in a real terminal: tmux at 80x24, keys sent, the screen read back."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.tasks.task import load_task

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


# A tmux server of the tests' own: one started elsewhere would run sessions in its environment
# (another PYTHONPATH, another accuscope).
TMUX = ["tmux", "-L", f"accuscope-test-{os.getpid()}"]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def style_at(line: str, text: str) -> dict:
    """The SGR attributes in force where `text` starts in a line captured with escapes: bold,
    reverse, dim and the foreground colour ("31", "91", "38;5;253", ...; "" is the default)."""
    state = {"bold": False, "reverse": False, "dim": False, "fg": ""}
    plain, at = "", 0
    for match in SGR.finditer(line + "\x1b[m"):
        plain += line[at:match.start()]
        if text in plain:
            return state
        at = match.end()
        codes = (match.group(1) or "0").split(";")
        while codes:
            code = codes.pop(0)
            if code in ("0", ""):
                state = {"bold": False, "reverse": False, "dim": False, "fg": ""}
            elif code in ("1", "2", "7"):
                state[{"1": "bold", "2": "dim", "7": "reverse"}[code]] = True
            elif code in ("22", "27"):
                state.update({"bold": False, "dim": False} if code == "22" else {"reverse": False})
            elif code == "38":
                state["fg"] = ";".join(["38", *[codes.pop(0) for _ in range(2 if codes[0] == "5" else 4)]])
            elif code == "48":
                del codes[:2 if codes[0] == "5" else 4]
            elif code == "39" or 30 <= int(code) <= 37 or 90 <= int(code) <= 97:
                state["fg"] = "" if code == "39" else code
    raise AssertionError(f"{text!r} not in {plain!r}")


class Tmux:
    def __init__(self, name: str, command: str, width: int = 80, height: int = 24):
        self.name = name
        argv = [*TMUX, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                f"{command}; echo EXITED $?; sleep 60"]
        for _ in range(5):  # the previous test's server may still be exiting (its last session killed)
            if subprocess.run(argv, capture_output=True).returncode == 0:
                return
            time.sleep(0.5)
        subprocess.run(argv, check=True)

    def screen(self, styles: bool = False, history: bool = False) -> str:
        """The pane's text; with `styles`, with its SGR escape sequences (capture-pane -e); with
        `history`, the lines scrolled off the top too."""
        return subprocess.run([*TMUX, "capture-pane", "-p", *(["-e"] if styles else []),
                               *(["-S", "-"] if history else []), "-t", self.name],
                              capture_output=True, text=True).stdout

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not on screen:\n{screen}")
            time.sleep(0.1)

    def keys(self, *keys: str) -> None:
        subprocess.run([*TMUX, "send-keys", "-t", self.name, *keys], check=True)

    def kill(self) -> None:
        subprocess.run([*TMUX, "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def tmux():
    sessions: list[Tmux] = []

    def start(command: str, **kw) -> Tmux:
        t = Tmux(f"accuscope-test-{os.getpid()}-{len(sessions)}", command, **kw)
        sessions.append(t)
        return t
    yield start
    for t in sessions:
        t.kill()


def test_open_triage_and_quit_at_80x24(tmux, tmp_path):
    from accuscope.engine.demo.workspace import build_workspace
    build_workspace(tmp_path)
    task = load_task(tmp_path / MAIN.name)
    assert task.table is not None
    first = task.table.row(int(task.table.columns["fail"].argmax()))
    env = "TERM=xterm-256color COLUMNS=80 LINES=24"
    t = tmux(f"cd {shlex.quote(str(tmp_path))} && env {env} {shlex.quote(sys.executable)} -m accuscope "
             f"open {shlex.quote(str(tmp_path / MAIN.name))}")
    n = len(task.table)
    screen = t.wait_for(f"rows {n}/{n}")  # the status line: the screen is drawn (not only its top lines)
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    assert "rows fail" in screen and f"#{first['index']}" in screen  # the first failing op, on the first screen
    t.keys("!")
    screen = t.wait_for("✗")
    t.keys("f")
    t.wait_for("filter, e.g.")  # the prompt has the focus
    t.keys("cos < 0.99", "Enter")
    shown = int((task.table.numbers("cos") < 0.99).sum())
    t.wait_for(f"rows {shown}/{len(task.table)}")
    t.keys("q")
    t.wait_for("first failing op")  # the task browser
    t.keys("q")
    t.wait_for("EXITED 0")


def test_open_of_a_missing_task_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "accuscope", "open", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "nope: no such file or folder" in proc.stderr


def test_compare_tui_runs_in_the_app_and_saves_the_task(tmux, tmp_path):
    """The one-command triage: `accuscope compare ... --tui` shows the comparison as it runs."""
    from accuscope.engine.demo.workspace import build_workspace
    build_workspace(tmp_path / "ws")
    meta = load_task(tmp_path / "ws" / MAIN.name).doc.raw
    out = tmp_path / "ws" / "again"
    args = " ".join(shlex.quote(str(a)) for a in ("--npu", meta["npu"], "--golden", meta["golden"],
                                                     "--model", meta["model"], "--out", out))
    t = tmux(f"env TERM=xterm-256color {shlex.quote(sys.executable)} -m accuscope compare {args} --tui")
    t.wait_for("done:", timeout=60)  # the notification when the run ends
    screen = t.wait_for("rows fail")
    assert "accuscope › tasks › again" in screen
    t.keys("q")
    t.wait_for("first failing op")
    t.keys("q")
    t.wait_for("EXITED 0")
    assert load_task(out).doc.state == "done"


def test_compare_tui_runs_a_rank_tree_in_the_app(tmux, demo_ws, tmp_path):
    """`compare --tui` on two msprobe rank trees: every rank compared in the app, a rank column."""
    out = tmp_path / "ws" / "ranks"
    args = " ".join(shlex.quote(str(a)) for a in ("--npu", demo_ws / "llm-msprobe-4ranks" / "npu", "--golden",
                                                     demo_ws / "llm-msprobe-4ranks" / "golden", "--out", out))
    t = tmux(f"env TERM=xterm-256color {shlex.quote(sys.executable)} -m accuscope compare {args} --tui")
    t.wait_for("of 8 ranks", timeout=120)  # the notification when the run ends
    assert "accuscope › tasks › ranks" in t.wait_for("rows fail")
    t.keys("q")
    t.wait_for("first failing op")
    t.keys("q")
    t.wait_for("EXITED 0")
    assert len(load_task(out).doc.ranks) == 8


@pytest.mark.parametrize("env", ["NO_COLOR=1 TERM=xterm-256color", "TERM=xterm"])  # no colour; 16 colours
def test_marks_carry_the_meaning_without_colour(tmux, demo_ws, env):
    t = tmux(f"env {env} {shlex.quote(sys.executable)} -m accuscope open "
             f"{shlex.quote(str(demo_ws / MAIN.name))}")
    screen = t.wait_for("rows fail")
    assert "✗" in screen  # failing rows are marked, not only coloured
    lines = t.screen(styles=True).splitlines()
    summary = next(line for line in lines if "rows fail" in line)
    mark = style_at(summary, "✗")
    passing = style_at(next(line for line in lines if "Conv2D" in line and "✗" not in line), "Conv2D")
    failing = style_at([line for line in lines if "Conv2D" in line and "✗" in line][-1], "Conv2D")  # not the cursor row
    assert not failing["dim"] and (failing["bold"] or failing["fg"] != passing["fg"])
    if "NO_COLOR" in env:  # the mark stands out by its attributes; failing rows are as bright as others
        assert mark["reverse"] and mark["bold"]
        assert failing["fg"] in (passing["fg"], "") and failing["bold"]
    else:  # 16 colours: red, never white
        assert mark["fg"] in ("31", "91") and failing["fg"] in ("31", "91")
    t.keys("q", "q")
    t.wait_for("EXITED 0")


def test_the_app_refuses_to_start_without_a_terminal(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "accuscope", "--workspace", str(tmp_path)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "needs a terminal" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_workspace_that_is_a_file_is_refused_in_one_line(tmux, tmp_path):
    (tmp_path / "file").write_text("x")
    t = tmux(f"{shlex.quote(sys.executable)} -m accuscope --workspace {shlex.quote(str(tmp_path / 'file'))}")
    screen = t.wait_for("EXITED 2")
    assert "workspace" in screen and "Traceback" not in screen


def test_a_crash_exits_3_and_leaves_its_traceback_on_the_terminal(tmux, tmp_path):
    """A bug planted in the app (its first screen raises): the exit code says so, the reason stays."""
    code = ("import sys; from accuscope.app import browser, main; "
            "browser.BrowserScreen.on_mount = lambda self: 1 / 0; "
            f"sys.exit(main.run({str(tmp_path)!r}))")
    t = tmux(f"env TERM=xterm-256color {shlex.quote(sys.executable)} -c {shlex.quote(code)}", height=60)
    t.wait_for("EXITED 3", timeout=90)
    screen = t.screen(history=True)  # the traceback may be longer than the pane
    assert "ZeroDivisionError" in screen and "internal error" in screen
