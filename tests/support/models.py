"""ONNX models run and compared outside accuscope: the independent side of the advisor's checks."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort


def output(model, x: np.ndarray) -> np.ndarray:
    """The first output of `model` (a path or a ModelProto) on input `x`, flat, float64."""
    s = ort.InferenceSession(model if isinstance(model, str) else model.SerializeToString(),
                             providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0].ravel().astype(np.float64)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def relu_sigmoid(path) -> None:
    """The tiny ONNX model of the export tests, written to `path`: x (1, 4) -> Relu `relu` -> r ->
    Sigmoid `sigmoid` -> out."""
    import onnx
    h, T = onnx.helper, onnx.TensorProto
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"),
                          h.make_node("Sigmoid", ["r"], ["out"], name="sigmoid")], "tiny",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("out", T.FLOAT, [1, 4])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
