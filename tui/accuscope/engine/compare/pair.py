"""One NPU-side tensor and its golden counterpart (or None), with the rule that paired them: what
mapping.py and crossmap.py's rules make and the comparison reads."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the result table reads golden_ops without loading a reader
    from accuscope.engine.sources.oprecord import OpRecord
    from accuscope.engine.sources.tensor import Tensor

DEVICE_ONLY = "*"  # the ground truth of a device-only op (inserted by the conversion): no golden op


def golden_ops(ground_truth: object) -> list[str]:
    """The golden ops of a ground truth (a Pair's, or a result row's golden_op cell): the framework ops
    the device op was fused from, in order; none for a device-only op or an empty cell."""
    return [g for g in str(ground_truth).split(",") if g and g != DEVICE_ONLY]


@dataclass(frozen=True, init=False)
class Pair:
    npu: Tensor
    golden: Tensor | None
    op: OpRecord
    ground_truth: str  # golden op names joined by "," (golden_ops reads them), or DEVICE_ONLY
    how: str  # "fusion", "original_op", "tensor", "name", "mapping", a crossmap rule, or "" when unmatched
    reason: str = ""  # why golden is None (a structural pair: how sure, and why)
    confidence: float = 1.0  # below 1 only for structural pairs (crossmap.STRUCTURE)

    def __init__(self, npu: Tensor, golden: Tensor | None, op: OpRecord, ground_truth: str, how: str,
                 reason: str = "", confidence: float = 1.0):
        """The frozen dataclass's __init__ without its object.__setattr__ call a field: one update of the
        instance's dict (as sources.tensor builds a Tensor), half the time; one a row of a plan."""
        self.__dict__.update(npu=npu, golden=golden, op=op, ground_truth=ground_truth, how=how, reason=reason,
                             confidence=confidence)


AGREE = 0.99  # a pair agrees at this cosine (msit's and tpu-mlir's default)
IDENTITY_RULES = ("tensor", "name", "original_op", "fusion")  # the mapping's rules a value check may overrule


def suspect(pair: Pair, cells: dict, broken: Callable[[dict], list[str]] | None = None) -> bool:
    """A pair by identity whose computed cells disagree: below AGREE in cosine, or in euclidean
    similarity (a folded bias or scale leaves the cosine high and moves the values), or breaking the
    thresholds the verdict judges by (`broken`: judgement.cells_broken under them; a bias-add folded into
    a Conv gives cos 0.9917 and euclid_sim 0.867 against the tensor before the Add: tpu-mlir's 0.99,0.90
    fails it). compare/repair.py re-checks these; the comparison imports it only where there is one."""
    if pair.golden is None or pair.how not in IDENTITY_RULES:
        return False
    cos, euclid = cells.get("cos"), cells.get("euclid_sim")
    if not (isinstance(cos, float) and cos == cos):
        return False
    return cos < AGREE or (isinstance(euclid, float) and euclid < AGREE) or (broken is not None and bool(broken(cells)))
