"""The registry of what accuscope reads: every dump format and model format, detected by content.

Every command and screen that takes a path asks here (`detect`, `open_side`, `open_source`), so a
format is added in one place: one `Format` entry with a `sniff` that looks at the path's content
and an `open` that returns the format's reader object. Dump formats may stand on either side of a
comparison (`open_side`); model formats are graphs (`load_graph`).

A format found after the npy folder in FORMATS (tpu-mlir's npz, the model graphs) has its module
imported only when its sniff or reader runs: `compare` on two npy folders loads none of them (they
cost ~10 ms of start-up; benchmarks/bench_startup.py). Its kind is spelled here, and
tests/engine/test_sides.py holds it to the module's KIND.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

from accuscope.engine.graphs.graph import Graph
from accuscope.engine.sides.side import Side, own_model
from accuscope.engine.sources import atb, mindspore, msprobe, polygraphy
from accuscope.engine.sources.golden import RAW_SUFFIXES, GoldenDump, open_golden
from accuscope.engine.sources.inputfile import not_regular, require_regular
from accuscope.engine.sources.names import parse_dump_name
from accuscope.engine.sources.npudump import NpuDump, find_runs, open_npu_dump
from accuscope.engine.sources.tensor import SourceError

Source = NpuDump | GoldenDump | Graph


@dataclass(frozen=True)
class Format:
    kind: str
    what: str  # how a user would name it, for messages
    sniff: Callable[[str], bool]
    open: Callable[..., Any]
    model: bool = False  # a model graph rather than dumped tensors


def _is_dump_file(path: str) -> bool:
    return os.path.isfile(path) and parse_dump_name(os.path.basename(path)) is not None


def _has_runs(path: str) -> bool:
    return os.path.isdir(path) and bool(find_runs(path))


def _has_npy(path: str) -> bool:
    if not os.path.isdir(path):
        return False
    with os.scandir(path) as it:
        return any(e.name.lower().endswith(".npy") and not not_regular(e.path) for e in it)


def _suffix(*suffixes: str) -> Callable[[str], bool]:
    return lambda path: os.path.isfile(path) and path.lower().endswith(suffixes)


def _tpumlir() -> ModuleType:
    from accuscope.engine.sources import tpumlir
    return tpumlir


def _gegraph() -> ModuleType:
    from accuscope.engine.graphs import gegraph
    return gegraph


def _mlirgraph() -> ModuleType:
    from accuscope.engine.graphs import mlirgraph
    return mlirgraph


def load_graph(path: str | os.PathLike, **options) -> Graph:
    """graphs.modelfile.load_graph, imported on the first model (it imports every graph loader)."""
    from accuscope.engine.graphs.modelfile import load_graph as load
    return load(path, **options)


def _golden(kind: str) -> Callable[..., GoldenDump]:
    def open_(path: str, **o) -> GoldenDump:
        pick = o.get("pick", "newest")
        return open_golden(path, shape=o.get("shape"), dtype=o.get("dtype"),
                           pick=pick if pick in ("newest", "oldest") else "newest",
                           runner=o.get("runner"), iteration=o.get("iteration") or 0)
    return open_


def _dialect(load: Callable[[], ModuleType]) -> Callable[..., GoldenDump]:
    """A platform dialect's reader (module.read -> tensors in execution order, problems) as a source,
    its module from `load()` when a path is opened. `runner` names the part of a file holding both
    sides (tpu-mlir's actual/desired)."""
    def open_(path: str, **o) -> GoldenDump:
        module = load()
        options = {k: v for k, v in o.items() if v is not None and k not in ("pick", "runner", "iteration")}
        if o.get("runner"):
            options["side"] = o["runner"]
        entries, problems = module.read(path, **options)
        if not entries:
            raise SourceError(f"{path}: no tensors in this {module.KIND} source"
                              + (f" ({problems[0].message})" if problems else ""))
        return GoldenDump(path, module.KIND, entries, problems)
    return open_


def _ascend(path: str, **o) -> NpuDump:
    return open_npu_dump(path, pick=o.get("pick", "newest"), run=o.get("run"))


def _is_om_json(path: str) -> bool:
    return _suffix(".json")(path) and not polygraphy.is_run_results(path)


# Order matters only where two formats could claim one path: the first whose sniff accepts wins.
FORMATS: list[Format] = [
    Format("ascend", "Ascend dump (file or any level of the {time}/{device}/{model}/{id}/{index} tree)",
           lambda p: _is_dump_file(p) or _has_runs(p), _ascend),
    Format(msprobe.KIND, "msprobe dump (step{N}/rank{M}/dump.json, dump_tensor_data/*.pt|npy; --step/--rank)",
           msprobe.sniff, _dialect(lambda: msprobe)),
    Format(mindspore.KIND, "MindSpore kernel dump (rank_{i}/{time}/step_{k}/...{io}.{idx}.{format}.{dtype}.npy)",
           mindspore.sniff, _dialect(lambda: mindspore)),
    Format(atb.KIND, "ATB dump ({device}_{pid}/{round}/{id}_{Layer}/.../{in|out}tensorK.bin)", atb.sniff, _dialect(lambda: atb)),
    Format("npy", "npy folder (MindStudio/msit naming, `accuscope dump`, msaccucmp convert)", _has_npy,
           _golden("npy")),
    Format("tpu-mlir-npz", "tpu-mlir .npz (model_transform, model_deploy, model_runner, npz_tool: "
           "{tensor}_{OpType} keys, cast suffixes _f32/_f16/_si8..., {name}_actual/_desired)",
           lambda p: _tpumlir().sniff(p), _dialect(_tpumlir)),
    Format("npz", ".npz archive (tensor name per member)", _suffix(".npz"), _golden("npz")),
    Format("polygraphy", "Polygraphy RunResults .json or per-iteration folder (`polygraphy run --save-outputs`)",
           polygraphy.is_run_results, _golden("polygraphy")),
    Format("bin", "raw .bin/.bmrt/.dat with --shape and --dtype", _suffix(*RAW_SUFFIXES), _golden("bin")),
    Format("onnx", "ONNX model", _suffix(".onnx"), load_graph, model=True),
    Format("om", "Ascend offline model as JSON (atc --mode=1)", _is_om_json, load_graph, model=True),
    Format("ge-graph", "GE graph dump (ge_proto_*.txt, DUMP_GE_GRAPH)", lambda p: _gegraph().sniff(p), load_graph,
           model=True),
    Format("mlir", "tpu-mlir .mlir (origin, top or tpu dialect: model_transform, model_deploy)",
           lambda p: _mlirgraph().sniff(p), load_graph, model=True),
    Format("caffe", "Caffe .prototxt/.pbtxt", _suffix(".prototxt", ".pbtxt"), load_graph, model=True),
]
DUMP_FORMATS = [f for f in FORMATS if not f.model]


_DIALECTS: dict[str, Callable[[], ModuleType]] = {
    atb.KIND: lambda: atb, mindspore.KIND: lambda: mindspore, msprobe.KIND: lambda: msprobe, "tpu-mlir-npz": _tpumlir}


def describe(source: GoldenDump, **options) -> list[str]:
    """Lines a platform dialect adds to `inspect` (the run, rank or round chosen, bf16 kept raw ...)."""
    load = _DIALECTS.get(getattr(source, "kind", ""))
    return load().describe(source.path, source.tensors, **options) if load is not None else []


def accepted(models: bool = True) -> str:
    return "; ".join(f.what for f in FORMATS if models or not f.model)


def detect(path: str) -> Format:
    """The format of `path`, from its content; SourceError saying what it looks like otherwise."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    if not os.path.isdir(path):
        require_regular(path)  # a FIFO named like a dump would block the first sniff forever
    for fmt in FORMATS:
        try:
            if fmt.sniff(path):
                return fmt
        except OSError as exc:
            raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    raise SourceError(f"{path}: not a dump, golden data or model file accuscope knows ({_looks_like(path)}); "
                      f"it reads: {accepted()}")


def _looks_like(path: str) -> str:
    if os.path.isdir(path):
        try:
            names = os.listdir(path)
        except OSError as exc:
            return f"folder that cannot be listed ({exc.strerror})"
        if not names:
            return "an empty folder"
        subdirs = [n for n in names if os.path.isdir(os.path.join(path, n))]
        if "task.json" in names:
            return "a task folder (open it with `accuscope open`), not a dump"
        return (f"a folder of {len(names)} entries ({len(subdirs)} folders) with no .npy file and no Ascend "
                f"dump file directly inside")
    name = os.path.basename(path).lower()
    if name.endswith(".npy"):
        return "a single .npy file; give the folder that holds it"
    if name.endswith(".om"):
        return f"a binary offline model; convert it first: atc --mode=1 --om={path} --json=model.json"
    if name.endswith(".json"):
        return "a JSON file that is neither a Polygraphy RunResults nor an offline-model JSON"
    return "a file of unknown kind"


def open_source(path: str | os.PathLike, **options) -> Source:
    """Open `path` as what it is: a dump format's reader, or a model graph.
    options: shape/dtype for raw .bin, pick/run for Ascend dumps, runner/iteration for Polygraphy."""
    path = os.fspath(path)
    return detect(path).open(path, **options)


def open_side(path: str | os.PathLike, **options) -> Side:
    """Open `path` as one side of a comparison, whatever format it is in."""
    path = os.fspath(path)
    fmt = detect(path)
    if fmt.model:
        raise SourceError(f"{path}: is a model ({fmt.what}), not dumped tensors: give it as --model, or "
                          f"dump it first (`accuscope dump {path} --out DIR`, or `accuscope run REF CAND`)")
    model = own_model(path)
    loader = (lambda: load_graph(model)) if model else None
    return Side(fmt.open(path, **options), fmt.kind, graph_loader=loader, modules_loader=modules_loader(path, fmt.kind, **options))


def modules_loader(path: str, kind: str, step=None, rank=None, **_options) -> Callable[[], Graph] | None:
    """How to load a training dump's module hierarchy (Side.modules): msprobe's construct.json,
    of the --step/--rank chosen, else of the dump's first step/rank folder (ranks run the same
    modules); None for other formats."""
    if kind != msprobe.KIND:
        return None
    from accuscope.engine.graphs.msprobegraph import load_msprobe
    return partial(load_msprobe, path, step, rank)
