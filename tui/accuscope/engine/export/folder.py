"""Export a selected region of a task's model as a runnable submodel with its data, and re-test it.

An export folder holds:

    model.onnx                 the framework submodel (or model.prototxt for a Caffe model)
    model/<om>.json            the task's offline-model JSON (op mapping of the re-test), if any
    inputs/{golden,npu}/       boundary inputs from both sides, as .npy and .bin (raw little-endian)
    outputs/{golden,npu}/      boundary outputs from both sides, the same way
    golden/                    golden dumps of every op inside and of the inputs' producers
    npu/                       NPU dump files of every device op inside (copied)
    manifest.json              what all of it is: start, end, ops, boundary, files, parent, versions
    retest/                    after a re-test: a task folder (task.json "parent" = the parent task)

The re-test runs the framework submodel with onnxruntime on the NPU side's boundary inputs and
compares the result with the NPU side's outputs: if they agree, the ops inside compute what the
framework computes from the same inputs, so the error at the outputs came from upstream; if they
disagree, the error lives inside the submodel.

The folder is built under a temporary name next to the target and renamed into place when it is
complete; a previous export there is replaced only then, and a folder that is not an export is
never replaced. onnx and onnxruntime are imported inside the functions (an optional extra).
"""
# lazy: engine.graphs.omgraph, engine.sides.registry
from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from accuscope import __version__
from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.compare.pair import Pair
from accuscope.engine.export.layout import FORMAT, LONG_NAME, MANIFEST, UNKNOWN, cancelled
from accuscope.engine.export.retest import RetestResult, run_retest
from accuscope.engine.export.submodel import EXPORTING, write_onnx, write_prototxt
from accuscope.engine.graphs.graph import Graph, read_text
from accuscope.engine.graphs.optypes import walk_back
from accuscope.engine.graphs.subgraph import BoundaryTensor, Selection, select, to_framework
from accuscope.engine.progress import OnProgress, Reporter
from accuscope.engine.runs.onnxmodel import onnx_module
from accuscope.engine.sides.registry import load_graph
from accuscope.engine.sources.inputfile import json_loads, user_path
from accuscope.engine.sources.names import read_mapping_csv
from accuscope.engine.sources.outputfile import not_a_link, ours
from accuscope.engine.sources.tensor import INPUT, OUTPUT, SourceError, Tensor, TensorError, sanitize
from accuscope.engine.tasks.task import EXPORTS_DIR, TaskFolder
from accuscope.engine.tasks.taskdoc import TaskDoc

DTYPES = ("float32", "float16")


# ------------------------------------------------------------------ results
@dataclass
class ExportResult:
    out_dir: Path
    model: Path  # model.onnx or model.prototxt
    selection: Selection  # the framework region exported
    device_selection: Selection | None  # the offline-model region chosen, if any
    manifest: dict
    notes: list[str] = field(default_factory=list)
    retest: RetestResult | None = None
    seconds: float = 0.0


# ------------------------------------------------------------------ task facts


def _task(task: TaskFolder | str | os.PathLike) -> TaskFolder:
    return task if isinstance(task, TaskFolder) else TaskFolder.at(task)


def framework_model_path(task: TaskFolder | str | os.PathLike, explicit: str | os.PathLike | None = None) -> Path | None:
    """The framework model of a task: `explicit`, else TaskFolder.framework_model. None when there is none."""
    if explicit:
        return Path(user_path(os.path.expanduser(explicit), "framework model file"))
    return _task(task).framework_model[0]


def task_graphs(task: TaskFolder | str | os.PathLike, framework_model: str | os.PathLike | None = None
                ) -> tuple[Graph, Graph | None]:
    """(the graph a selection is made on, the framework graph): for an offline-model task the OM
    JSON and the framework model (None when unknown); otherwise the framework graph twice."""
    task = _task(task)
    model = task.path("model")
    fw_path = framework_model_path(task, framework_model)
    fw = load_graph(fw_path) if fw_path is not None else None
    if model is not None:
        graph = fw if fw is not None and fw_path is not None and _same(model, fw_path) else task.graph
        if graph is None:
            raise SourceError(f"{model}: the task's model cannot be read")
        if graph.is_device:
            return graph, fw
        return (fw, fw) if fw is not None else (graph, graph)
    if fw is None:
        raise SourceError(f"{task.folder}: the task names no model; give the framework model (--framework-model)")
    return fw, fw


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def select_in_task(task_folder: TaskFolder | str | os.PathLike, start, end,
                   framework_model: str | os.PathLike | None = None) -> Selection:
    """Select start..end in a task's model; for an offline-model task the framework region too.

    SourceError when an offline-model task has no framework model to map to."""
    task = _task(task_folder)
    graph, fw = task_graphs(task, framework_model)
    if graph.is_device and fw is None:
        raise SourceError(f"{task.folder}: the task's model is an offline-model JSON; exporting needs the framework "
                          "ONNX model it was converted from: give --framework-model (or \"framework_model\" in "
                          "task.json)")
    return select(graph, start, end, framework=fw if graph.is_device else None)


def default_out_dir(task_folder: str | os.PathLike, selection: Selection) -> Path:
    """`TASK/exports/{start}--{end}`."""
    name = f"{sanitize(selection.start[0])[:60]}--{sanitize(selection.end[-1])[:60]}".strip("_") or "export"
    return Path(task_folder) / EXPORTS_DIR / name


# ------------------------------------------------------------------ the data of the task


class _Sources:
    """The parent task's dumps opened once, read and mapped the way the comparison read and mapped
    them (the task's format options: atb's round, tpu-mlir's bf16 ...). Unusable
    sources become notes: an export without NPU data still has a model and golden data."""

    def __init__(self, task: TaskFolder, mapping_graph: Graph | None, notes: list[str]):
        from accuscope.engine.sides.registry import open_side
        spec = task.spec()
        self.npu = self.golden = None
        try:
            self.golden = open_side(spec.golden or "", shape=spec.golden_shape, dtype=spec.golden_dtype,
                                    pick=spec.pick, runner=spec.golden_runner, iteration=spec.iteration,
                                    options=spec.golden_options)
        except SourceError as exc:
            notes.append(f"golden dump unusable: {exc}")
        try:
            self.npu = open_side(spec.npu or "", pick=spec.pick, run=spec.run, runner=spec.npu_runner,
                                 iteration=spec.iteration, options=spec.npu_options)
        except SourceError as exc:
            notes.append(f"NPU dump unusable: {exc}")
        self.pairs: list[Pair] = []
        if self.npu is not None and self.golden is not None:
            self.pairs = map_tensors(self.npu, self.golden, mapping_graph).pairs
        self.by_golden: dict[int, list[Pair]] = {}
        for p in self.pairs:
            if p.golden is not None:
                self.by_golden.setdefault(id(p.golden), []).append(p)

    def golden_of(self, b: BoundaryTensor, graph: Graph) -> Tensor | None:
        g = self.golden
        if g is None:
            return None
        t = g.find(b.producer, OUTPUT, b.index) if b.producer else g.find(b.tensor, OUTPUT, 0)
        t = t or g.find_tensor(b.tensor)
        if t is None:
            for name in b.consumers:
                node = graph.node(name)
                if node is not None and b.tensor in node.inputs:
                    t = g.find(name, INPUT, node.inputs.index(b.tensor))
                    if t is not None:
                        break
        return t

    def npu_of(self, b: BoundaryTensor, golden: Tensor | None, inside_ops: set[str], entering: bool) -> Tensor | None:
        """The NPU tensor standing for a boundary tensor: for an input, preferably what an op inside
        read (after any layout op between); for an output, what the op inside wrote."""
        candidates = list(self.by_golden.get(id(golden), ())) if golden is not None else []
        usable = [p for p in candidates if not p.npu.problem]
        if entering:
            order = lambda p: (not (p.npu.io == INPUT and p.op.op_name in inside_ops), p.npu.io != OUTPUT)  # noqa: E731
        else:
            order = lambda p: (p.npu.io != OUTPUT, p.op.op_name not in inside_ops)  # noqa: E731
        for p in sorted(usable, key=order):
            return p.npu
        if self.npu is None or not b.producer:
            return None
        for df in self.npu.ops:  # no golden tensor: the dump header or the op name says
            for t in df.outputs:
                if t.original_op == (b.producer, b.index) and not t.problem:
                    return t
        op = self.npu.find_op(b.producer)
        if op is not None and b.index < len(op.outputs) and not op.outputs[b.index].problem:
            return op.outputs[b.index]
        return None


# ------------------------------------------------------------------ export


def export(task_folder: TaskFolder | str | os.PathLike, selection: Selection, out_dir: str | os.PathLike | None = None,
           dtype: str = "float32", retest: bool = False, progress: OnProgress | None = None,
           framework_model: str | os.PathLike | None = None,
           cancel: threading.Event | None = None) -> ExportResult | None:
    """Write the export folder of `selection` (made on the task's model graph) and, if asked,
    re-test it. Returns None when cancelled (nothing written). SourceError on unusable input."""
    started = time.perf_counter()
    if dtype not in DTYPES:
        raise SourceError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    task = _task(task_folder)
    folder, doc = task.folder, task.doc
    say = Reporter(progress)
    device = selection if selection.graph.is_device else None
    fw_sel = selection
    if device is not None and device.framework is not None:
        fw_sel = device.framework
    elif device is not None:
        fw_path = framework_model_path(task, framework_model)
        if fw_path is None:
            raise SourceError(f"{folder}: the selection is made of device ops; exporting needs the framework "
                              "ONNX model: give --framework-model (or \"framework_model\" in task.json)")
        fw_sel = to_framework(device, load_graph(fw_path))
    if not fw_sel.graph.cuttable:
        raise SourceError(f"cannot export from a {fw_sel.kind} graph: an ONNX or Caffe framework model is needed")
    out = Path(out_dir) if out_dir is not None else default_out_dir(folder, selection)
    _refuse_links(folder, out)
    _check_target(out)
    notes: list[str] = list(fw_sel.notes)
    if device is not None and device is not fw_sel:
        notes += [n for n in device.notes if n not in notes]
    steps = 6
    say("opening the task's dumps", 0, steps)
    mapping_graph = device.graph if device is not None else _mapping_graph(task, fw_sel.graph, notes)
    sources = _Sources(task, mapping_graph, notes)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    if tmp.is_symlink():  # planted: removed, never followed
        tmp.unlink()
    elif tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()  # a new folder (mkdir never follows a link): everything below is written into it
    try:
        if cancelled(cancel):
            _abandon(tmp)
            return None
        say("boundary data", 1, steps)
        file_dtype = np.dtype(dtype)
        inside_ops = {n.name for n in (device or fw_sel).ops}
        boundary = {"inputs": [_boundary_entry(tmp, "inputs", k, b, fw_sel, sources, file_dtype, inside_ops, notes)
                               for k, b in enumerate(fw_sel.inputs)],
                    "outputs": [_boundary_entry(tmp, "outputs", k, b, fw_sel, sources, file_dtype, inside_ops, notes)
                                for k, b in enumerate(fw_sel.outputs)]}
        if cancelled(cancel):
            _abandon(tmp)
            return None
        say("writing the submodel", 2, steps)
        data_shapes = {e["name"]: tuple(e[side]["shape"]) for e in boundary["inputs"] + boundary["outputs"]
                       for side in ("golden", "npu") if e.get(side)}
        if fw_sel.graph.runnable:
            model_path = tmp / "model.onnx"
            checker = write_onnx(fw_sel, model_path, data_shapes, boundary, notes)
        else:
            model_path = tmp / "model.prototxt"
            checker = write_prototxt(fw_sel, model_path, data_shapes, notes)
        if cancelled(cancel):
            _abandon(tmp)
            return None
        say("copying the dumps of the ops inside", 3, steps)
        npu_files = _npu_files(device, fw_sel, sources)
        dumps = {"golden": _copy_golden(tmp / "golden", fw_sel, sources),
                 "npu": _copy_npu(tmp / "npu", npu_files) if sources.npu is not None else []}
        mapping_model = None
        om = device.graph if device is not None else mapping_graph
        if om is not None and om.is_device:
            (tmp / "model").mkdir()
            mapping_model = f"model/{Path(om.path).name}"
            chosen = [n.name for n in device.ops] if device is not None else \
                [n.name for n in (om.node(df.op_name) for df in npu_files) if n is not None]
            _write_om_excerpt(om, chosen, tmp / mapping_model)
        say("writing the manifest", 4, steps)
        manifest = _manifest(folder, doc, fw_sel, device, dtype, boundary, dumps, model_path.name,
                             mapping_model, checker, notes)
        _write_json(tmp / MANIFEST, manifest)
        if cancelled(cancel):
            _abandon(tmp)
            return None
        _put_in_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result = ExportResult(out, out / model_path.name, fw_sel, device, manifest, notes)
    if retest:
        if not fw_sel.graph.runnable:
            notes.append("re-test skipped: a Caffe submodel cannot be run here (only ONNX submodels run with "
                         "onnxruntime)")
        else:
            say("re-testing", 5, steps)
            try:
                result.retest = run_retest(out, cancel=cancel)
            except SourceError as exc:  # the export stands; say why the re-test could not run
                result.retest = RetestResult(out, None, UNKNOWN, f"the re-test could not run: {exc}")
    say("done", steps, steps)
    result.seconds = time.perf_counter() - started
    return result


def _abandon(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)


def _refuse_links(folder: Path, out: Path) -> None:
    """SourceError when the export would be written through a symlink inside the task folder: TASK/exports
    or a folder under it (task folders are passed between people; a link there could point anywhere)."""
    exports = Path(os.path.abspath(folder / EXPORTS_DIR))
    try:
        inside = Path(os.path.abspath(out)).relative_to(exports).parts
    except ValueError:  # an --out elsewhere: where the user said
        return
    not_a_link(exports, "task's exports folder")
    here = exports
    for part in inside:
        here = here / part
        not_a_link(here, "export folder")


def _check_target(out: Path) -> None:
    ours(out, MANIFEST, "an accuscope export")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{out.parent}: cannot create the folder ({exc.strerror or exc})") from None


def _put_in_place(tmp: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _mapping_graph(task: TaskFolder, fw: Graph, notes: list[str]) -> Graph | None:
    """The graph the parent task mapped with (its model), reusing the framework graph when it is that."""
    model = task.path("model")
    if model is None:
        return fw
    if _same(model, Path(fw.path)):
        return fw
    try:
        return task.graph
    except SourceError as exc:
        notes.append(f"the task's model is unusable for mapping ({exc}); mapping by names only")
        return None


# ------------------------------------------------------------------ boundary data


def _file_stem(k: int, tensor: str) -> str:
    return f"{k:02d}_{sanitize(tensor)[:80]}"


def _boundary_entry(root: Path, kind: str, k: int, b: BoundaryTensor, sel: Selection, sources: _Sources,
                    file_dtype: np.dtype, inside_ops: set[str], notes: list[str]) -> dict:
    entry: dict[str, Any] = {"name": b.tensor, "producer": b.producer, "index": b.index, "consumers": b.consumers,
                             "dtype": b.dtype, "shape": _json_shape(b.shape), "end": b.from_end,
                             "network_output": b.is_network_output, "golden": None, "npu": None}
    golden = sources.golden_of(b, sel.graph)
    g_arr = _load(golden, f"golden {b.tensor}", notes)
    if g_arr is not None and golden is not None:
        entry["golden"] = _save_pair(root / kind / "golden", _file_stem(k, b.tensor), g_arr, file_dtype,
                                     golden.source)
    elif sources.golden is not None:
        notes.append(f"no golden tensor for {kind[:-1]} {b.tensor}")
    npu = sources.npu_of(b, golden, inside_ops, kind == "inputs")
    n_arr = _load(npu, f"NPU {b.tensor}", notes)
    if n_arr is not None and npu is not None:
        want = g_arr.shape if g_arr is not None else (tuple(b.shape) if b.shape and None not in b.shape else None)
        if want is not None and n_arr.shape != want:
            if n_arr.size == math.prod(want):
                n_arr = n_arr.reshape(want)
            else:
                notes.append(f"NPU tensor {npu.name} for {b.tensor} has shape {list(n_arr.shape)}, the framework "
                             f"tensor {list(want)}: not used")
                n_arr = None
    if n_arr is not None and npu is not None:
        entry["npu"] = _save_pair(root / kind / "npu", _file_stem(k, b.tensor), n_arr, file_dtype, npu.source)
        entry["npu"].update(tensor=npu.name, conversion=npu.conversion, stored_dtype=npu.dtype_name,
                            format=npu.format)
    elif sources.npu is not None:
        notes.append(f"no NPU tensor for {kind[:-1]} {b.tensor}")
    return entry


def _load(t: Tensor | None, what: str, notes: list[str]) -> np.ndarray | None:
    if t is None:
        return None
    try:
        return np.array(t.load())
    except (TensorError, OSError, ValueError) as exc:
        notes.append(f"{what}: {exc}")
        return None


def _save_pair(folder: Path, stem: str, arr: np.ndarray, file_dtype: np.dtype, source: str) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    data = arr.astype(file_dtype) if arr.dtype.kind == "f" else arr
    with np.errstate(over="ignore"):
        data = np.ascontiguousarray(data)
    np.save(folder / f"{stem}.npy", data, allow_pickle=False)
    data.astype(data.dtype.newbyteorder("<")).tofile(folder / f"{stem}.bin")
    rel = f"{folder.parent.name}/{folder.name}/{stem}"
    return {"npy": f"{rel}.npy", "bin": f"{rel}.bin", "dtype": data.dtype.name, "shape": list(data.shape),
            "source": source}


def _json_shape(shape) -> list | None:
    return None if shape is None else [None if d is None else int(d) for d in shape]


# ------------------------------------------------------------------ dumps of the ops inside


def _copy_golden(folder: Path, sel: Selection, sources: _Sources) -> list[str]:
    """Golden dumps of every op inside and of the producers of the inputs, MindStudio-named."""
    g = sources.golden
    if g is None:
        return []
    folder.mkdir()
    written: list[str] = []
    long_names: list[tuple[str, str]] = []
    wanted = [(n.name, j) for n in sel.ops for j in range(len(n.outputs))]
    wanted += [(b.producer or b.tensor, b.index) for b in sel.inputs]
    for op, j in dict.fromkeys(wanted):
        t = g.find(op, OUTPUT, j)
        if t is None:
            continue
        name = f"{sanitize(op)}.{j}.{t.timestamp or 0}.npy"
        disk = name
        if len(name.encode()) > LONG_NAME:
            disk = f"{len(long_names) + 1}.npy"
            long_names.append((disk, name))
        try:
            if t.source.endswith(".npy") and os.path.isfile(t.source):
                shutil.copyfile(t.source, folder / disk)
            else:
                np.save(folder / disk, np.asarray(t.load()), allow_pickle=False)
        except (TensorError, OSError, ValueError):
            continue
        written.append(f"golden/{disk}")
    _write_mapping(folder, long_names)
    return written


def _npu_files(device: Selection | None, sel: Selection, sources: _Sources) -> list:
    """The NPU dump files of the ops inside: of the chosen device ops, else of the device ops whose
    outputs stand for framework ops inside."""
    npu = sources.npu
    if npu is None:
        return []
    if device is not None:
        return [df for df in (npu.find_op(n.name) for n in device.ops) if df is not None]
    inside = {sanitize(n) for n in sel.names}
    chosen = {id(p.op) for p in sources.pairs
              if p.npu.io == OUTPUT and p.golden is not None and sanitize(p.golden.op) in inside}
    return [df for df in npu.ops if id(df) in chosen or sanitize(df.op_name) in inside]


def _copy_npu(folder: Path, files: list) -> list[str]:
    """Dump files copied as they are (numeric names keep their mapping.csv line)."""
    folder.mkdir()
    written, renames, mappings = [], [], {}
    # an Ascend dump file holds the whole op; a framework dump has a file per output tensor
    paths = dict.fromkeys(p for df in files for p in ([df.path] if df.name is not None else
                                                      [t.source for t in df.outputs]))
    for path in paths:
        base = os.path.basename(path)
        src_dir = os.path.dirname(path)
        if src_dir not in mappings:
            mappings[src_dir] = read_mapping_csv(src_dir)
        real = mappings[src_dir].get(base)
        if os.path.isfile(path):
            shutil.copyfile(path, folder / base)
        if real:
            renames.append((base, real))
        written.append(f"npu/{base}")
    _write_mapping(folder, renames)
    return written


def _write_om_excerpt(om: Graph, chosen: list[str], dest: Path) -> None:
    """The offline-model JSON reduced to what maps the copied dumps: the device ops inside, the
    producers of their inputs (through layout-only ops, as the mapping traces them) and the weights
    they read. A model JSON can be hundreds of MB; the excerpt is a few KB."""
    from accuscope.engine.graphs.omgraph import CONST_TYPES
    nodes = [n for n in (om.node(name) for name in chosen) if n is not None]
    keep = {n.name for n in nodes}
    for node in nodes:
        for tensor in node.inputs:
            keep.update(hit[0].name for _, hit in walk_back(om, tensor) if hit is not None)
    try:
        doc = json_loads(read_text(Path(om.path)))
    except ValueError as exc:  # read once already (load_graph): changed since, or nested past this thread's stack
        raise SourceError(f"{om.path}: not usable JSON ({exc})") from None
    referenced = {str(ref).rpartition(":")[0] for g in doc["graph"] if isinstance(g, dict)
                  for op in g.get("op") or () if isinstance(op, dict) and op.get("name") in keep
                  for ref in op.get("input") or ()}
    for g in doc["graph"]:
        if isinstance(g, dict):
            g["op"] = [op for op in g.get("op") or () if isinstance(op, dict) and (
                op.get("name") in keep or (op.get("type") in CONST_TYPES and op.get("name") in referenced))]
    _write_json(dest, doc)


def _write_mapping(folder: Path, rows: list[tuple[str, str]]) -> None:
    if rows:
        with open(folder / "mapping.csv", "w", encoding="utf-8", newline="") as fh:
            fh.writelines(f"{a},{b}\n" for a, b in rows)


# ------------------------------------------------------------------ manifest


def _manifest(folder: Path, doc: TaskDoc, sel: Selection, device: Selection | None, dtype: str, boundary: dict,
              dumps: dict, model_name: str, mapping_model: str | None, checker: str, notes: list[str]) -> dict:
    import platform
    versions = {"accuscope": __version__, "python": platform.python_version(), "numpy": np.__version__}
    if sel.graph.runnable:
        versions["onnx"] = onnx_module(EXPORTING).__version__
    chosen = device or sel
    recorded = doc.spec()
    return {
        "format": FORMAT,
        "tool": "accuscope",
        "tool_version": __version__,
        "versions": versions,
        "created": datetime.now().isoformat(timespec="seconds"),
        "parent_task": str(folder.absolute()),
        "parent": {"npu": recorded.npu, "golden": recorded.golden, "model": recorded.model, "pick": recorded.pick,
                   "run": recorded.run},
        "framework_model": str(Path(sel.graph.path).absolute()),
        "kind": sel.kind,
        "model": model_name,
        "mapping_model": mapping_model,
        "checker": checker,
        "dtype": dtype,
        "start": chosen.start,
        "end": chosen.end,
        "framework_start": sel.start,
        "framework_end": sel.end,
        "ops": [{"name": n.name, "type": n.type} for n in sel.ops],
        "device_ops": [{"name": n.name, "type": n.type, "fused": n.fused} for n in device.ops] if device else None,
        "weights": sel.weights,
        "boundary": boundary,
        "dumps": dumps,
        "thresholds": doc.thresholds,
        "notes": notes,
    }


def _write_json(path: Path, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False, default=str)
        fh.write("\n")
