"""`accuscope inspect PATH`: what is in a dump file, dump folder, golden dump or model, and what is wrong."""
# lazy: engine.compare.inputs, engine.compare.shards, engine.sides.side
from __future__ import annotations

import os
import sys
from collections import Counter

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from ..engine.graphs.graph import Graph
from ..engine.sides.registry import describe, detect, open_source
from ..engine.sources import kinds
from ..engine.sources.golden import GoldenDump
from ..engine.sources.names import printable
from ..engine.sources.npudump import NpuDump
from ..engine.sources.tensor import Problem, SourceError, Tensor
from ..exitcode import ExitCode
from .common import Name, add_source_options, counts, human_bytes, out, shape_text, source_options


def register(p) -> None:
    p.description = ("Summarize a dump file or folder, golden dump (npy folder, npz, bin, "
                     "Polygraphy JSON) or model (ONNX, OM JSON, Caffe prototxt). "
                     "Exit 0: clean; 1: problems found; 2: nothing usable.")
    p.add_argument("path")
    p.add_argument("--limit", type=int, default=30, help="rows of the tensor/op table (0 = all; default 30)")
    add_source_options(p, one_path=True)
    p.add_argument("--shards", type=_shards_option, metavar="names|LAYOUT.yaml",
                   help="an msprobe dump of a tensor/pipeline-parallel run (several ranks in a step): say what "
                        "`compare --shards` would merge: the TP/PP layout found (or given), the tensors per module "
                        "kind and rule, the PP-stitched ones, what cannot be merged and why (exit 1 when something "
                        "cannot)")
    p.add_argument("--json", action="store_true", help="with --shards: the same as one JSON object on stdout")
    p.set_defaults(handler=run)


def _shards_option(text: str) -> str | None:
    import argparse

    from ..engine.compare.inputs import BY_NAME
    try:
        return BY_NAME["shards"].parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args) -> int:
    if args.shards or args.json:
        return _shards(args)
    source = open_source(args.path, **source_options(args))
    if isinstance(source, Graph):
        return _graph(source, args.limit)
    return _dump(source, args.limit, {k: v for k, v in source_options(args).items() if v is not None})


def _dump(source: NpuDump | GoldenDump, limit: int, options: dict | None = None) -> int:
    npu = isinstance(source, NpuDump)
    tensors = source.tensors
    readable = [t for t in tensors if not t.problem]
    if isinstance(source, NpuDump):
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
    for line in (describe(source, **(options or {})) if isinstance(source, GoldenDump) else []):
        out.print(f"  {_show(line)}")
    if isinstance(source, GoldenDump) and source.kind == kinds.NPY:
        _dump_record(source.path)
    out.print(f"  [bold]dtypes[/]   {counts(Counter(printable(t.dtype_name) or '?' for t in tensors))}")
    if isinstance(source, NpuDump):
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


def _shards(args) -> int:
    """--shards: what merging the run's ranks would do (shards.survey), as text or JSON."""
    import json

    from ..engine.compare import shards
    if not args.shards:
        raise SourceError("--json goes with --shards (inspect prints a dump's summary as text)")
    if args.rank:
        raise SourceError("--shards merges every rank of a step; --rank picks one: give one or the other")
    path = os.path.expanduser(args.path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    layout = shards.load_layout(args.shards)  # read once, and a bad layout file named before any dump is read
    if detect(path).kind != kinds.MSPROBE:
        raise SourceError(f"{path}: not an msprobe dump (--shards merges the ranks of an msprobe run)")
    found = shards.rank_folders(path, args.step)
    if len(found) < 2:
        raise SourceError(f"{next(iter(found.values()))}: the only rank of its step: nothing to merge")
    doc = shards.survey(shards.merge(path, shards=layout, step=args.step, stats_only=bool(args.stats_only)))
    findings = bool(doc["not_merged"] or doc["problems"])
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        return ExitCode.FINDINGS if findings else ExitCode.OK
    split = "Megatron's class names" if doc["split_by"] == shards.SHARDS_BY_NAMES else f"the layout {_show(doc['split_by'])}"
    out.print(f"[bold]parallel msprobe run[/] {_show(path)}")
    out.print(f"  {doc['ranks']} ranks as [bold]TP={doc['tp']} x PP={doc['pp']}[/], split by {split}")
    out.print(f"  [dim]{_show(doc['found'])}[/]")
    out.print(f"  tensors {doc['tensors']:,} after the merge")
    names = {"column": "column-parallel", "row": "row-parallel", "vocab": "vocab-parallel",
             "outside": "outside parallel modules"}
    for kind, rules in doc["merged"].items():
        out.print(f"  [bold]{names[kind]:<25}[/] " + " · ".join(f"{rule} {n:,}" for rule, n in rules.items()))
    totals = doc["rules"]
    if doc["tp"] > 1:
        out.print(f"  [bold]{'by rule':<25}[/] replicated (identical on every rank, taken once) {totals['replicated']:,}"
                  f" · concatenated {totals['concat']:,} · summed {totals['sum']:,} · rows by vocabulary owner "
                  f"{totals['vocab']:,}")
        if doc["concat_dim_guessed"]:
            out.print(f"  {doc['concat_dim_guessed']:,} concatenated along a dimension guessed by size (the "
                      "comparison settles it by the other side's shape where that has one; the row says so)")
    else:
        out.print("  TP=1: no shards to merge, the stages' tensors taken as they are")
    stitched = doc["stitched"]
    if doc["pp"] > 1:
        out.print(f"  [bold]{'PP-stitched':<25}[/] {stitched['tensors']:,} tensors of {stitched['stages']} stages "
                  f"in one order, {stitched['renamed']:,} on renamed calls (API counters, restarted layer numbers)")
    for lost, n in doc["statistics_not_derivable"].items():
        out.print(f"  statistics not derivable from the shards': {lost} of {n:,} tensors")
    if doc["not_merged"]:
        out.print(f"[bold red]not merged {sum(e['count'] for e in doc['not_merged']):,}[/]")
        for entry in doc["not_merged"]:
            out.print(f"  [red]✗[/] {entry['count']:,} ({names[entry['kind']]}): {_show(entry['reason'])}: "
                      + ", ".join(_show(t) for t in entry["tensors"]) + (" …" if entry["count"] > len(entry["tensors"])
                                                                         else ""), soft_wrap=True)
    if doc["problems"]:
        out.print(f"[bold red]{len(doc['problems'])} problem{'s' if len(doc['problems']) > 1 else ''}[/]")
        for problem in doc["problems"]:
            out.print(f"  [red]✗[/] {_show(problem)}", soft_wrap=True)
    return ExitCode.FINDINGS if findings else ExitCode.OK


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
        row: list[RenderableType] = [op, f"{'in' if t.io == 'input' else 'out'} {t.index}", t.dtype_name, shape_text(t.shape)]
        if npu:
            stored = "" if t.storage_shape == t.shape else f"{t.format} {shape_text(t.storage_shape)}"
            row += [stored, Name(f"{t.original_op[0]}:{t.original_op[1]}") if t.original_op else ""]
        table.add_row(*row, style="red" if t.problem else None)
    if len(shown) < len(tensors):
        table.caption = f"… {len(tensors) - len(shown):,} more (--limit 0 shows all)"
    return table


def _dump_record(path: str) -> None:
    """What an `accuscope dump` folder's dump.json says: what ran it, and the tensors read on their grid."""
    from ..engine.sides.side import dump_record
    record = dump_record(path)
    runtime = record.get("runtime")
    if isinstance(runtime, str):
        version = record.get(runtime)
        out.print(f"  [bold]ran on[/]   {_show(runtime)}" + (f" {_show(str(version))}" if isinstance(version, str) else ""))
    quantized = record.get("quantized")
    if isinstance(quantized, dict) and quantized:
        held = Counter(str(q.get("dtype")) for q in quantized.values() if isinstance(q, dict))
        per_axis = sum(1 for q in quantized.values() if isinstance(q, dict) and q.get("axis") is not None)
        out.print(f"  [bold]quantized[/] {len(quantized):,} tensors ({counts(held)}"
                  + (f", {per_axis} per-axis" if per_axis else "") + "), written as (q - zero_point) * scale on their"
                  " own grid (dump.json: each one's scale and zero point)")


def _graph(g: Graph, limit: int) -> int:
    out.print(f"[bold]{g.kind.upper()} model[/] {_show(g.path)}" + (f"  ({_show(g.name)})" if g.name else ""))
    facts = [f"nodes {len(g.nodes):,}", f"inputs {len(g.inputs)}", f"outputs {len(g.outputs)}"]
    if g.weights:
        facts.append(f"weights {len(g.weights):,}")
    if g.is_device:
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
    for note in g.notes:  # what the loader says of the model (a .tflite's quantized tensors, ...)
        out.print(f"  [bold]note[/]     {_show(note)}")
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("id", "type", "name", "output shapes") + (("fused framework ops",) if g.is_device else ()):
        table.add_column(col, overflow="fold")
    nodes = g.nodes if limit <= 0 else g.nodes[:limit]
    for n in nodes:
        row = [str(n.seq_id), _show(n.type), _show(n.name), " ".join(shape_text(s) for s in n.output_shapes)]
        if g.is_device:
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
