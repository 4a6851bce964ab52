"""Starting the app: the workspace default and the entry used by the CLI."""
from __future__ import annotations

import os
from pathlib import Path

from ..engine.compare import CompareSpec


def default_workspace() -> Path:
    """$ACCUSCOPE_WORKSPACE, else $XDG_DATA_HOME/accuscope (~/.local/share/accuscope)."""
    if os.environ.get("ACCUSCOPE_WORKSPACE"):
        return Path(os.environ["ACCUSCOPE_WORKSPACE"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "accuscope"


def run(workspace: str | os.PathLike | None = None, task: str | os.PathLike | None = None,
        compare: tuple[CompareSpec, str | os.PathLike] | None = None) -> None:
    """Open the task browser on `workspace`; with `task`, that task on top; with `compare`
    (spec, task folder), a running comparison."""
    from .app import AccuscopeApp
    root = Path(workspace) if workspace else default_workspace()
    root.mkdir(parents=True, exist_ok=True)
    AccuscopeApp(root, Path(task) if task else None,
                 (compare[0], Path(compare[1])) if compare else None).run()
