"""Subcommands of the CLI. Each module exposes `register(subparsers)` and sets `args.handler`."""
from . import convert, inspect

COMMANDS = [inspect, convert]
