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
