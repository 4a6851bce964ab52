"""`accuscope convert PATH --out DIR`: every tensor in logical layout, one file per tensor."""
from __future__ import annotations

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..engine.graphs.graph import Graph
from ..engine.sides.registry import open_source
from ..engine.sources.convert import FORMATS, convert
from ..engine.sources.names import printable
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import add_source_options, err, out, source_options


def register(p) -> None:
    p.description = ("Write every tensor of an NPU dump (device layouts converted back to "
                     "NCHW/ND, padding cropped) or golden dump as one file per tensor. "
                     "NPU tensors are named {dump file}.{input|output}.{i}; golden ones "
                     "[input_]{op}.{index}.{timestamp}. With --to bin, tensors.json records "
                     "shapes and dtypes. Exit 0: all written; 1: some tensors failed; "
                     "2: nothing usable.")
    p.add_argument("path")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--to", choices=FORMATS, default="npy")
    add_source_options(p, one_path=True)
    p.set_defaults(handler=run)


def run(args) -> int:
    source = open_source(args.path, **source_options(args))
    if isinstance(source, Graph):
        raise SourceError(f"{args.path}: a model graph holds no dumped tensors to convert")
    with Progress(TextColumn("converting"), BarColumn(), MofNCompleteColumn(), console=err.console,
                  transient=True) as bar:
        task = bar.add_task("convert", total=None)
        report = convert(source, args.out, args.to,
                         progress=lambda p: bar.update(task, completed=p.done, total=p.total))
    problems = list(source.problems) + report.failed
    out.print(f"wrote {len(report.written):,} files to {escape(printable(report.out_dir))}")
    if report.renamed:
        out.print(f"  {len(report.renamed):,} renamed (op names that clean to the same file name, or too "
                  "long for one): mapping.csv lists the names they stand for")
    for p in problems:
        out.print(f"  [red]✗[/] {escape(printable(str(p)))}", soft_wrap=True)
    if not report.written:
        return ExitCode.UNUSABLE
    return ExitCode.FINDINGS if problems else ExitCode.OK
