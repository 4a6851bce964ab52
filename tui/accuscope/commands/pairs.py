"""`accuscope pairs TASK_DIR --to msprobe --out DIR`: a task's pairing as msprobe's mapping files."""
from __future__ import annotations

from ..engine.export.msprobemap import CELL_FILE, DATA_FILE, output_folder, task_mapping, write_mapping
from ..exitcode import ExitCode
from .common import out, show


def register(p) -> None:
    p.description = (f"Write the pairs a task of two msprobe dumps made (by a mapping file, the app's decisions "
                     f"in pairs.yaml, name variants, the MindSpore-PyTorch table, --match structure) as msprobe's "
                     f"own mapping files in DIR: {DATA_FILE} (-dm: every pair whose names differ, N/A for a "
                     f"tensor left unpaired whose namesake exists) and {CELL_FILE} (-cm: the module calls whose "
                     f"paths differ), so `msprobe compare -tp NPU/dump.json -gp BENCH/dump.json -dm "
                     f"DIR/{DATA_FILE}` pairs what accuscope paired. Exit 0: written; 2: unusable task, a task "
                     "that compares no msprobe dumps, or an --out that cannot be written.")
    p.add_argument("task", metavar="TASK_DIR")
    p.add_argument("--to", choices=("msprobe",), default="msprobe", help="whose mapping files (default msprobe)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write the files into (made if missing)")
    p.set_defaults(handler=run)


def run(args) -> int:
    output_folder(args.out)  # refused before the task is planned
    found = task_mapping(args.task)
    written = {path.name: path for path in write_mapping(found, args.out)}
    rules = ", ".join(f"{how} {n:,}" for how, n in sorted(found.rules.items()))
    for name, what in ((DATA_FILE, f"{len(found.data):,} data names ({rules}; {found.same:,} namesakes need no line)"),
                       (CELL_FILE, f"{len(found.cells):,} module paths")):
        out.print(f"wrote {show(str(written[name]))}: {what}" if name in written else
                  f"no {name}: accuscope paired no {'tensors' if name == DATA_FILE else 'module calls'} whose names "
                  "differ (msprobe pairs namesakes without a file)", soft_wrap=True)
    for line in found.conflicts[:5]:
        out.print(f"[yellow]ranks differ:[/] {show(line)}", soft_wrap=True)
    if DATA_FILE in written:
        out.print(f"use it: msprobe compare -tp NPU/dump.json -gp BENCH/dump.json -o OUT -dm "
                  f"{show(str(written[DATA_FILE]))}", soft_wrap=True)
    return ExitCode.OK
