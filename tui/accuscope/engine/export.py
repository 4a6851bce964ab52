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
from typing import Any, Callable

import numpy as np

from .. import __version__
from .graph import Graph, load_graph, read_text
from .mapping import Pair, map_tensors
from .metrics import PairMetrics, compare_arrays
from .names import read_mapping_csv
from .subgraph import BoundaryTensor, Selection, select, to_framework
from .tensor import INPUT, OUTPUT, SourceError, Tensor, TensorError, sanitize
from .thresholds import Thresholds
from .task import framework_model, read_json_object, read_task_doc, task_path

MANIFEST = "manifest.json"
RETEST_DIR = "retest"
FORMAT = 1
DTYPES = ("float32", "float16")
LONG_NAME = 200  # dump file names longer than this are written under a numeric name + mapping.csv
INSIDE, UPSTREAM, NO_ERROR, UNKNOWN = "inside", "upstream", "none", "unknown"

Progress = Callable[[str, int, int], None]  # (step, done, total)


# ------------------------------------------------------------------ results


@dataclass
class OutputCheck:
    """One boundary output in the re-test. Cosines are NaN where a side is missing."""

    tensor: str
    producer: str
    index: int
    npu_tensor: str = ""  # the NPU tensor standing for it (`op:output:j`), "" if none
    parent_cos: float = math.nan  # NPU vs golden: the error the parent task saw
    retest_cos: float = math.nan  # NPU vs the submodel run on the NPU side's inputs
    golden_cos: float = math.nan  # the submodel run on golden inputs vs golden (the export is faithful)
    parent_broken: list[str] = field(default_factory=list)  # thresholds broken by NPU vs golden
    retest_broken: list[str] = field(default_factory=list)  # thresholds broken by NPU vs re-run
    reason: str = ""  # why something could not be compared

    @property
    def comparable(self) -> bool:
        return not math.isnan(self.retest_cos) or bool(self.retest_broken)


@dataclass
class RetestResult:
    export_dir: Path
    task_dir: Path | None  # the re-test task folder (None when there was nothing to compare)
    verdict: str  # "inside", "upstream", "none" (no error at the outputs) or "unknown"
    message: str
    outputs: list[OutputCheck] = field(default_factory=list)
    substituted: list[str] = field(default_factory=list)  # inputs fed with golden data (no NPU tensor)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


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


def framework_model_path(task_folder: str | os.PathLike, explicit: str | os.PathLike | None = None) -> Path | None:
    """The framework model of a task: `explicit`, else engine.task.framework_model's ONNX model,
    else the task's Caffe model. None when there is none."""
    folder = Path(task_folder)
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise SourceError(f"{p}: no such framework model file")
        return p
    meta = read_task_doc(folder)
    found, _ = framework_model(folder, meta)
    if found is not None:
        return found
    model = task_path(folder, meta.get("model"))  # a Caffe model is its own framework model
    if model is not None and model.suffix.lower() == ".prototxt" and model.is_file():
        return model
    return None


def task_graphs(task_folder: str | os.PathLike, framework_model: str | os.PathLike | None = None
                ) -> tuple[Graph, Graph | None]:
    """(the graph a selection is made on, the framework graph): for an offline-model task the OM
    JSON and the framework model (None when unknown); otherwise the framework graph twice."""
    folder = Path(task_folder)
    meta = read_task_doc(folder)
    model = task_path(folder, meta.get("model"))
    fw_path = framework_model_path(folder, framework_model)
    fw = load_graph(fw_path) if fw_path is not None else None
    if model is not None:
        graph = fw if fw is not None and fw_path is not None and _same(model, fw_path) else load_graph(model)
        if graph.kind == "om":
            return graph, fw
        return (fw, fw) if fw is not None else (graph, graph)
    if fw is None:
        raise SourceError(f"{folder}: the task names no model; give the framework model (--framework-model)")
    return fw, fw


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def select_in_task(task_folder: str | os.PathLike, start, end,
                   framework_model: str | os.PathLike | None = None) -> Selection:
    """Select start..end in a task's model; for an offline-model task the framework region too.

    SourceError when an offline-model task has no framework model to map to."""
    graph, fw = task_graphs(task_folder, framework_model)
    if graph.kind == "om" and fw is None:
        raise SourceError(f"{task_folder}: the task's model is an offline-model JSON; exporting needs the framework "
                          "ONNX model it was converted from: give --framework-model (or \"framework_model\" in "
                          "task.json)")
    return select(graph, start, end, framework=fw if graph.kind == "om" else None)


def default_out_dir(task_folder: str | os.PathLike, selection: Selection) -> Path:
    """`TASK/exports/{start}--{end}`."""
    name = f"{sanitize(selection.start[0])[:60]}--{sanitize(selection.end[-1])[:60]}".strip("_") or "export"
    return Path(task_folder) / "exports" / name


# ------------------------------------------------------------------ the data of the task


class _Sources:
    """The parent task's dumps opened once, mapped the way the comparison maps them. Unusable
    sources become notes: an export without NPU data still has a model and golden data."""

    def __init__(self, folder: Path, meta: dict, mapping_graph: Graph | None, notes: list[str]):
        from .golden import open_golden
        from .npudump import open_npu_dump
        self.npu = self.golden = None
        pick = meta.get("pick") or "newest"
        try:
            self.golden = open_golden(str(task_path(folder, meta.get("golden")) or ""),
                                      pick=pick if pick in ("newest", "oldest") else "newest")
        except SourceError as exc:
            notes.append(f"golden dump unusable: {exc}")
        try:
            self.npu = open_npu_dump(str(task_path(folder, meta.get("npu")) or ""), pick=pick, run=meta.get("run"))
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
        for df in self.npu.files:  # no golden tensor: the dump header or the op name says
            for t in df.outputs:
                if t.original_op == (b.producer, b.index) and not t.problem:
                    return t
        df = self.npu.find_op(b.producer)
        if df is not None and b.index < len(df.outputs) and not df.outputs[b.index].problem:
            return df.outputs[b.index]
        return None


# ------------------------------------------------------------------ export


def export(task_folder: str | os.PathLike, selection: Selection, out_dir: str | os.PathLike | None = None,
           dtype: str = "float32", retest: bool = False, progress: Progress | None = None,
           framework_model: str | os.PathLike | None = None,
           cancel: threading.Event | None = None) -> ExportResult | None:
    """Write the export folder of `selection` (made on the task's model graph) and, if asked,
    re-test it. Returns None when cancelled (nothing written). SourceError on unusable input."""
    started = time.perf_counter()
    if dtype not in DTYPES:
        raise SourceError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    folder = Path(task_folder)
    meta = read_task_doc(folder)
    say = progress or (lambda _step, _done, _total: None)
    device = selection if selection.kind == "om" else None
    fw_sel = selection
    if device is not None:
        fw_sel = device.framework
        if fw_sel is None:
            fw_path = framework_model_path(folder, framework_model)
            if fw_path is None:
                raise SourceError(f"{folder}: the selection is made of device ops; exporting needs the framework "
                                  "ONNX model: give --framework-model (or \"framework_model\" in task.json)")
            fw_sel = to_framework(device, load_graph(fw_path))
    if fw_sel.kind not in ("onnx", "caffe"):
        raise SourceError(f"cannot export from a {fw_sel.kind} graph: an ONNX or Caffe framework model is needed")
    out = Path(out_dir) if out_dir is not None else default_out_dir(folder, selection)
    _check_target(out)
    notes: list[str] = list(fw_sel.notes)
    if device is not None and device is not fw_sel:
        notes += [n for n in device.notes if n not in notes]
    steps = 6
    say("opening the task's dumps", 0, steps)
    mapping_graph = device.graph if device is not None else _mapping_graph(folder, meta, fw_sel.graph, notes)
    sources = _Sources(folder, meta, mapping_graph, notes)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        if _cancelled(cancel):
            return _abandon(tmp)
        say("boundary data", 1, steps)
        file_dtype = np.dtype(dtype)
        inside_ops = {n.name for n in (device or fw_sel).ops}
        boundary = {"inputs": [_boundary_entry(tmp, "inputs", k, b, fw_sel, sources, file_dtype, inside_ops, notes)
                               for k, b in enumerate(fw_sel.inputs)],
                    "outputs": [_boundary_entry(tmp, "outputs", k, b, fw_sel, sources, file_dtype, inside_ops, notes)
                                for k, b in enumerate(fw_sel.outputs)]}
        if _cancelled(cancel):
            return _abandon(tmp)
        say("writing the submodel", 2, steps)
        data_shapes = {e["name"]: tuple(e[side]["shape"]) for e in boundary["inputs"] + boundary["outputs"]
                       for side in ("golden", "npu") if e.get(side)}
        if fw_sel.kind == "onnx":
            model_path = tmp / "model.onnx"
            checker = _write_onnx(fw_sel, model_path, data_shapes, boundary, notes)
        else:
            model_path = tmp / "model.prototxt"
            checker = _write_prototxt(fw_sel, model_path, data_shapes, notes)
        if _cancelled(cancel):
            return _abandon(tmp)
        say("copying the dumps of the ops inside", 3, steps)
        npu_files = _npu_files(device, fw_sel, sources)
        dumps = {"golden": _copy_golden(tmp / "golden", fw_sel, sources),
                 "npu": _copy_npu(tmp / "npu", npu_files) if sources.npu is not None else []}
        mapping_model = None
        om = device.graph if device is not None else mapping_graph
        if om is not None and om.kind == "om":
            (tmp / "model").mkdir()
            mapping_model = f"model/{Path(om.path).name}"
            chosen = [n.name for n in device.ops] if device is not None else \
                [n.name for n in (om.node(df.op_name) for df in npu_files) if n is not None]
            _write_om_excerpt(om, chosen, tmp / mapping_model)
        say("writing the manifest", 4, steps)
        manifest = _manifest(folder, meta, fw_sel, device, dtype, boundary, dumps, model_path.name,
                             mapping_model, checker, notes)
        _write_json(tmp / MANIFEST, manifest)
        if _cancelled(cancel):
            return _abandon(tmp)
        _put_in_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result = ExportResult(out, out / model_path.name, fw_sel, device, manifest, notes)
    if retest:
        if fw_sel.kind != "onnx":
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


def _cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()


def _abandon(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
    return None


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SourceError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise SourceError(f"{out}: exists, is not empty and holds no {MANIFEST}: not replacing a folder that is "
                          "not an accuscope export; choose another --out")
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


def _mapping_graph(folder: Path, meta: dict, fw: Graph, notes: list[str]) -> Graph | None:
    """The graph the parent task mapped with (its model), reusing the framework graph when it is that."""
    model = task_path(folder, meta.get("model"))
    if model is None:
        return fw
    if _same(model, Path(fw.path)):
        return fw
    try:
        return load_graph(model)
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
    if g_arr is not None:
        entry["golden"] = _save_pair(root / kind / "golden", _file_stem(k, b.tensor), g_arr, file_dtype,
                                     golden.source)
    elif sources.golden is not None:
        notes.append(f"no golden tensor for {kind[:-1]} {b.tensor}")
    npu = sources.npu_of(b, golden, inside_ops, kind == "inputs")
    n_arr = _load(npu, f"NPU {b.tensor}", notes)
    if n_arr is not None:
        want = g_arr.shape if g_arr is not None else (tuple(b.shape) if b.shape and None not in b.shape else None)
        if want is not None and n_arr.shape != want:
            if n_arr.size == math.prod(want):
                n_arr = n_arr.reshape(want)
            else:
                notes.append(f"NPU tensor {npu.name} for {b.tensor} has shape {list(n_arr.shape)}, the framework "
                             f"tensor {list(want)}: not used")
                n_arr = None
    if n_arr is not None:
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


# ------------------------------------------------------------------ the ONNX submodel


def _onnx():
    try:
        import onnx
    except ImportError as exc:
        raise SourceError(f"exporting an ONNX submodel needs onnx (pip install 'accuscope[onnx]'): {exc}") from None
    return onnx


def _write_onnx(sel: Selection, path: Path, data_shapes: dict[str, tuple], boundary: dict,
                notes: list[str]) -> str:
    """The framework model's nodes of the selection, its weights (initializers and Constant nodes),
    the boundary as graph inputs and outputs; shapes inferred; checked. Returns the checker verdict."""
    onnx = _onnx()
    from onnx import helper

    from .ortdump import node_names
    src = Path(sel.graph.path)
    try:
        model = onnx.load(str(src))
    except Exception as exc:  # noqa: BLE001 - protobuf and external-data errors alike
        raise SourceError(f"{src}: cannot load the framework model ({type(exc).__name__}: {exc})") from None
    g = model.graph
    types = _inferred_types(onnx, model, notes)
    names = node_names(g.node)
    by_name = {name: n for n, name in zip(g.node, names)}
    wanted = set(sel.weights)
    constants = []
    for n, name in zip(g.node, names):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and any(o in wanted for o in n.output):
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = c.name or name
            constants.append(c)
    nodes = []
    for op in sel.ops:
        src_node = by_name.get(op.name)
        if src_node is None:
            raise SourceError(f"{src}: node {op.name} not found in the model file")
        n = onnx.NodeProto()
        n.CopyFrom(src_node)
        n.name = op.name  # unnamed nodes get the name accuscope shows (and dumps use)
        nodes.append(n)
    inits = [i for i in g.initializer if i.name in wanted]
    sparse = [s for s in g.sparse_initializer if s.values.name in wanted]
    dtypes = {e["name"]: (e.get("golden") or e.get("npu") or {}).get("dtype") for e in boundary["inputs"]}
    inputs = [_value_info(onnx, b.tensor, types.get(b.tensor), b.dtype or dtypes.get(b.tensor),
                          data_shapes.get(b.tensor), fill_unknown=True) for b in sel.inputs]
    if model.ir_version < 4:  # initializers had to be graph inputs then
        inputs += [_value_info(onnx, i.name, types.get(i.name), None, tuple(i.dims), True) for i in inits]
    outputs = [_value_info(onnx, b.tensor, types.get(b.tensor), None, None, fill_unknown=False)
               for b in sel.outputs]
    graph = helper.make_graph(constants + nodes, f"{g.name or 'graph'}_sub", inputs, outputs, inits,
                              sparse_initializer=sparse)
    sub = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="accuscope",
                            producer_version=__version__)
    sub.ir_version = model.ir_version
    sub.functions.extend(model.functions)
    sub.doc_string = f"{', '.join(sel.start)} .. {', '.join(sel.end)} of {src.name}, exported by accuscope"
    try:
        sub = onnx.shape_inference.infer_shapes(sub)
    except Exception as exc:  # noqa: BLE001 - custom ops, odd models: shapes stay as declared
        notes.append(f"shape inference of the submodel failed ({type(exc).__name__}: {exc})")
    for out, b in zip(sub.graph.output, sel.outputs):
        if not out.type.tensor_type.elem_type:  # the checker needs a type: fall back to the data
            entry = next((e for e in boundary["outputs"] if e["name"] == b.tensor), {})
            side = entry.get("golden") or entry.get("npu")
            out.CopyFrom(_value_info(onnx, b.tensor, None, b.dtype or (side or {}).get("dtype") or "float32",
                                     tuple(side["shape"]) if side else None, fill_unknown=True))
            notes.append(f"type of output {b.tensor} unknown to shape inference; taken from the data")
    for infos, entries in ((sub.graph.input, boundary["inputs"]), (sub.graph.output, boundary["outputs"])):
        declared = {v.name: v.type.tensor_type for v in infos}
        for e in entries:  # the manifest says what the submodel declares
            tt = declared.get(e["name"])
            if tt is not None:
                e["dtype"] = getattr(_np_dtype(onnx, tt.elem_type), "name", e["dtype"])
                if tt.HasField("shape"):
                    e["shape"] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                  for d in tt.shape.dim]
    checker = "passed"
    try:
        onnx.checker.check_model(sub)
    except Exception as exc:  # noqa: BLE001 - ValidationError, and protobuf size errors
        checker = f"failed: {exc}"
        notes.append(f"onnx.checker: {exc}")
    if sub.ByteSize() > (1 << 31) - (64 << 20):
        onnx.save(sub, str(path), save_as_external_data=True, location=f"{path.name}.data")
    else:
        onnx.save(sub, str(path))
    return checker


def _inferred_types(onnx, model, notes: list[str]) -> dict:
    """tensor name -> TypeProto.Tensor of the full model (shape inference, else what the file declares)."""
    g = model.graph
    infos = []
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        infos += [*inferred.input, *inferred.value_info, *inferred.output]
    except Exception as exc:  # noqa: BLE001
        notes.append(f"shape inference of the framework model failed ({type(exc).__name__}: {exc})")
    infos += [*g.input, *g.value_info, *g.output]
    types: dict = {}
    for v in infos:
        if v.type.HasField("tensor_type") and v.name not in types:
            types[v.name] = v.type.tensor_type
    return types


def _value_info(onnx, name: str, tt, dtype: str | None, data_shape: tuple | None, fill_unknown: bool):
    """A typed graph input/output. Known dims and symbolic names are kept; an unknown dim (or the
    -1 some exporters write) takes the data's size when `fill_unknown`."""
    from onnx import helper
    elem = tt.elem_type if tt is not None and tt.elem_type else 0
    if not elem and dtype:
        try:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        except (TypeError, KeyError, ValueError):
            elem = 0
    elem = elem or onnx.TensorProto.FLOAT
    dims: list | None = None
    if tt is not None and tt.HasField("shape"):
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            elif fill_unknown and data_shape is not None and len(data_shape) == len(tt.shape.dim):
                dims.append(int(data_shape[k]))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(None)
    elif data_shape is not None and fill_unknown:
        dims = [int(d) for d in data_shape]
    return helper.make_tensor_value_info(name, elem, dims)


# ------------------------------------------------------------------ the Caffe submodel


def _write_prototxt(sel: Selection, path: Path, data_shapes: dict[str, tuple], notes: list[str]) -> str:
    """The chosen layers' text as written in the source prototxt, after an input layer that gives
    the boundary blobs (an `Input` layer; top-level `input:` fields for V1 `layers` nets)."""
    from .caffegraph import _train_only, parse_text_format
    src = Path(sel.graph.path)
    text = read_text(src)
    spans = []
    for key, lo, hi in _layer_spans(text):
        try:
            parsed = parse_text_format(text[lo:hi])
        except ValueError:
            continue
        layer = parsed.get(key)
        if layer is not None and not _train_only(layer):
            spans.append((key, lo, hi))
    by_index = {n.index: n for n in sel.ops}
    chosen = [text[lo:hi] for i, (_, lo, hi) in enumerate(spans) if i in by_index]
    if len(chosen) != len(sel.ops):
        raise SourceError(f"{src}: could not find the text of every chosen layer (found {len(chosen)} of "
                          f"{len(sel.ops)})")
    legacy = any(key == "layers" for key, _, _ in spans)
    blobs, shapes = [], []
    for b in sel.inputs:
        blob = b.tensor[:-len(b.producer) - 1] if b.producer and b.tensor.endswith("@" + b.producer) else b.tensor
        if blob in blobs:
            notes.append(f"two versions of blob {blob} enter the region (an in-place layer outside it); "
                         "the prototxt gives it once")
            continue
        shape = data_shapes.get(b.tensor) or (b.shape if b.shape and None not in b.shape else None)
        if shape is None:
            notes.append(f"shape of input blob {blob} unknown: fill in its dims in the prototxt")
        blobs.append(blob)
        shapes.append(shape)
    lines = [f'name: "{_escape(sel.graph.name)}_sub"',
             f"# {', '.join(sel.start)} .. {', '.join(sel.end)} of {src.name}, exported by accuscope {__version__}"]
    if blobs and legacy:
        for blob, shape in zip(blobs, shapes):
            lines.append(f'input: "{_escape(blob)}"')
            lines.append("input_shape { " + " ".join(f"dim: {d}" for d in shape or ()) + " }")
    elif blobs:
        lines.append("layer {")
        lines.append('  name: "accuscope_input"')
        lines.append('  type: "Input"')
        lines += [f'  top: "{_escape(blob)}"' for blob in blobs]
        lines.append("  input_param {")
        lines += ["    shape { " + " ".join(f"dim: {d}" for d in shape or ()) + " }" for shape in shapes]
        lines.append("  }")
        lines.append("}")
    path.write_text("\n".join(lines + chosen) + "\n", encoding="utf-8")
    try:
        parse_text_format(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        notes.append(f"the written prototxt does not parse: {exc}")
        return f"failed: {exc}"
    return "parsed"


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _layer_spans(text: str) -> list[tuple[str, int, int]]:
    """(key, start, end) of every top-level `layer {...}` / `layers {...}` block, in file order."""
    spans: list[tuple[str, int, int]] = []
    depth, i, n = 0, 0, len(text)
    pending: tuple[str, int] | None = None
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and pending is not None:
                spans.append((pending[0], pending[1], i + 1))
                pending = None
        elif depth == 0 and (c.isalpha() or c == "_"):
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_."):
                j += 1
            word = text[i:j]
            pending = (word, i) if word in ("layer", "layers") else None
            i = j
            continue
        i += 1
    return spans


# ------------------------------------------------------------------ dumps of the ops inside


def _copy_golden(folder: Path, sel: Selection, sources: _Sources) -> list[str]:
    """Golden dumps of every op inside and of the producers of the inputs, MindStudio-named."""
    g = sources.golden
    if g is None:
        return []
    folder.mkdir()
    written, long_names = [], []
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
    return [df for df in npu.files if id(df) in chosen or sanitize(df.op_name) in inside]


def _copy_npu(folder: Path, files: list) -> list[str]:
    """Dump files copied as they are (numeric names keep their mapping.csv line)."""
    folder.mkdir()
    written, renames, mappings = [], [], {}
    for df in files:
        base = os.path.basename(df.path)
        src_dir = os.path.dirname(df.path)
        if src_dir not in mappings:
            mappings[src_dir] = read_mapping_csv(src_dir)
        real = mappings[src_dir].get(base)
        shutil.copyfile(df.path, folder / base)
        if real:
            renames.append((base, real))
        written.append(f"npu/{base}")
    _write_mapping(folder, renames)
    return written


def _write_om_excerpt(om: Graph, chosen: list[str], dest: Path) -> None:
    """The offline-model JSON reduced to what maps the copied dumps: the device ops inside, the
    producers of their inputs (through layout-only ops, as the mapping traces them) and the weights
    they read. A model JSON can be hundreds of MB; the excerpt is a few KB."""
    from .mapping import LAYOUT_ONLY
    from .omgraph import CONST_TYPES
    nodes = [n for n in (om.node(name) for name in chosen) if n is not None]
    keep = {n.name for n in nodes}
    for node in nodes:
        for tensor in node.inputs:
            seen: set[str] = set()
            while (hit := om.producer(tensor)) is not None:
                producer = hit[0]
                keep.add(producer.name)
                if producer.type not in LAYOUT_ONLY or not producer.inputs or producer.name in seen:
                    break
                seen.add(producer.name)
                tensor = producer.inputs[0]
    doc = json.loads(read_text(Path(om.path)))
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


def _manifest(folder: Path, meta: dict, sel: Selection, device: Selection | None, dtype: str, boundary: dict,
              dumps: dict, model_name: str, mapping_model: str | None, checker: str, notes: list[str]) -> dict:
    import platform
    versions = {"accuscope": __version__, "python": platform.python_version(), "numpy": np.__version__}
    if sel.kind == "onnx":
        versions["onnx"] = _onnx().__version__
    chosen = device or sel
    return {
        "format": FORMAT,
        "tool": "accuscope",
        "tool_version": __version__,
        "versions": versions,
        "created": datetime.now().isoformat(timespec="seconds"),
        "parent_task": str(folder.absolute()),
        "parent": {"npu": meta.get("npu"), "golden": meta.get("golden"), "model": meta.get("model"),
                   "pick": meta.get("pick"), "run": meta.get("run")},
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
        "thresholds": meta.get("thresholds"),
        "notes": notes,
    }


def read_manifest(export_dir: str | os.PathLike) -> dict:
    path = Path(export_dir) / MANIFEST
    doc = read_json_object(path, f"{export_dir}: not an accuscope export (no {MANIFEST})")
    if doc.get("format") != FORMAT:
        raise SourceError(f"{path}: not a manifest of format {FORMAT}")
    return doc


def _write_json(path: Path, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False, default=str)
        fh.write("\n")


# ------------------------------------------------------------------ re-test


def run_retest(export_dir: str | os.PathLike, progress: Progress | None = None,
               cancel: threading.Event | None = None) -> RetestResult:
    """Run the exported submodel on the NPU side's inputs and compare with the NPU side's outputs.

    Writes `EXPORT/retest/` (a task folder whose task.json names the parent task under "parent")
    and returns the verdict: "inside" (the re-run disagrees with the NPU outputs: the error is made
    inside the region), "upstream" (it agrees while the NPU outputs disagree with golden: the error
    came in with the inputs), "none" (nothing disagrees) or "unknown" (nothing to compare)."""
    started = time.perf_counter()
    root = Path(export_dir)
    manifest = read_manifest(root)
    if manifest.get("kind") != "onnx":
        raise SourceError(f"{root}: a {manifest.get('kind')} submodel cannot be re-tested here (only ONNX "
                          "submodels run, with onnxruntime)")
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise SourceError(f"re-testing needs onnxruntime (pip install 'accuscope[onnx]'): {exc}") from None
    say = progress or (lambda _step, _done, _total: None)
    model_path = root / manifest["model"]
    thresholds = _thresholds(manifest)
    result = RetestResult(root, None, UNKNOWN, "")
    entries_in, entries_out = manifest["boundary"]["inputs"], manifest["boundary"]["outputs"]
    onnx = _onnx()
    sub = onnx.load(str(model_path), load_external_data=False)
    want_dtype = {v.name: _np_dtype(onnx, v.type.tensor_type.elem_type) for v in sub.graph.input}

    say("loading the inputs", 0, 4)
    npu_feeds, golden_feeds = {}, {}
    for e in entries_in:
        golden = _read_side(root, e, "golden")
        npu = _read_side(root, e, "npu")
        if npu is None and golden is not None:
            result.substituted.append(e["name"])
            npu = golden
        if npu is None:
            raise SourceError(f"{root}: no data for input {e['name']} on either side: cannot run the submodel")
        dt = want_dtype.get(e["name"])
        npu_feeds[e["name"]] = np.ascontiguousarray(npu, dtype=dt) if dt is not None else npu
        if golden is not None:
            golden_feeds[e["name"]] = np.ascontiguousarray(golden, dtype=dt) if dt is not None else golden
    if result.substituted:
        result.notes.append("no NPU tensor for input(s) " + ", ".join(result.substituted) + ": golden data used")

    say("running the submodel on the NPU inputs", 1, 4)
    rerun_dir = root / RETEST_DIR / "golden"
    if rerun_dir.exists():
        shutil.rmtree(rerun_dir)
    from .ortdump import dump_onnx
    ts = int(time.time() * 1e6)
    dump_onnx(model_path, rerun_dir, npu_feeds, timestamp=ts)
    _name_inputs_by_producer(rerun_dir, entries_in, ts)
    from .golden import open_golden
    rerun = open_golden(rerun_dir)

    golden_run: dict[str, np.ndarray] = {}
    if len(golden_feeds) == len(entries_in):
        say("running the submodel on the golden inputs", 2, 4)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as dumps are made
        options.log_severity_level = 3
        session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        golden_run = dict(zip(names, session.run(None, golden_feeds)))
    else:
        result.notes.append("golden inputs incomplete: the submodel was not checked against golden")

    if _cancelled(cancel):
        result.message = "cancelled"
        return result
    say("comparing", 3, 4)
    for e in entries_out:
        result.outputs.append(_check_output(root, e, rerun, golden_run, thresholds))
    result.task_dir = _retest_task(root, manifest, rerun_dir, thresholds, result.notes)
    _verdict(result)
    if result.task_dir is not None:
        from .task import mark_state
        state = read_task_doc(result.task_dir).get("state") or "done"
        mark_state(result.task_dir, state, retest={
            "verdict": result.verdict, "message": result.message, "substituted": result.substituted,
            "outputs": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in vars(o).items()}
                        for o in result.outputs]})
    say("done", 4, 4)
    result.seconds = time.perf_counter() - started
    return result


retest = run_retest  # `export(..., retest=True)` takes the name for its flag


def _thresholds(manifest: dict) -> Thresholds:
    try:
        return Thresholds.from_dict(manifest.get("thresholds"))
    except (ValueError, TypeError, AttributeError):
        return Thresholds()


def _np_dtype(onnx, elem: int):
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    except Exception:  # noqa: BLE001 - undefined or exotic element types
        return None


def _read_side(root: Path, entry: dict, side: str) -> np.ndarray | None:
    info = entry.get(side)
    if not info:
        return None
    try:
        return np.load(root / info["npy"], allow_pickle=False)
    except (OSError, ValueError, KeyError):
        return None


def _name_inputs_by_producer(rerun_dir: Path, entries: list[dict], ts: int) -> None:
    """dump_onnx names an input file after the tensor; the mapping looks an op's input up as its
    producer's output, so a copy under that name is added too."""
    for e in entries:
        if not e.get("producer"):
            continue
        src = rerun_dir / f"{sanitize(e['name'])}.0.{ts}.npy"
        dst = rerun_dir / f"{sanitize(e['producer'])}.{e['index']}.{ts}.npy"
        if src.is_file() and not dst.exists() and len(dst.name.encode()) <= LONG_NAME:
            shutil.copyfile(src, dst)


def _check_output(root: Path, e: dict, rerun, golden_run: dict, thresholds: Thresholds) -> OutputCheck:
    check = OutputCheck(e["name"], e.get("producer") or "", int(e.get("index") or 0),
                        (e.get("npu") or {}).get("tensor", ""))
    npu, golden = _read_side(root, e, "npu"), _read_side(root, e, "golden")
    found = rerun.find(check.producer, OUTPUT, check.index) if check.producer else None
    mine = None
    if found is not None:
        try:
            mine = np.asarray(found.load())
        except (TensorError, OSError, ValueError):
            mine = None
    reasons = []
    if npu is None:
        reasons.append("no NPU tensor")
    if npu is not None and golden is not None:
        m = compare_arrays(npu, golden)
        check.parent_cos, check.parent_broken = m.values.get("cos", math.nan), _broken(thresholds, m)
    if npu is not None and mine is not None:
        m = compare_arrays(npu, mine)
        check.retest_cos, check.retest_broken = m.values.get("cos", math.nan), _broken(thresholds, m)
        if m.reasons:
            reasons += m.reasons
    elif mine is None:
        reasons.append("the re-run gave no value for it")
    if golden is not None and e["name"] in golden_run:
        check.golden_cos = compare_arrays(golden_run[e["name"]], golden).values.get("cos", math.nan)
    check.reason = "; ".join(reasons)
    return check


def _broken(thresholds: Thresholds, m: PairMetrics) -> list[str]:
    keys = []
    for t in thresholds.items:
        value = m.values.get(t.key, math.nan) if t.key in m.values else \
            {"npu_nonfinite": m.npu_nonfinite, "golden_nonfinite": m.golden_nonfinite}.get(t.key, math.nan)
        if bool(t.broken(np.array([value], dtype=np.float64))[0]):
            keys.append(t.key)
    if m.npu_nonfinite > max(m.golden_nonfinite, 0) and "npu_nonfinite" not in keys:
        keys.append("npu_nonfinite")
    return keys


def _retest_task(root: Path, manifest: dict, rerun_dir: Path, thresholds: Thresholds,
                 notes: list[str]) -> Path | None:
    """Compare the copied NPU dumps of the ops inside with the re-run, as a task folder."""
    from . import compare as engine
    from .task import mark_state
    from .taskrun import run_task
    folder = root / RETEST_DIR
    if not (root / "npu").is_dir() or not any((root / "npu").iterdir()):
        notes.append("no NPU dump files of the ops inside: no re-test task written")
        return None
    model = root / (manifest.get("mapping_model") or manifest["model"])
    mark_state(folder, "running", parent=manifest.get("parent_task"), export=str(root.absolute()), kind="retest")
    spec = engine.CompareSpec(str(root / "npu"), str(rerun_dir), str(model), thresholds=thresholds,
                              pick=(manifest.get("parent") or {}).get("pick") or "newest")
    try:
        run_task(spec, folder, workers=1)
    except SourceError as exc:
        notes.append(f"re-test task failed: {exc}")
        return folder
    return folder


def _verdict(r: RetestResult) -> None:
    usable = [o for o in r.outputs if o.comparable]
    if not usable:
        r.verdict = UNKNOWN
        r.message = "nothing to compare: no output of the submodel has an NPU tensor and a re-run value"
        return
    inside = [o for o in usable if o.retest_broken]
    parent = [o for o in usable if o.parent_broken]
    cosines = "; ".join(f"{o.tensor}: NPU vs golden cos {_fmt(o.parent_cos)}, NPU vs re-run cos "
                        f"{_fmt(o.retest_cos)}" for o in usable)
    if inside:
        r.verdict = INSIDE
        r.message = ("the error lives inside the submodel: run on the NPU side's inputs, the framework ops "
                     f"disagree with the NPU outputs ({cosines})")
    elif parent:
        r.verdict = UPSTREAM
        r.message = ("the error came from upstream: run on the NPU side's inputs, the framework ops reproduce "
                     f"the NPU outputs, which disagree with golden only because their inputs do ({cosines})")
    else:
        r.verdict = NO_ERROR
        r.message = f"no error at the submodel's outputs: the NPU outputs agree with golden and the re-run ({cosines})"
    if r.substituted:
        r.message += f"; golden data stood in for NPU input(s) {', '.join(r.substituted)}"


def _fmt(x: float) -> str:
    return "NaN" if x is None or math.isnan(x) else f"{x:.6f}"
