"""Helpers of test_dialects.py that other tests use too."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.sources.layout import to_storage

ATB_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int8): 2, np.dtype(np.int32): 3,
             np.dtype(np.int64): 9, np.dtype(np.bool_): 12}


@pytest.fixture(scope="session")
def cls_run(cls_model):
    """[(node name, op type, output name, array)] of every non-Constant node of the PP-OCR
    classifier, in graph (execution) order, computed by onnxruntime."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(cls_model))
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    model.graph.ClearField("value_info")
    known = {o.name for o in model.graph.output}
    for n in nodes:
        for o in n.output:
            if o and o not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=o))
                known.add(o)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as `accuscope dump` runs it
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(7).standard_normal((1, 3, 48, 192)).astype(np.float32)
    names = [o.name for o in sess.get_outputs()]
    values = dict(zip(names, sess.run(names, {sess.get_inputs()[0].name: x})))
    out = []
    for i, n in enumerate(nodes):
        if n.output[0] in values:
            out.append((n.name or f"{n.op_type}_{i}", n.op_type, n.output[0], values[n.output[0]]))
    assert len(out) > 100
    return out


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    # numpy's stub: a ** of arrays might name its allow_pickle (a bool), which these names never are
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


def ms_name(op_type, op, task, ts, io, idx, fmt, dtype, stream=2):
    return f"{op_type}.{op}.{task}.{stream}.{ts}.{io}.{idx}.{fmt}.{dtype}.npy"


def write_ms_step(folder: Path, run, base_ts=1700000000000000) -> list[tuple[str, np.ndarray]]:
    """The run as kernel npy files: 4-D float outputs with 16k channels stored NC1HWC0, the rest
    DefaultFormat. Files are written in reverse so order must come from the names."""
    folder.mkdir(parents=True)
    expected: list[tuple[str, np.ndarray]] = []
    for k, (node, op_type, _, a) in reversed(list(enumerate(run))):
        op = "Default--network-" + node.replace("/", "--")
        fmt = "NC1HWC0" if a.ndim == 4 and a.shape[1] % 16 == 0 and a.dtype == np.float32 else "DefaultFormat"
        stored = to_storage(a, "NC1HWC0") if fmt == "NC1HWC0" else a
        np.save(folder / ms_name(op_type, op, k + 1, base_ts + k, "output", 0, fmt, a.dtype.name), stored)
        expected.insert(0, (op, a))
    return expected


def write_atb(path: Path, a: np.ndarray, *, code: int | None = None, fmt: int = 2, dims=None, end=True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    code = ATB_CODES[a.dtype] if code is None else code
    dims = ",".join(map(str, a.shape if dims is None else dims))
    head = f"$Version=1.0\nformat={fmt}\ndtype={code}\ndims={dims}\n" + ("$End=1\n" if end else "")
    path.write_bytes(head.encode() + np.ascontiguousarray(a).tobytes())
    return path
