"""Small helpers shared by the subcommands: consoles, number formatting, source options.

Light to import (cli.py does, before it knows the command): the engine is imported where it is used.
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

from rich.console import Console
from rich.markup import escape

# Emoji codes off: rich would turn `:zero:` in data (`local:zero`, an op named `a:smile:b`) into emoji.
out = Console(highlight=False, soft_wrap=False, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def counts(counter: Counter, top: int = 8) -> str:
    items = counter.most_common()
    text = " · ".join(f"{escape(str(k))} {v:,}" for k, v in items[:top])
    return text + (f" · … {len(items) - top} more" if len(items) > top else "")


def shape_text(shape) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")" if shape is not None else "?"


def add_inputs(p: argparse.ArgumentParser, *groups: str, optional: tuple[str, ...] = ()) -> None:
    """The comparison inputs of these groups (engine.compare.inputs) as options of `p`; the inputs
    named in `optional` are not required here (something else can stand in for them)."""
    from ..engine.compare.inputs import inputs
    for item in inputs(*groups):
        def parse(text: str, item=item):
            try:
                return item.parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        if item.kind == "flag":
            p.add_argument(item.flag, dest=item.name, action="store_true", help=item.help)
            continue
        extra = {"action": "append"} if item.kind in ("thresholds", "options") else {}
        p.add_argument(item.flag, dest=item.name, type=parse, default=item.default, metavar=item.cli_metavar,
                       required=item.required and item.name not in optional, help=item.help, **extra)


def add_source_options(p: argparse.ArgumentParser, one_path: bool = False) -> None:
    """Options every command reading a dump understands; `one_path`: also the path's format options
    (--option NAME=VALUE: inspect, convert; compare takes them per side)."""
    add_inputs(p, "source", *(("path",) if one_path else ()))


def source_options(args) -> dict:
    """The keywords of registry.open_source for the options add_source_options(p, one_path=True) added."""
    from ..engine.sides.registry import option_texts
    from ..engine.sources.tensor import SourceError
    try:
        options = option_texts(getattr(args, "options", None))
    except ValueError as exc:
        raise SourceError(f"--option: {exc}") from None
    return {"pick": args.pick, "run": args.run, "shape": args.shape, "dtype": args.dtype, "step": args.step,
            "rank": args.rank, "stats_only": args.stats_only or None, "options": options or None}


def show(text) -> str:
    """Data (op names, paths, messages quoting them) made safe for the console: no markup, no
    control characters (an escape sequence in an op name would reach the terminal)."""
    from ..engine.sources.names import printable
    return escape(printable(str(text)))


class Name:
    """A name from data in a table cell, wrapped where its parts join (after `/`, `.`, `_`, `-`,
    `@`, `:`) instead of in the middle of a word; a part wider than the cell is folded. The text
    is not changed: copied from the terminal it is the name again."""

    BREAK = re.compile(r"(?<=[/._\-@:])")

    def __init__(self, text: str, suffix: str = "", style: str = ""):
        from ..engine.sources.names import printable
        self.parts = [p for p in self.BREAK.split(printable(text)) if p]
        self.suffix, self.style = suffix, style

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement
        widest = max((len(p) for p in self.parts), default=1)
        return Measurement(min(widest, 24), sum(len(p) for p in self.parts) + len(self.suffix))

    def __rich_console__(self, console, options):
        from rich.text import Text
        width = max(1, options.max_width)
        lines, line = [], ""
        for part in self.parts + ([" " + self.suffix] if self.suffix else []):
            if line and len(line) + len(part) > width:
                lines.append(line)
                line, part = "", part.lstrip()
            while len(part) > width:  # a part wider than the cell: folded, as nothing else fits
                lines.append(part[:width])
                part = part[width:]
            line += part
        lines.append(line)
        yield Text("\n".join(lines), style=self.style, no_wrap=True, overflow="fold")


def first_failing_json(table, summary) -> dict | None:
    """The first failing row as the JSON outputs give it (show, compare --json, advise --json)."""
    if summary.first_failing is None:
        return None
    from ..engine.sources.names import printable
    first = table.row(summary.first_failing)
    return {"row": int(summary.first_failing), "op": printable(str(first["npu_op"])),
            "tensor": printable(str(first["tensor"])), "broken": summary.broken}


def judgement_json(table, summary) -> dict:
    """The verdict of the judgement (engine/compare/judgement.py) as every JSON output gives it: the
    same answer as advise's verdict, the task screen, the browser and the report."""
    from ..engine.sources.names import printable
    v = summary.verdict
    worst = None if v.worst is None else printable(str(table.columns["tensor"][v.worst]))
    return {"outcome": v.outcome, "scope": v.scope, "judged": len(v.judged), "failing": len(v.failing),
            "worst": worst, **({"why": v.why} if v.why else {}), **({"cause": v.cause} if v.cause else {})}


def with_status(label: str, work):
    """`work(progress)` under a status line that shows the engine's Progress (what, done/total)."""
    status = err.status(label)
    status.start()
    try:
        return work(lambda p: status.update(p.line()))
    finally:
        status.stop()
