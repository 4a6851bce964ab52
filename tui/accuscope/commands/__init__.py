"""Subcommands of the CLI, one module each, imported only when that command is the one given.

`COMMANDS` is all `accuscope --help` needs: each command's name, its module and its one-line help.
A module's `register(parser)` declares the command's description and options on its own parser
and sets `handler`; `options(name, parser)` runs it (cli.py does, once argparse meets the name), so
`accuscope inspect ...` and `accuscope inspect --help` import inspect's engine and nothing else.
"""
from __future__ import annotations

import argparse
from importlib import import_module
from typing import NamedTuple


class Command(NamedTuple):
    name: str
    module: str  # under accuscope.commands
    help: str


COMMANDS = (
    Command("inspect", "inspect", "summarize a dump, golden dump or model and list every problem"),
    Command("convert", "convert", "write a dump's tensors in logical layout as .npy or .bin"),
    Command("dump", "dump", "run an ONNX model with onnxruntime and dump every node output as npy"),
    Command("compare", "compare", "compare two dumps (any format on either side), operator by operator"),
    Command("run", "run", "run a reference and a candidate ONNX model, dump both, compare and advise"),
    Command("show", "show", "print a task's rows as JSON, CSV or a Markdown table"),
    Command("overlay", "overlay", "write Model Explorer node data: each framework op coloured by a metric"),
    Command("op", "op", "detail of one operator's tensor: TopN errors, error distribution, statistics"),
    Command("advise", "advise", "name the operator that introduced the error and the likely cause"),
    Command("sensitivity", "sensitivity", "rank the ops by the error each one made, with the lists converters take"),
    Command("precision", "precision",
            "find the fewest ops to keep in fp32 so an fp16/int8 conversion meets a target"),
    Command("report", "report", "write a task's verdict, findings and charts as HTML or Markdown"),
    Command("pairs", "pairs", "write a task's pairing as msprobe's mapping files (-dm data, -cm cell mapping)"),
    Command("export", "export", "export the ops between two nodes as a runnable submodel with its data"),
    Command("demo", "demo", "build a workspace of demo comparison tasks with planted faults and open it"),
    Command("open", "open_task", "open a task folder or a result CSV in the app"),
    Command("serve", "serve", "serve the app to a web browser (textual-serve), on 127.0.0.1 by default"),
    Command("mcp", "mcpserver", "serve the commands as tools to an agent (Model Context Protocol over stdio)"),
)

_BY_NAME = {c.name: c for c in COMMANDS}


def options(name: str, parser: argparse.ArgumentParser) -> None:
    """Import command `name`'s module and let it declare its options on `parser` (once)."""
    if parser.get_default("handler") is None:
        import_module(f"{__name__}.{_BY_NAME[name].module}").register(parser)
