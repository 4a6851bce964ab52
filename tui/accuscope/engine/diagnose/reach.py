"""How far one op's own error reaches: the reference model run with only that error injected.

The re-run of an op on the NPU side's inputs separates the error it made from the error it
inherited (NPU output - re-run). Whether that error matters is a question about the network's
outputs: add it to the op's golden output, run the rest of the reference model from there, and
compare the network outputs with golden. Every other op computes exactly, so what the outputs lose
is this op's doing alone, the counterfactual a user would test by keeping it in higher precision.
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.diagnose.oprerun import FrameworkModel, RerunJob, _as_framework, _modules
from accuscope.engine.sources.tensor import SourceError

SUFFIX = "__accuscope_own"


def output_effect(fw: FrameworkModel, job: RerunJob, golden) -> float:
    """1 - cos of the worst network output when only `job`'s op error is injected (0: none reaches
    the outputs). SourceError when a network input or output has no golden tensor."""
    onnx, ort = _modules()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    feeds = {t: _as_framework(data.load(), ref) for t, data, ref, _ in job.inputs}
    sub = fw.build(fw.chain_nodes(job.chain), feeds, [(t, None, None) for t, *_ in job.outputs])
    session = ort.InferenceSession(sub.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rerun = session.run([t for t, *_ in job.outputs], feeds)
    injected = {}
    with np.errstate(all="ignore"):
        for (t, npu, g), r in zip(job.outputs, rerun):
            if g is None:
                raise SourceError(f"{t}: no golden tensor to add the op's error to")
            base = _as_framework(g.load(), g)
            own = _as_framework(npu.load(), g).astype(np.float64) - np.asarray(r, dtype=np.float64).reshape(base.shape)
            injected[t] = (base.astype(np.float64) + np.nan_to_num(own)).astype(base.dtype)
    model = onnx.ModelProto()
    model.CopyFrom(fw.model)
    graph = model.graph
    for node in graph.node:
        for i, o in enumerate(node.output):
            if o in injected:
                node.output[i] = o + SUFFIX
    h = onnx.helper
    for t, arr in injected.items():
        graph.input.append(h.make_tensor_value_info(t, h.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
    outputs = [o.name for o in graph.output]
    for o in graph.output:  # renamed producers leave declared types that may not hold any more
        o.ClearField("type")
    net = {}
    for name in fw.inputs:
        g = golden.find_tensor(name)
        if g is None:
            raise SourceError(f"network input {name} is not in the golden dump")
        net[name] = _as_framework(g.load(), g)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    got = session.run(outputs, {**net, **injected})
    worst = 0.0
    for name, y in zip(outputs, got):
        g = golden.find_tensor(name)
        if g is None:
            raise SourceError(f"network output {name} is not in the golden dump")
        a = np.nan_to_num(np.asarray(y, dtype=np.float64).ravel())
        b = np.asarray(g.load(), dtype=np.float64).ravel()
        denom = np.linalg.norm(a) * np.linalg.norm(b)
        cos = float(a @ b / denom) if denom else (1.0 if not a.any() and not b.any() else 0.0)
        worst = max(worst, 1.0 - cos)
    return worst
