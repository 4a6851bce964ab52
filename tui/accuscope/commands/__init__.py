"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.handler`."""
from . import compare, convert, demo, dump, inspect, op, open_task

COMMANDS = [inspect, convert, dump, compare, op, demo, open_task]
