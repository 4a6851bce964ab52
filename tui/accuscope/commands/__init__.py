"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.handler`."""
from . import compare, convert, dump, inspect

COMMANDS = [inspect, convert, dump, compare]
