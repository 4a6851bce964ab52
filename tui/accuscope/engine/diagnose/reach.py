"""How far one op's own error reaches: the reference model run with only that error injected.

The re-run of an op on the NPU side's inputs separates the error it made from the error it
inherited (NPU output - re-run). Whether that error matters is a question about the network's
outputs: add it to the op's golden output, run the rest of the reference model from there, and
compare the network outputs with golden. Every other op computes exactly, so what the outputs lose
is this op's doing alone, the counterfactual a user would test by keeping it in higher precision.
`output_effects` measures many ops, reading the golden network data once.
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.diagnose.oprerun import RERUNNING, FrameworkModel, RerunJob, as_framework
from accuscope.engine.runs.onnxmodel import onnx_modules
from accuscope.engine.sources.tensor import SourceError

SUFFIX = "__accuscope_own"


def output_effect(fw: FrameworkModel, job: RerunJob, golden) -> float:
    """1 - cos of the worst network output when only `job`'s op error is injected (0: none reaches
    the outputs). SourceError when a network input or output has no golden tensor."""
    found = output_effects(fw, [job], golden)[job.op]
    if isinstance(found, str):
        raise SourceError(found)
    return found


def _options(ort):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return options


def _injected(fw: FrameworkModel, job: RerunJob, ort) -> dict[str, np.ndarray]:
    """The op's golden outputs plus its own error (NPU output - re-run on the NPU inputs)."""
    feeds = {t: as_framework(data.load(), ref) for t, data, ref, _ in job.inputs}
    sub = fw.build(fw.chain_nodes(job.chain), feeds, [(t, None, None) for t, *_ in job.outputs])
    session = ort.InferenceSession(sub.SerializeToString(), _options(ort), providers=["CPUExecutionProvider"])
    rerun = session.run([t for t, *_ in job.outputs], feeds)
    injected = {}
    with np.errstate(all="ignore"):
        for (t, npu, g), r in zip(job.outputs, rerun):
            if g is None:
                raise SourceError(f"{t}: no golden tensor to add the op's error to")
            base = as_framework(g.load(), g)
            own = as_framework(npu.load(), g).astype(np.float64) - np.asarray(r, dtype=np.float64).reshape(base.shape)
            injected[t] = (base.astype(np.float64) + np.nan_to_num(own)).astype(base.dtype)
    return injected


def output_effects(fw: FrameworkModel, jobs: list[RerunJob], golden,
                   cancelled=lambda: False) -> dict[str, float | str]:
    """output_effect of each job's op: op -> 1 - cos, or why it could not be measured (a str). The
    golden network inputs and outputs are read once. One session per op: a cut fed its golden value
    would stop the error of an op upstream of it, so each op's run has its own cut only."""
    onnx, ort = onnx_modules(RERUNNING)
    h = onnx.helper
    net = {}
    for name in fw.inputs:
        g = golden.find_tensor(name)
        if g is None:
            raise SourceError(f"network input {name} is not in the golden dump")
        net[name] = as_framework(g.load(), g)
    outputs = [o.name for o in fw.model.graph.output]
    expected = []
    for name in outputs:
        g = golden.find_tensor(name)
        if g is None:
            raise SourceError(f"network output {name} is not in the golden dump")
        expected.append(np.asarray(g.load(), dtype=np.float64).ravel())
    found: dict[str, float | str] = {}
    for job in jobs:
        if cancelled():
            break
        try:
            injected = _injected(fw, job, ort)
            model = onnx.ModelProto()
            model.CopyFrom(fw.model)
            graph = model.graph
            for node in graph.node:
                for i, o in enumerate(node.output):
                    if o in injected:
                        node.output[i] = o + SUFFIX
            for t, arr in injected.items():
                graph.input.append(h.make_tensor_value_info(t, h.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
            for o in graph.output:  # renamed producers leave declared types that may not hold any more
                o.ClearField("type")
            session = ort.InferenceSession(model.SerializeToString(), _options(ort), providers=["CPUExecutionProvider"])
            got = session.run(outputs, {**net, **injected})
        except Exception as exc:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            found[job.op] = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            continue
        worst = 0.0
        for y, b in zip(got, expected):
            a = np.nan_to_num(np.asarray(y, dtype=np.float64).ravel())
            denom = np.linalg.norm(a) * np.linalg.norm(b)
            cos = float(a @ b / denom) if denom else (1.0 if not a.any() and not b.any() else 0.0)
            worst = max(worst, 1.0 - cos)
        found[job.op] = worst
    return found
