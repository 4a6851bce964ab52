"""`accuscope open TASK_DIR|RESULT.csv`: open one task (or a MindStudio/msaccucmp/msit CSV) in the app."""
# lazy: app.main
from __future__ import annotations

import argparse
from pathlib import Path

from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import load_head


def register(p) -> None:
    p.description = ("Open a task folder, or a result CSV written by MindStudio, msaccucmp or "
                     "msit, in the app (q goes back to the task browser of its workspace). "
                     "Exit 2 when it cannot be opened.")
    p.add_argument("path", help="task folder (with task.json) or result CSV")
    p.add_argument("--workspace", default=argparse.SUPPRESS,  # absent: the global --workspace stays
                   help="workspace shown behind it (default: the task's parent folder)")
    p.set_defaults(handler=run, app=True)  # the cyclic collector stays off until its first frame (cli.py)


def run(args) -> int:
    path = Path(args.path).expanduser()
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    # SourceError -> exit 2 with the reason, before any screen is drawn. A large task: its first
    # rows only (milliseconds), the app reads the rest after its first frame
    task = load_head(path)
    from ..app.main import run as run_app
    return run_app(args.workspace or (path.parent if path.is_dir() else path.parent), task=task)
