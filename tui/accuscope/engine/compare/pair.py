"""One NPU-side tensor and its golden counterpart (or None), with the rule that paired them: what
mapping.py and crossmap.py's rules make and the comparison reads."""
from __future__ import annotations

from dataclasses import dataclass

from accuscope.engine.sources.ascend import DumpFile
from accuscope.engine.sources.tensor import Tensor


@dataclass(frozen=True)
class Pair:
    npu: Tensor
    golden: Tensor | None
    op: DumpFile
    ground_truth: str  # golden op names joined by ",", or "*" for a device-only op
    how: str  # "fusion", "original_op", "tensor", "name", "mapping", a crossmap rule, or "" when unmatched
    reason: str = ""  # why golden is None (a structural pair: how sure, and why)
    confidence: float = 1.0  # below 1 only for structural pairs (crossmap.STRUCTURE)
