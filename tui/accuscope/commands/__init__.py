"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.run`."""
from . import convert, inspect

COMMANDS = [inspect, convert]
