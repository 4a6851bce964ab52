"""Small helpers shared by the subcommands: consoles, number formatting, source options.

Light to import (cli.py does, before it knows the command): the engine is imported where it is used.
"""
# lazy: engine.compare.inputs, engine.compare.spec, engine.sides.registry, engine.sources.names,
# lazy: engine.sources.tensor, exitcode
from __future__ import annotations

import argparse
import builtins
import os
import re
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

# rich's markup tags and its escape (rich.markup: importing it imports rich's Text and styles), each run of
# backslashes taken from its first (rich's `\\*` tried each run from every backslash: 1 MB of them, minutes)
_TAGS = re.compile(r"(?<!\\)((\\*)\[([a-z#/@][^[]*?)])")
_ESCAPE = re.compile(r"(?<!\\)(\\*)(\[[a-z#/@][^[]*?])")
_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))  # what rich's Text strips
FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")  # what rich reads to decide on a terminal
_NARROW = frozenset("·✗⚠…─│✓×→←≤≥±°—–")  # one cell each, as ASCII (the summaries' marks)


def escape(markup: str) -> str:
    """rich.markup.escape: `markup` made safe to print as markup (its tags' brackets escaped)."""
    markup = _ESCAPE.sub(lambda m: f"{m[1]}{m[1]}\\{m[2]}", markup)
    return markup + "\\" if markup.endswith("\\") and not markup.endswith("\\\\") else markup


class Printer:
    """A rich Console made when first needed. A line of markup printed to a stream that is not a
    terminal (a pipe, a file, a log: no colour, nothing drawn) is written as the same text rich would
    write, without importing rich (45-65 ms of a command's start); tables, status lines, terminals,
    lines rich would wrap or markup this does not read go to rich itself."""

    def __init__(self, stderr: bool = False, **options: Any) -> None:
        self._stderr, self._options = stderr, options
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console
            self._console = Console(stderr=self._stderr, **self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)

    @property
    def is_terminal(self) -> bool:
        """rich's answer; without rich where it is the stream's own (no environment forcing it)."""
        if self._console is not None or not self._undecorated():
            return self.console.is_terminal
        try:
            return self._stream().isatty()
        except ValueError:  # closed
            return False

    def _stream(self):
        return sys.stderr if self._stderr else sys.stdout

    def _undecorated(self) -> bool:
        """Whether the stream's isatty() alone decides, as rich decides it: nothing in the environment
        forces a terminal or not, no notebook, no IDLE."""
        env = os.environ
        return not (hasattr(builtins, "get_ipython") or any(k in env for k in FORCING)
                    or getattr(sys.stdin, "__module__", "").startswith("idlelib"))

    def print(self, *objects: Any, **options: Any) -> None:
        text = self._plain(objects, options)
        if text is None:
            self.console.print(*objects, **options)
            return
        stream = self._stream()
        stream.write(text + "\n")
        stream.flush()

    def _plain(self, objects: tuple, options: dict) -> str | None:
        """What rich would write for this print, where that is plain text; None: ask rich."""
        if self._console is not None or len(objects) != 1 or type(objects[0]) is not str \
                or not set(options) <= {"soft_wrap"}:
            return None
        stream = self._stream()
        if stream is None or not self._undecorated() or stream.isatty():
            return None
        text = _markup_text(objects[0])
        if text is None or "\t" in text:
            return None
        text = text.translate(_CONTROL)
        if not options.get("soft_wrap", self._options.get("soft_wrap", False)):  # rich wraps at its width
            width = _width()
            for line in text.split("\n"):
                if len(line) > width or not (line.isascii() or all(c.isascii() or c in _NARROW for c in line)):
                    return None
        return text


def _markup_text(markup: str) -> str | None:
    """The text of rich console markup (rich.markup.render without the styles); None for what this
    does not read as rich does (handlers, closing tags by another spelling, broken markup)."""
    if "[" not in markup:
        return markup
    parts: list[str] = []
    opened: list[str] = []
    position = 0
    for match in _TAGS.finditer(markup):
        full, escapes, tag = match.groups()
        start, end = match.span()
        if start > position:
            parts.append(markup[position:start].replace("\\[", "["))
        position = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            parts.append("\\" * backslashes)
            if escaped:  # an escaped tag: its text
                parts.append(full[len(escapes):])
                continue
        name = tag.partition("=")[0]
        if name.startswith("@"):
            return None
        if name.startswith("/"):
            closing = name[1:].strip()
            if not opened or (closing and closing != opened[-1]):
                return None
            opened.pop()
        else:
            opened.append(name)
    if position < len(markup):
        parts.append(markup[position:].replace("\\[", "["))
    return "".join(parts)


def _width() -> int:
    """rich's console width: $COLUMNS, else the first standard stream's terminal, else 80."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit() and int(columns):
        return int(columns)
    if columns is not None and columns.isdigit():
        return 0  # rich's rules for 0 differ by $LINES: ask rich
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            pass
    return 80


# Emoji codes off: rich would turn `:zero:` in data (`local:zero`, an op named `a:smile:b`) into emoji.
out = Printer(highlight=False, soft_wrap=False, emoji=False)
err = Printer(stderr=True, highlight=False, emoji=False)


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


def add_inputs(p: argparse.ArgumentParser, *groups: str, optional: tuple[str, ...] = (),
               repeated: tuple[str, ...] = ()) -> None:
    """The comparison inputs of these groups (engine.compare.inputs) as options of `p`; the inputs
    named in `optional` are not required here (something else can stand in for them), those in
    `repeated` may be given several times (a list: compare's --npu, a chain of stages)."""
    from ..engine.compare.inputs import inputs
    from ..engine.compare.spec import PER_OUTPUT_KINDS
    for item in inputs(*groups):
        def parse(text: str, item=item):
            try:
                return item.parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        if item.kind == "flag":
            p.add_argument(item.flag, dest=item.name, action="store_true", help=item.help)
            continue
        if item.kind in PER_OUTPUT_KINDS:  # Polygraphy's `--atol 1e-3 out:1e-2`: the words read as one text
            p.add_argument(item.flag, dest=item.name, nargs="+", action=Words, default=item.default,
                           metavar=item.cli_metavar, help=item.help)
            continue
        extra = {"action": "append"} if item.kind in ("thresholds", "options") else \
            {"action": Repeated} if item.name in repeated else {}
        p.add_argument(item.flag, dest=item.name, type=parse, default=item.default, metavar=item.cli_metavar,
                       required=item.required and item.name not in optional, help=item.help, **extra)


class Words(argparse.Action):
    """An option taking several words (nargs="+") that its input parses as one space-separated text."""

    def __call__(self, parser, namespace, values, option_string=None):
        from ..engine.compare.inputs import BY_NAME
        try:
            setattr(namespace, self.dest, BY_NAME[self.dest].parse(" ".join(values)))
        except ValueError as exc:
            parser.error(f"argument {option_string}: {exc}")


class Repeated(argparse.Action):
    """An option that may be given several times: one value as given (a str), several as a list. Not
    argparse's "append", so that a front door taking one value (the MCP tools) still takes a str."""

    def __call__(self, parser, namespace, values, option_string=None):
        got = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if got is None else [*(got if isinstance(got, list) else [got]), values])


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
    return {"pick": args.pick, "run": args.run, "shape": args.golden_shape, "dtype": args.golden_dtype, "step": args.step,
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


VERDICT_MARKS = {"pass": "[green]✓[/]", "fail": "[bold red]✗[/]", "unknown": "[bold yellow]?[/]"}


def verdict_markup(v, table) -> str:
    """`verdict ✓ pass: ...`: the one verdict (judgement.Verdict.line) as the commands print it."""
    return said_verdict(v.outcome, v.line(table.columns["tensor"]))


def said_verdict(outcome: str, line: str) -> str:
    """A verdict's outcome and line as the commands print them (also a columnar task's, judgement.combined)."""
    return f"[bold]verdict[/] {VERDICT_MARKS[outcome]} {show(line)}"


def verdict_exit(summary, fail_on_error: bool) -> int:
    """The exit code of a command that judges (compare, show): with --fail-on-error, 1 exactly when the
    verdict (judgement.verdict: the one every surface reads) is not a pass, "unknown" included; 0
    otherwise. Coverage notes are said beside the verdict and never change it."""
    from ..exitcode import ExitCode
    v = summary.verdict if summary is not None else None
    return ExitCode.FINDINGS if fail_on_error and (v is None or v.outcome != "pass") else ExitCode.OK


def with_status(label: str, work):
    """`work(progress)` under a status line that shows the engine's Progress (what, done/total)."""
    status = err.status(label)
    status.start()
    try:
        return work(lambda p: status.update(p.line()))
    finally:
        status.stop()
