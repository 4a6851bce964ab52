"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.handler`."""
from . import advise, compare, convert, demo, dump, export, inspect, op, open_task, precision, run, sensitivity, show

COMMANDS = [inspect, convert, dump, compare, run, show, op, advise, sensitivity, precision, export, demo, open_task]
