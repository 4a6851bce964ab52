"""Re-run framework ops on the NPU side's inputs: did a device op make its error, or inherit it?

For one device op (possibly fused: Conv+BatchNorm+Relu), the framework ops it stands for are cut
out of the framework ONNX model as a small runnable model: the op nodes, the initializers and
Constant nodes they read, every other tensor they read as a graph input, the tensors the NPU
outputs map to as graph outputs. Fed with the NPU's own input tensors (float16 cast to the
framework's dtype), onnxruntime computes what the framework would have computed from exactly
those inputs; comparing that with the NPU output isolates the op's own error from the error it
was handed. Ops are re-run in threads (onnxruntime and numpy release the GIL), one small session
each, single-threaded so the threads do not oversubscribe the cores.

onnx and onnxruntime are an optional extra: imported only when a framework model is opened.
"""
# lazy: engine.runs.controlflow, engine.runs.onnxmodel
from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accuscope.engine.compare.columns import ISOLATED
from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.runs.onnxmodel import onnx_modules
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.tensor import INPUT, OUTPUT, SourceError, Tensor, TensorError, sanitize

if TYPE_CHECKING:
    from accuscope.engine.runs.controlflow import Expansion

RERUNNING = "re-running framework ops"  # what onnx and onnxruntime are needed for, in their message


@dataclass
class RerunJob:
    """What to re-run for one device op, decided in the calling thread from the plan's pairs."""

    op: str  # NPU op name
    chain: list[str]  # framework node names, in the framework model's order
    inputs: list[tuple[str, Tensor, Tensor | None, str]]  # (framework tensor, data, golden ref, "npu"|"golden")
    outputs: list[tuple[str, Tensor, Tensor | None]]  # (framework tensor, NPU tensor, golden tensor)
    key: str = ""  # fingerprint of everything the result depends on (for the cache)


@dataclass
class Isolated:
    """The outcome of re-running one device op. `outputs[k]` holds the metrics of NPU output k
    against the re-run (`cos`, `red`, ..., `npu_nonfinite`, `rerun_nonfinite`) plus `tensor`
    (the NPU TensorIndex) and `golden_cos` (the re-run against golden: the part the inputs explain)."""

    op: str
    chain: list[str]
    outputs: list[dict] = field(default_factory=list)
    fed_golden: list[str] = field(default_factory=list)  # framework tensors fed from the golden dump
    problem: str = ""  # why the op could not be re-run ("" when it ran)
    key: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"op": self.op, "chain": self.chain, "outputs": self.outputs, "fed_golden": self.fed_golden,
                "problem": self.problem, "key": self.key, "seconds": round(self.seconds, 4)}

    @classmethod
    def from_dict(cls, d: dict) -> Isolated:
        return cls(str(d.get("op", "")), [str(c) for c in d.get("chain") or []],
                   [dict(o) for o in d.get("outputs") or [] if isinstance(o, dict)],
                   [str(f) for f in d.get("fed_golden") or []], str(d.get("problem") or ""),
                   str(d.get("key") or ""), float(d.get("seconds") or 0.0))


class FrameworkModel:
    """A framework ONNX model, indexed for cutting out single ops and short chains.

    Nodes are named as accuscope's graph loader and golden dumps name them (unnamed nodes become
    `{op_type}_{position}`), so the names in a result's GroundTruth column find their nodes. A name
    that is no node's is read as an ONNX value name, the node producing it (Polygraphy's RunResults
    and tensor-named npz files name ops by their output tensor).
    """

    def __init__(self, path: str | os.PathLike):
        onnx, _ = onnx_modules(RERUNNING)
        self.path = Path(user_path(path, "framework model file"))
        try:
            model = onnx.load(str(self.path))
        except Exception as exc:  # protobuf and external-data errors come in several kinds  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            raise SourceError(f"{self.path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
        if not model.HasField("graph") or not model.graph.node:
            raise SourceError(f"{self.path}: not an ONNX model (no nodes in the graph)")
        self.model = model
        st = self.path.stat()
        self.fingerprint = f"{self.path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        self.expansion: Expansion | None = None  # once expand() inlined its Ifs
        self._index()

    def has_if(self) -> bool:
        """Whether the main graph still holds an If (a model not expanded by `accuscope dump`)."""
        return any(n.op_type == "If" for n in self.model.graph.node)

    def expand(self, values) -> None:
        """Inline the branch each If takes (runs.controlflow), its conditions' values from
        `values(tensors)` (the golden dump's), so the ops inside are re-run as a dump of the
        expanded model names them."""
        from accuscope.engine.runs.controlflow import expand_ifs
        self.expansion = expansion = expand_ifs(self.model, values)
        if expansion.taken:
            self.fingerprint += ":" + ",".join(f"{k}={v}" for k, v in sorted(expansion.taken.items()))
            self._index()

    def _index(self) -> None:
        from accuscope.engine.runs.onnxmodel import node_names
        g = self.model.graph
        self.initializers = {t.name: t for t in g.initializer}
        self.inputs = [v.name for v in g.input if v.name not in self.initializers]
        self.nodes: dict[str, tuple[int, Any]] = {}  # an onnx NodeProto each
        self.constants: dict[str, object] = {}  # tensor -> the Constant node producing it
        self.producer: dict[str, tuple[str, int]] = {}
        for pos, (node, name) in enumerate(zip(g.node, node_names(g.node))):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for o in node.output:
                    self.constants[o] = node
                continue
            self.nodes[name] = (pos, node)
            for j, o in enumerate(node.output):
                if o:
                    self.producer.setdefault(o, (name, j))
        self._by_clean: dict[str, str] = {}
        for name in self.nodes:
            self._by_clean.setdefault(sanitize(name), name)
        self._inputs_clean = {sanitize(n): n for n in self.inputs}
        self._all_tensors = set(self.producer) | set(self.inputs)

    def node(self, name: str):
        real = self.name_of(name)
        return self.nodes[real] if real is not None else None

    def name_of(self, name: str) -> str | None:
        """The node name as the model holds it, for a raw or file-name (sanitized) spelling, or the
        node producing the ONNX value of that name."""
        if name in self.nodes:
            return name
        real = self._by_clean.get(sanitize(name))
        if real is None and name in self.producer:
            real = self.producer[name][0]
        return real

    def tensor_of(self, golden: Tensor | None) -> str | None:
        """The framework tensor a golden tensor holds: output j of node op, or a network input."""
        if golden is None:
            return None
        if golden.tensor_name and golden.tensor_name in self._all_tensors:
            return golden.tensor_name
        if golden.io != OUTPUT:
            return None
        hit = self.node(golden.op)
        if hit is not None:
            outs = list(hit[1].output)
            return outs[golden.index] if golden.index < len(outs) and outs[golden.index] else None
        if golden.index == 0:
            return self._inputs_clean.get(sanitize(golden.op))
        return None

    def fed_by(self, tensor: str) -> bool:
        """Whether a tensor is a weight: an initializer or a Constant node's output."""
        return tensor in self.initializers or tensor in self.constants

    # ---- building one small model -------------------------------------------------------------
    def order(self, names: list[str]) -> list[str]:
        """The named nodes' model names in model order; SourceError naming a missing one."""
        found = []
        for name in names:
            real = self.name_of(name)
            if real is None:
                raise SourceError(f"framework op {name} is not in {self.path.name}")
            found.append((self.nodes[real][0], real))
        return [real for _, real in sorted(set(found))]

    def chain_nodes(self, names: list[str]) -> list:
        """NodeProtos of the named nodes in model order; SourceError naming a missing one."""
        return [self.nodes[real][1] for real in self.order(names)]

    def boundary(self, nodes: list) -> list[str]:
        """Tensors the nodes read that neither they nor the weights produce, in first-use order."""
        inside = {o for n in nodes for o in n.output if o}
        out: list[str] = []
        for n in nodes:
            for t in n.input:
                if t and t not in inside and not self.fed_by(t) and t not in out:
                    out.append(t)
        return out

    def build(self, nodes: list, feeds: dict[str, np.ndarray],
              outputs: list[tuple[str, np.dtype | None, tuple | None]]):
        """A runnable ModelProto of `nodes`: weights copied in, `feeds` as typed graph inputs,
        `outputs` (name, dtype, shape) as graph outputs (untyped where dtype is None)."""
        onnx, _ = onnx_modules(RERUNNING)
        h = onnx.helper
        weights, constants = [], []
        seen: set[str] = set()
        for n in nodes:
            for t in n.input:
                if not t or t in seen:
                    continue
                seen.add(t)
                if t in self.initializers:
                    weights.append(self.initializers[t])
                elif t in self.constants and self.constants[t] not in constants:
                    constants.append(self.constants[t])
        for n in nodes:  # control-flow bodies may read outer weights too
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
                raise SourceError(f"{n.op_type} node {n.name}: control flow is not re-run")
        inputs = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))
                  for name, arr in feeds.items()]
        outs = []
        for name, dtype, shape in outputs:
            if dtype is None:
                outs.append(onnx.ValueInfoProto(name=name))
            else:
                outs.append(h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                     None if shape is None else list(shape)))
        graph = h.make_graph(list(constants) + list(nodes), "accuscope_rerun", inputs, outs, weights)
        model = h.make_model(graph, opset_imports=list(self.model.opset_import))
        model.ir_version = max(self.model.ir_version, 4)  # weights need not be graph inputs from IR 4 on
        model.functions.extend(self.model.functions)
        return model


def make_job(fw: FrameworkModel, op: str, chain: list[str], pairs, golden_dump,
             npu_values: dict[str, tuple[Tensor, Tensor]] | None = None) -> RerunJob:
    """The re-run job of one device op from its pairs (input and output), or SourceError saying
    why it cannot be re-run. Weights come from the framework model; an input the op's own pairs do
    not give is the NPU side's value of that framework tensor from `npu_values` (framework tensor
    -> (NPU tensor, golden tensor): what another NPU op wrote for it, e.g. before a converter's
    quantize chain), else (a shape computed on the host, say) it is fed from the golden dump."""
    names = fw.order(chain)
    nodes = [fw.nodes[n][1] for n in names]
    npu_for: dict[str, tuple[Tensor, Tensor | None]] = {}
    for p in pairs:
        if p.npu.io != INPUT or p.golden is None:
            continue
        t = fw.tensor_of(p.golden)
        if t is not None and t not in npu_for and not p.npu.problem:
            npu_for[t] = (p.npu, p.golden)
    for t, value in (npu_values or {}).items():  # what the op read itself comes first
        npu_for.setdefault(t, value)
    inputs = []
    for t in fw.boundary(nodes):
        if t in npu_for:
            inputs.append((t, npu_for[t][0], npu_for[t][1], "npu"))
            continue
        g = _golden_value(fw, t, golden_dump)
        if g is None:
            raise SourceError(f"input {t} of {names[0]} is neither in the NPU dump nor in the golden dump")
        inputs.append((t, g, g, "golden"))
    if not any(src == "npu" for *_, src in inputs):
        raise SourceError("none of its inputs is in the NPU dump (or mapped to a framework tensor)")
    inside = {o for n in nodes for o in n.output if o}
    outputs = []
    for p in pairs:
        if p.npu.io != OUTPUT or p.golden is None or p.npu.problem:
            continue
        t = fw.tensor_of(p.golden)
        if t is None or t not in inside:
            continue
        outputs.append((t, p.npu, p.golden))
    if not outputs:
        raise SourceError("none of its outputs maps to an output of its framework ops")
    return RerunJob(op, names, inputs, outputs, _key(fw, names, inputs, outputs))


def _golden_value(fw: FrameworkModel, tensor: str, golden_dump) -> Tensor | None:
    if golden_dump is None:
        return None
    found = golden_dump.find_tensor(tensor)
    if found is not None:
        return found
    prod = fw.producer.get(tensor)
    if prod is not None:
        return golden_dump.find(prod[0], OUTPUT, prod[1])
    if tensor in fw.inputs:
        return golden_dump.find(tensor, OUTPUT, 0)
    return None


def _stamp(t: Tensor) -> str:
    try:
        st = os.stat(t.source)
        return f"{t.source}:{t.name}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return f"{t.source}:{t.name}:?"


def _key(fw: FrameworkModel, names, inputs, outputs) -> str:
    parts = [fw.fingerprint, "|".join(names)]
    parts += [f"in {t} {src} {_stamp(data)}" for t, data, _, src in inputs]
    parts += [f"out {t} {_stamp(npu)}" for t, npu, _ in outputs]
    return hashlib.sha1("\n".join(parts).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------ running


def as_framework(arr: np.ndarray, ref: Tensor | None) -> np.ndarray:
    """An input array in the framework's dtype and shape (taken from its golden tensor)."""
    dtype = ref.dtype if ref is not None and ref.dtype is not None else None
    if dtype is None:
        dtype = np.dtype(np.float32) if arr.dtype.kind == "f" and arr.dtype.itemsize < 4 else arr.dtype
    out = np.asarray(arr).astype(dtype, copy=False)
    if ref is not None and tuple(out.shape) != tuple(ref.shape) and out.size == math.prod(ref.shape):
        out = out.reshape(ref.shape)
    return np.ascontiguousarray(out)


def run_job(fw: FrameworkModel, job: RerunJob) -> Isolated:
    """Re-run one job; any failure becomes `problem`, never an exception."""
    start = time.perf_counter()
    result = Isolated(job.op, job.chain, key=job.key,
                      fed_golden=[t for t, *_, src in job.inputs if src == "golden"])
    try:
        _, ort = onnx_modules(RERUNNING)
        feeds = {t: as_framework(data.load(), ref) for t, data, ref, _ in job.inputs}
        nodes = fw.chain_nodes(job.chain)
        wanted = [(t, g.dtype if g is not None else None, g.shape if g is not None else None)
                  for t, _, g in job.outputs]
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4
        try:
            session = ort.InferenceSession(fw.build(nodes, feeds, wanted).SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
        except Exception:  # declared output types/shapes disagree with what onnxruntime infers: drop them  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            session = ort.InferenceSession(
                fw.build(nodes, feeds, [(t, None, None) for t, *_ in wanted]).SerializeToString(), options,
                providers=["CPUExecutionProvider"])
        with np.errstate(all="ignore"):
            arrays = session.run([t for t, *_ in job.outputs], feeds)
            for (_, npu, golden), rerun in zip(job.outputs, arrays):
                result.outputs.append(_isolated_metrics(npu, golden, np.asarray(rerun)))
    except (SourceError, TensorError, OSError, ValueError, MemoryError) as exc:
        result.problem = getattr(exc, "reason", None) or str(exc)
    except Exception as exc:  # onnxruntime's own exceptions (invalid graph, kernel failures)  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result.problem = f"onnxruntime could not run it: {text[:300]}"
    result.seconds = time.perf_counter() - start
    return result


def _isolated_metrics(npu: Tensor, golden: Tensor | None, rerun: np.ndarray) -> dict:
    x = np.asarray(npu.load())
    out: dict = {"tensor": npu.name}
    if x.size != rerun.size:
        out["problem"] = f"the NPU output has shape {list(x.shape)}, the re-run {list(rerun.shape)}"
        return out
    out.update(metrics(x, rerun))
    out["rerun_nonfinite"] = out.pop("golden_nonfinite")
    if golden is not None and golden.size == rerun.size:
        try:
            out["golden_cos"] = metrics(rerun, np.asarray(golden.load()), kl=False).get("cos")
        except (TensorError, OSError, ValueError):
            pass
    return out


def metrics(x: np.ndarray, y: np.ndarray, kl: bool = True) -> dict:
    """engine.metrics' values of two in-memory arrays, undefined ones as None, plus NaN/inf
    counts and the reason, in the shape the advisor's evidence uses."""
    m = compare_arrays(np.asarray(x), np.asarray(y), kl=kl)
    out: dict = {k: (None if math.isnan(m.values.get(k, math.nan)) else m.values[k]) for k in ISOLATED}
    out["npu_nonfinite"], out["golden_nonfinite"] = m.npu_nonfinite, m.golden_nonfinite
    if m.reason:
        out["reason"] = m.reason
    return out


def run_jobs(fw: FrameworkModel, jobs: list[RerunJob], workers: int | None = None,
             cancel: threading.Event | None = None,
             done: Callable[[Isolated], None] | None = None) -> Iterator[Isolated]:
    """Run jobs in threads; results in completion order. Stops submitting when `cancel` is set."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    if workers == 1:
        for job in jobs:
            if cancel is not None and cancel.is_set():
                return
            r = run_job(fw, job)
            if done:
                done(r)
            yield r
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="accuscope-rerun") as pool:
        pending: set = set()
        queue = iter(jobs)
        while True:
            while len(pending) < 2 * workers and not (cancel is not None and cancel.is_set()):
                queued = next(queue, None)
                if queued is None:
                    break
                pending.add(pool.submit(run_job, fw, queued))
            if not pending:
                return
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                r = f.result()
                if done:
                    done(r)
                yield r
