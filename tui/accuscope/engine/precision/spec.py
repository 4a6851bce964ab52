"""What a precision search is asked (`accuscope precision`, the app's advisor through fromtask): the
reference model, the precision to convert to, the search folder, the targets a candidate must meet,
the inputs, the calibration data or check command, and the limits on trials and time."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.precision.evaluate import Target


@dataclass
class PrecisionSpec:
    model: str  # the reference (fp32) ONNX model
    to: str  # "fp16" or "int8"
    out: str  # the search folder
    targets: list[Target]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    random_inputs: bool = False
    seed: int = 0
    dims: dict[str, int] | None = None
    calibration: str | None = None  # a folder of .npy/.npz samples: int8 static quantization
    check: str | None = None  # a command judging each candidate (exit 0: acceptable)
    max_trials: int | None = None
    seconds: float | None = None
