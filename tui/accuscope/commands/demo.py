"""`accuscope demo [--workspace DIR] [--no-tui]`: build a workspace of finished demo tasks and open it."""
# lazy: app.main
from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import time
from pathlib import Path

from rich.markup import escape

from ..engine.demo.workspace import MAIN, TASKS, build_workspace, default_workspace
from ..engine.tasks.task import load_task
from ..exitcode import ExitCode
from .common import err, out


def register(p) -> None:
    names = ", ".join(t.name for t in TASKS)
    p.description = (f"Build, in a few seconds and the same way every time, a workspace of finished "
                     f"comparison tasks ({names}): small real networks, onnxruntime golden dumps, "
                     f"Ascend-style float16 NPU dumps with fused ops and the offline-model JSON, and "
                     f"planted faults to find (an int4-quantized convolution, a float16 overflow in "
                     f"a LayerNorm, an input fed as BGR). Rebuilding replaces only the demo's own "
                     f"task folders. Needs onnx and onnxruntime (pip install 'accuscope[onnx]').")
    p.add_argument("--workspace", type=Path, default=argparse.SUPPRESS, metavar="DIR",  # absent: the global one
                   help=f"where to build the tasks (default: {default_workspace()}, i.e. "
                        "$XDG_DATA_HOME/accuscope/demo or ~/.local/share/accuscope/demo)")
    p.add_argument("--no-tui", action="store_true", help="only build the workspace and print where it is")
    p.set_defaults(handler=run)


def launch_tui(workspace: Path, task: Path) -> int | None:
    """Open the terminal UI on the workspace (the main task selected) when this version has one: its
    exit code, None without one."""
    try:
        available = importlib.util.find_spec("accuscope.app.main") is not None
    except (ImportError, ValueError):  # no accuscope.app at all, or a module without a spec
        available = False
    if not available:
        return None
    from ..app.main import run as run_app  # only imported when it exists
    return run_app(str(workspace), task=str(task)) or ExitCode.OK  # an app that returns nothing ran fine


def interactive() -> bool:
    """A terminal on both ends: only then is a full-screen UI started."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def run(args) -> int:
    workspace = (Path(args.workspace) if args.workspace else default_workspace()).expanduser().absolute()
    started = time.perf_counter()
    with err.status(f"building the demo workspace in {escape(str(workspace))}") as status:
        folders = build_workspace(workspace, lambda p: status.update(escape(p.what)))
    seconds = time.perf_counter() - started
    out.print(f"demo workspace: [bold]{escape(str(workspace))}[/] ({len(folders)} tasks, built in {seconds:.1f} s)",
              soft_wrap=True)
    docs = {folder: load_task(folder).doc for folder in folders}
    for folder, doc in docs.items():
        out.print(f"  [bold]{escape(folder.name)}[/]: {escape((doc.demo or {}).get('title', ''))}", soft_wrap=True)
        out.print(f"    {doc.rows or 0} rows, {doc.failing or 0} failing; first failing op: "
                  f"{escape(doc.first_failing_op or 'none')}", soft_wrap=True)
    main = next(f for f in folders if f.name == MAIN.name)
    tty = interactive()
    if not args.no_tui and tty and (code := launch_tui(workspace, main)) is not None:
        return code
    out.print(f"look at it:  accuscope --workspace {escape(shlex.quote(str(workspace)))}   (the task browser)",
              soft_wrap=True)
    out.print(f"        or:  accuscope open {escape(shlex.quote(str(main)))}   (the main task)", soft_wrap=True)
    out.print(f"results:     {escape(str(main / (docs[main].csv or '')))} (MindStudio-style CSV; "
              "README.md in each task folder says what was planted)", soft_wrap=True)
    if not args.no_tui and tty:
        out.print("(this version has no terminal UI yet: the task folders hold the results)")
    return ExitCode.OK
