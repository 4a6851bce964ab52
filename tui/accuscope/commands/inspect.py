"""`accuscope inspect PATH`: what is in a dump file, dump folder, golden dump or model, and what is wrong."""
from __future__ import annotations

import os
from collections import Counter

from rich.markup import escape
from rich.table import Table

from ..engine.graphs.graph import Graph
from ..engine.sides.registry import describe, open_source
from ..engine.sources import polygraphy
from ..engine.sources.golden import GoldenDump
from ..engine.sources.names import printable
from ..engine.sources.npudump import NpuDump
from ..engine.sources.tensor import Problem, Tensor
from ..exitcode import ExitCode
from .common import Name, add_source_options, counts, human_bytes, out, shape_text, source_options


def register(p) -> None:
    p.description = ("Summarize a dump file or folder, golden dump (npy folder, npz, bin, "
                     "Polygraphy JSON) or model (ONNX, OM JSON, Caffe prototxt). "
                     "Exit 0: clean; 1: problems found; 2: nothing usable.")
    p.add_argument("path")
    p.add_argument("--limit", type=int, default=30, help="rows of the tensor/op table (0 = all; default 30)")
    add_source_options(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    source = open_source(args.path, **source_options(args))
    if isinstance(source, Graph):
        return _graph(source, args.limit)
    return _dump(source, args.limit, {k: v for k, v in source_options(args).items() if v is not None})


def _dump(source: NpuDump | GoldenDump, limit: int, options: dict | None = None) -> int:
    npu = isinstance(source, NpuDump)
    tensors = source.tensors
    readable = [t for t in tensors if not t.problem]
    if npu:
        title = f"[bold]NPU dump[/] {_show(source.path)}"
        if source.run_dir != source.path and os.path.isdir(source.path):
            title += f"\n  run {_show(os.path.relpath(source.run_dir, source.path))}"
            if len(source.runs) > 1:
                title += f" ({len(source.runs) - 1} other runs; choose with --run)"
        facts = [f"ops {len(source.files):,}"]
        repeated = sum(1 for v in source.versions.values() if len(v) > 1)
        if repeated:
            facts.append(f"{repeated} ops dumped several times (--pick)")
        if source.skipped_opdebug:
            facts.append(f"{source.skipped_opdebug} Opdebug records skipped")
    else:
        title = f"[bold]dump ({source.kind})[/] {_show(source.path)}"
        facts = []
    n_in = sum(1 for t in tensors if t.io == "input")
    facts.insert(int(npu), f"tensors {len(tensors):,} (inputs {n_in:,}, outputs {len(tensors) - n_in:,})")
    facts.append(human_bytes(sum(t.nbytes for t in readable)))
    out.print(title)
    out.print("  " + " · ".join(facts))
    if not npu and source.kind == "polygraphy":
        runs = polygraphy.runners(source.path)
        out.print("  [bold]runners[/]  " + " · ".join(
            f"{_show(name)} ({n} iteration{'s' if n != 1 else ''})" for name, n in runs)
            + ("  [dim](tensors below: the first's iteration 0)[/]" if len(runs) > 1 or runs[0][1] > 1 else ""))
    for line in ([] if npu else describe(source, **(options or {}))):
        out.print(f"  {_show(line)}")
    out.print(f"  [bold]dtypes[/]   {counts(Counter(printable(t.dtype_name) or '?' for t in tensors))}")
    if npu:
        out.print(f"  [bold]formats[/]  {counts(Counter(t.format for t in tensors))}")
        conv = Counter(t.conversion for t in tensors if t.conversion)
        if conv:
            out.print(f"  [bold]layouts[/]  {counts(conv)}")
        out.print(f"  [bold]op types[/] {counts(Counter(printable(f.op_type) for f in source.files))}")
    out.print(_tensor_table(tensors, npu, limit))
    known = set(source.problems)  # a file-level problem that is also its tensor's is listed once
    problems = list(source.problems) + [Problem(t.source, f"{t.name}: {t.problem}") for t in tensors
                                        if t.problem and Problem(t.source, t.problem) not in known]
    return _problems(problems, usable=bool(readable))


def _tensor_table(tensors: list[Tensor], npu: bool, limit: int) -> Table:
    """One row per tensor, grouped under its op: `op (type) | in 0 | dtype | shape | stored as`."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("op", overflow="fold", ratio=1)
    for col in ("tensor", "dtype", "shape") + (("stored as", "framework op") if npu else ()):
        table.add_column(col, overflow="fold", no_wrap=col in ("tensor", "dtype"))
    shown = tensors if limit <= 0 else tensors[:limit]
    previous = None
    for t in shown:
        op = "" if t.op == previous else Name(t.op, f"({t.op_type})" if t.op_type else "")
        previous = t.op
        row = [op, f"{'in' if t.io == 'input' else 'out'} {t.index}", t.dtype_name, shape_text(t.shape)]
        if npu:
            stored = "" if t.storage_shape == t.shape else f"{t.format} {shape_text(t.storage_shape)}"
            row += [stored, Name(f"{t.original_op[0]}:{t.original_op[1]}") if t.original_op else ""]
        table.add_row(*row, style="red" if t.problem else None)
    if len(shown) < len(tensors):
        table.caption = f"… {len(tensors) - len(shown):,} more (--limit 0 shows all)"
    return table


def _graph(g: Graph, limit: int) -> int:
    out.print(f"[bold]{g.kind.upper()} model[/] {_show(g.path)}" + (f"  ({_show(g.name)})" if g.name else ""))
    facts = [f"nodes {len(g.nodes):,}", f"inputs {len(g.inputs)}", f"outputs {len(g.outputs)}"]
    if g.weights:
        facts.append(f"weights {len(g.weights):,}")
    if g.kind == "om":
        facts.append(f"fused ops {sum(1 for n in g.nodes if n.fused and len(n.fused) > 1):,}")
        facts.append(f"device-only ops {sum(1 for n in g.nodes if n.fused == []):,}")
    out.print("  " + " · ".join(facts))
    for label, names in (("inputs", g.inputs), ("outputs", g.outputs)):
        shown = []
        for name in names[:8]:
            found = g.producer(name)
            shape = found[0].output_shapes[found[1]] if found and found[1] < len(found[0].output_shapes) else None
            shown.append(_show(name) + (f" {shape_text(shape)}" if shape else ""))
        out.print(f"  [bold]{label}[/] " + ", ".join(shown) + (" …" if len(names) > 8 else ""))
    out.print(f"  [bold]op types[/] {counts(Counter(printable(n.type) for n in g.nodes))}")
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("id", "type", "name", "output shapes") + (("fused framework ops",) if g.kind == "om" else ()):
        table.add_column(col, overflow="fold")
    nodes = g.nodes if limit <= 0 else g.nodes[:limit]
    for n in nodes:
        row = [str(n.seq_id), _show(n.type), _show(n.name), " ".join(shape_text(s) for s in n.output_shapes)]
        if g.kind == "om":
            row.append("*" if n.fused == [] else _show(",".join(n.fused or [])))
        table.add_row(*row)
    if len(nodes) < len(g.nodes):
        table.caption = f"… {len(g.nodes) - len(nodes):,} more (--limit 0 shows all)"
    out.print(table)
    return ExitCode.OK if g.nodes else ExitCode.UNUSABLE


def _show(text: str) -> str:
    """A name from data as console markup: control characters shown as `?`, markup escaped."""
    return escape(printable(text))


def _problems(problems: list[Problem], usable: bool) -> int:
    if problems:
        out.print(f"[bold red]{len(problems)} problem{'s' if len(problems) > 1 else ''}[/]")
        for p in problems:
            out.print(f"  [red]✗[/] {_show(str(p))}", soft_wrap=True)
    if not usable:
        out.print("[bold red]nothing usable[/]: no tensor could be read")
        return ExitCode.UNUSABLE
    return ExitCode.FINDINGS if problems else ExitCode.OK
