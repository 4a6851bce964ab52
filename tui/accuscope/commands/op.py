"""`accuscope op TASK_DIR OP_NAME`: where inside one operator's tensor the error lives."""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from rich.console import JustifyMethod
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..engine.diagnose import opdetail
from ..engine.diagnose.opfiles import write_detail
from ..engine.diagnose.oppair import open_op
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import err, out, show

PROGRESS_ABOVE = 4 << 20  # elements; smaller tensors finish before a bar would show


def _top(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= opdetail.TOP_MAX:
        raise argparse.ArgumentTypeError(f"TopN must be within 1..{opdetail.TOP_MAX}, not {n}")
    return n


def _index(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a tensor index (0, 1, ...)")
    return int(text)


def _threshold(text: str) -> float:
    try:
        c = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(c):
        raise argparse.ArgumentTypeError("the threshold cannot be NaN")
    return c


class _Moved(argparse.Action):
    """`op --threshold C` was the summary's element error bound; `--threshold` means NAME=VALUE
    everywhere else, so the bound is `--above C` now: say so instead of guessing."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("--threshold is NAME=VALUE in compare; the element error bound of `op` is --above C")


def register(p) -> None:
    p.description = ("Compare one input or output tensor of one operator of a task element by element: the TopN "
                     "elements by absolute or relative error (with N C H W coordinates), the share of elements "
                     "above an error threshold, statistics of both tensors and per-channel cosine. Writes "
                     "msaccucmp-compatible {op}_{output|input}_{k}_summary.txt, _absolute_error_topn.csv and "
                     "_relative_error_topn.csv. Elements holding NaN/inf on one side only rank first. "
                     "Exit 0: done; 2: unusable input (no task, unknown op, index out of range).")
    p.add_argument("task", metavar="TASK_DIR", help="task folder written by `accuscope compare`")
    p.add_argument("op", metavar="OP_NAME", help="NPU op name as in the NPUDump column, or a TensorIndex "
                                                 "such as conv1:output:0")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--input", type=_index, metavar="K", help="compare input K of the op")
    which.add_argument("--output", type=_index, metavar="K", help="compare output K of the op (default: output 0)")
    p.add_argument("--top", type=_top, default=opdetail.TOP_DEFAULT, metavar="N",
                   help=f"how many elements to list, 1..{opdetail.TOP_MAX} (default {opdetail.TOP_DEFAULT})")
    p.add_argument("--by", choices=opdetail.METRICS, default="abs",
                   help="rank the printed table by absolute (default) or relative error; both CSVs are written")
    p.add_argument("--above", type=_threshold, default=opdetail.C_DEFAULT, metavar="C",
                   help="count the elements whose error is above C in the summary sentence (default 0.001)")
    p.add_argument("--threshold", action=_Moved, nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--out", metavar="DIR", help="folder for the files (default: TASK_DIR/op/<op name>/)")
    p.set_defaults(handler=run)


def run(args) -> int:
    io = "input" if args.input is not None else "output" if args.output is not None else None
    index = args.input if args.input is not None else args.output
    pair = open_op(args.task, args.op, io, index)
    if pair.npu.size > PROGRESS_ABOVE:
        with Progress(TextColumn("reading"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn(),
                      console=err.console, transient=True) as bar:
            job = bar.add_task("", total=pair.npu.size)
            measured = measure(pair, args.task, args.top, args.by, args.above, args.out,
                               progress=lambda p: bar.update(job, completed=p.done))
    else:
        measured = measure(pair, args.task, args.top, args.by, args.above, args.out)
    detail, folder, files, count = measured
    info = pair.info
    out.print(f"[bold]{show(info.tensor)}[/] ({show(info.op_type)}) vs golden {show(info.golden_op)} · "
              f"shape {list(detail.shape)} · {detail.n:,} elements · {show(info.npu_dtype)} vs "
              f"{show(info.golden_dtype)} · {detail.elapsed:.2f} s")
    out.print(_top_table(detail, args.by))
    sketch = detail.sketch(args.by)
    out.print(sketch.sentence(args.above, count))
    notes = []
    if sketch.nonfinite:
        notes.append(f"{sketch.nonfinite:,} elements hold NaN/inf on one side only: listed first, counted above "
                     f"every threshold")
    same = detail.abs.undefined
    if same:
        notes.append(f"{same:,} elements hold the same NaN/inf on both sides: left out")
    if args.by == "rel" and sketch.undefined - same:
        notes.append(f"{sketch.undefined - same:,} elements have no relative error (golden is 0)")
    for note in notes:
        out.print(f"  note: {note}")
    out.print(_stats_table(detail, info))
    if detail.channels is not None and len(detail.channels) > 1:
        ch = detail.channels
        worst = ch.worst(3)
        parts = [f"{int(c)} (cos {_cos(ch.cos[c])}, max abs {_num(ch.max_abs[c])})" for c in worst]
        out.print(f"worst channels of {len(ch)}: " + ", ".join(parts))
    out.print(f"cosine {_cos(detail.cosine)} · max abs {_num(detail.abs.max)} · mean abs {_num(detail.mean_abs)} · "
              f"max rel {_num(detail.rel.max)}")
    out.print(f"wrote {show(str(folder))}/: " + ", ".join(show(f.name) for f in files), soft_wrap=True)
    return ExitCode.OK


def measure(pair, task: str, top: int, by: str, above: float, out: str | None, progress=None):
    """One op's detail (`pair`: oppair.open_op's), its files written into `out` (default
    TASK/op/<op name>/) and the count of elements whose `by` error is above `above`:
    (detail, folder, files, count)."""
    detail = pair.detail(top=top, progress=progress)
    folder = Path(out) if out else Path(task) / "op" / _folder_name(pair.info.npu_op)
    try:
        files = write_detail(detail, folder)
    except OSError as exc:
        raise SourceError(f"{folder}: cannot write the detail files: {exc.strerror or exc}") from None
    low, high = detail.sketch(by).count_above(above)
    count = low if low == high else opdetail.exact_count(pair.source(), above, by)
    return detail, folder, files, count


def _folder_name(op: str) -> str:
    name = re.sub(r"[^\w.@+=-]", "_", op).strip(".") or "op"
    return name[:200]


def _num(v: float, digits: int = 4) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def _cos(v: float) -> str:
    return "NaN" if math.isnan(v) else f"{v:.6f}"


def _err(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.4g}"


def _top_table(d: opdetail.OpDetail, by: str) -> Table:
    top = d.top(by)
    word = opdetail.WORDS[by]
    table = Table(title=f"Top {len(top)} by {word} error", title_justify="left", show_edge=False, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"), ("Index", "right"), (d.layout, "left"), ("NPU", "right"), ("Golden", "right"),
        ("AbsErr", "right"), ("RelErr", "right"), ("", "left"))
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)
    for i in range(len(top)):
        mark = "NaN/inf" if top.nonfinite[i] else ""
        table.add_row(str(i + 1), str(int(top.index[i])), top.coord_text(i), _num(top.npu[i], 6),
                      _num(top.golden[i], 6), _err(top.abs_err[i]), _err(top.rel_err[i]), mark)
    if not len(top):
        table.add_row("", "", "", "", "", "", "", f"no element has a {word} error")
    return table


def _stats_table(d: opdetail.OpDetail, info: opdetail.PairInfo) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for name in ("tensor", "dtype", "min", "max", "mean", "std", "NaN", "inf"):
        table.add_column(name, justify="left" if name in ("tensor", "dtype") else "right", no_wrap=True)
    for side, s, dtype in (("NPU", d.npu_stats, info.npu_dtype), ("golden", d.golden_stats, info.golden_dtype)):
        table.add_row(side, show(dtype), _num(s.min), _num(s.max), _num(s.mean), _num(s.std), f"{s.nan:,}",
                      f"{s.inf:,}")
    return table
