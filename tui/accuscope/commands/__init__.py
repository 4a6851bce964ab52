"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.handler`."""
from . import (
    advise,
    compare,
    convert,
    demo,
    dump,
    export,
    inspect,
    op,
    open_task,
    overlay,
    precision,
    report,
    run,
    sensitivity,
    serve,
    show,
)

COMMANDS = [inspect, convert, dump, compare, run, show, overlay, op, advise, sensitivity, precision, report, export,
            demo, open_task, serve]
