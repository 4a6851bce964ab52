"""Starting the app: the workspace default and the entry used by the CLI."""
# lazy: app.app
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.tasks.task import Task
from ..exitcode import ExitCode

if TYPE_CHECKING:
    from ..engine.compare.spec import CompareSpec


def default_workspace() -> Path:
    """$ACCUSCOPE_WORKSPACE, else $XDG_DATA_HOME/accuscope (~/.local/share/accuscope)."""
    if os.environ.get("ACCUSCOPE_WORKSPACE"):
        return Path(os.environ["ACCUSCOPE_WORKSPACE"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "accuscope"


def run(workspace: str | os.PathLike | None = None, task: str | os.PathLike | Task | None = None,
        compare: tuple[CompareSpec, str | os.PathLike] | None = None) -> int:
    """Open the task browser on `workspace`; with `task` (a folder, or a Task loaded already), that
    task on top; with `compare` (spec, task folder), a running comparison. Returns the exit code: OK, UNUSABLE without a
    terminal, INTERNAL after an uncaught exception (its traceback printed when the screen closes)."""
    served = bool(os.environ.get("TEXTUAL_DRIVER"))  # textual-serve's web driver talks over pipes
    if not served and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("accuscope: the app needs a terminal (stdin or stdout is not one); "
              "`accuscope --help` lists the commands that work without", file=sys.stderr)
        return ExitCode.UNUSABLE
    from .app import AccuscopeApp
    root = Path(workspace) if workspace else default_workspace()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"accuscope: workspace {root}: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.UNUSABLE
    app = AccuscopeApp(root, task if isinstance(task, Task) or task is None else Path(task),
                       (compare[0], Path(compare[1])) if compare else None)
    app.run()
    if app.return_code:
        print("accuscope: internal error (the traceback above); please report it", file=sys.stderr)
        return ExitCode.INTERNAL
    return ExitCode.OK
