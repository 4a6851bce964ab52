"""Pairs that check themselves: a pair by identity whose values disagree, re-paired to the golden
tensor of the same fused chain that agrees, with the evidence.

Converters fold ops into the one before them and keep its name: tpu-mlir folds a BatchNormalization
into its Conv (the Conv's loc, `conv2d_53.tmp_0_Conv`, now holds the BN's output), ATC and TensorRT
fold bias Adds, Scales and activations into Conv/Gemm/MatMul. Pairing by identity then pairs the
fused op's output with the framework op's own output (before the BN): two different tensors, a
failing row that is no error.

Identity stays the rule. Only a pair whose cosine is below AGREE (computed as every pair's is) is
checked (`pair.suspect`), so a comparison where everything agrees costs nothing more: it does not
even import this module. Its candidates are the golden tensors the chain can end in:
- the NPU side's model, when given, says what the op absorbed (`Node.fused`: tpu-mlir MLIR with its
  origin file, the Ascend offline-model JSON's fusion attributes, a GE graph's);
- the golden side's model (ONNX, ...) gives the chain: from the paired tensor's producer forward
  through ops that fold into it (FOLDABLE: BatchNormalization, Scale, bias Add, activations) or only
  move values (LAYOUT), each the single consumer of the one before, at most CHAIN steps;
- without a model, the values alone: golden tensors after the paired one in execution order, at
  most WINDOW of them, of the same shape, that no other NPU tensor pairs with.
The candidate with the highest cosine wins when it reaches AGREE and beats the identity pair; the
row is re-paired to it (`how` says "fused: BatchNormalization folded into Conv") and every re-pairing
is listed with both cosines (`Repair`, the coverage's `repaired`). Never a silent guess.
"""
# lazy: engine.sources.tpumlir
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.compare.pair import AGREE, suspect
from accuscope.engine.compare.pairjob import Job, run_job
from accuscope.engine.graphs.optypes import op_kind
from accuscope.engine.sources.tensor import OUTPUT, Tensor, TensorError

if TYPE_CHECKING:  # graphs.graph comes with a model
    from accuscope.engine.graphs.graph import Graph
    from accuscope.engine.sides.side import Side

WINDOW = 4  # golden tensors after the paired one that the values alone may choose from
CHAIN = 4  # ops a graph's chain may hold after the paired one
MAX_BYTES = 256 << 20  # candidates above this size are not loaded (a pair this large is compared streamed)
FOLDABLE = frozenset({
    "BatchNormalization", "BatchNorm", "FusedBatchNorm", "FusedBatchNormV3", "InstanceNormalization", "Scale",
    "Add", "Sub", "Mul", "Div", "BiasAdd", "Relu", "Relu6", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid",
    "HardSwish", "Swish", "Silu", "Mish", "Tanh", "Elu", "Selu", "Gelu", "Softplus", "ReLU", "ReLU6",
})
LAYOUT = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Permute", "View",
                    "TransData", "ExpandDims"})


@dataclass(frozen=True)
class Repair:
    """One re-pairing and its evidence."""

    row: int
    npu: str  # the NPU tensor (`op:output:k`)
    was: str  # the golden tensor identity paired it with
    was_cos: float
    now: str  # the golden tensor it is paired with now
    now_cos: float
    rule: str  # "fused: BatchNormalization folded into Conv"
    source: str  # where the candidate came from: "NPU model", "golden model", "execution order"

    def text(self) -> str:
        return (f"{self.npu}: {self.now} (cos {self.now_cos:.7f}) instead of {self.was} by identity "
                f"(cos {self.was_cos:.7f}); {self.rule} [{self.source}]")

    def to_meta(self) -> dict:
        return {"row": self.row, "npu": self.npu, "was": self.was, "was_cos": _finite(self.was_cos),
                "now": self.now, "now_cos": _finite(self.now_cos), "rule": self.rule, "source": self.source}

    @classmethod
    def from_meta(cls, doc: dict) -> Repair:
        return cls(int(doc.get("row", -1)), str(doc.get("npu", "")), str(doc.get("was", "")),
                   _number(doc.get("was_cos")), str(doc.get("now", "")), _number(doc.get("now_cos")),
                   str(doc.get("rule", "")), str(doc.get("source", "")))


def _finite(v: float) -> float | None:
    return float(v) if v == v else None


def _number(v) -> float:
    return float(v) if isinstance(v, (int, float)) else float("nan")


def similarity(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(cosine, tpu-mlir's euclidean similarity) as the metrics define them, from the pair's sums in
    float64 (metrics.compare_arrays: the kernel's fused pass, no KL); NaN when a side is all zero or
    holds NaN/inf (anything the metrics have a reason for)."""
    nan = float("nan")
    x, y = x.reshape(-1), y.reshape(-1)
    if x.size != y.size or not x.size:
        return nan, nan
    m = compare_arrays(x, y, kl=False)
    cos, euclid = m.values.get("cos", nan), m.values.get("euclid_sim", nan)
    if m.reasons or cos != cos:
        return nan, nan
    return min(cos, 1.0), euclid


@dataclass
class _Candidate:
    tensor: Tensor
    chain: list[str]  # op types from the paired tensor's op (exclusive) to this one (inclusive)
    source: str


class Rechecker:
    """The candidates of a plan's pairs: built once per plan, asked only for disagreeing rows."""

    def __init__(self, npu: Side, golden: Side, npu_graph: Graph | None, golden_graph: Graph | None):
        self.npu, self.golden = npu, golden
        self.npu_graph, self.golden_graph = npu_graph, golden_graph
        self.order = {id(t): k for k, t in enumerate(golden.tensors)}
        self.tensors = golden.tensors

    def candidates(self, pair, used: set[int]) -> list[_Candidate]:
        found: list[_Candidate] = []
        found += self._from_npu_model(pair)
        found += self._from_golden_model(pair)
        if not found:
            found += self._from_order(pair)
        seen, out = {id(pair.golden)}, []
        for c in found:  # a golden tensor another NPU tensor pairs with was computed there: no fold
            if id(c.tensor) not in seen and id(c.tensor) not in used and c.tensor.size == pair.npu.size:
                seen.add(id(c.tensor))
                out.append(c)
        return out

    def _golden_of(self, name: str) -> Tensor | None:
        from accuscope.engine.sources.tpumlir import normalize  # tpu-mlir's reader: only where this runs
        g = self.golden.find(name, OUTPUT, 0) or self.golden.find_tensor(name)
        return g or self.golden.find_tensor(normalize(name))

    def _type_of(self, t: Tensor) -> str:
        if t.op_type:
            return op_kind(t.op_type)
        if self.golden_graph is not None:
            node = self.golden_graph.node(t.op)
            produced = self.golden_graph.producer(t.tensor_name)
            hit = node or (produced[0] if produced else None)
            if hit is not None:
                return op_kind(hit.type)
        return t.op

    def _from_npu_model(self, pair) -> list[_Candidate]:
        """What the NPU side's model says the op absorbed (its fused names after its own)."""
        graph = self.npu_graph
        node = graph.node(pair.op.op_name) if graph is not None else None
        if node is None or not node.fused:
            return []
        names = [n for n in node.fused if n != node.name]
        out = []
        for k, name in enumerate(names):
            g = self._golden_of(name)
            if g is not None:
                out.append(_Candidate(g, [self._type_of(self._golden_of(n) or g) for n in names[:k + 1]],
                                      f"NPU model: {node.name} absorbed {', '.join(names)}"))
        return out

    def _from_golden_model(self, pair) -> list[_Candidate]:
        """The golden model's chain from the paired tensor's producer through FOLDABLE and LAYOUT ops."""
        graph, g = self.golden_graph, pair.golden
        if graph is None:
            return []
        hit = graph.producer(g.tensor_name) if g.tensor_name else None
        node = hit[0] if hit else graph.node(g.op)
        if node is None or not node.outputs:
            return []
        out, chain, tensor = [], [], node.outputs[hit[1] if hit else 0]
        for _ in range(CHAIN):
            users = graph.consumers(tensor)
            if len(users) != 1:
                break
            nxt = users[0][0]
            kind = op_kind(nxt.type)
            if kind not in FOLDABLE and kind not in LAYOUT or not nxt.outputs:
                break
            chain.append(kind)
            tensor = nxt.outputs[0]
            found = self.golden.find_tensor(tensor) or self.golden.find(nxt.name, OUTPUT, 0)
            if found is not None:
                out.append(_Candidate(found, list(chain), "golden model: the ops after " + node.name))
        return out

    def _from_order(self, pair) -> list[_Candidate]:
        """Golden tensors after the paired one in execution order, same shape, paired with nothing."""
        start = self.order.get(id(pair.golden))
        if start is None:
            return []
        out, chain = [], []
        for t in self.tensors[start + 1:start + 1 + WINDOW]:
            if t.shape != pair.golden.shape:
                continue  # a side branch (a bias reshaped): not the chain's value
            chain.append(self._type_of(t))
            out.append(_Candidate(t, list(chain), "execution order: the values alone"))
        return out


def recheck(plan, cells: list[dict], broken: Callable[[dict], list[str]] | None = None) -> list[Repair]:
    """Re-pair the plan's disagreeing pairs where a fused chain's golden tensor agrees; `cells` are
    the computed cells per row (changed in place for re-paired rows, as are plan.pairs and plan.rows);
    `broken`: what a row's cells break under the thresholds the verdict judges by (judgement.cells_broken)."""
    suspects = [i for i, p in enumerate(plan.pairs) if suspect(p, cells[i], broken)]
    if not suspects:
        return []
    npu_graph = plan.npu.graph if plan.npu.graph is not None else (
        plan.graph if plan.graph is not None and plan.graph.converted else None)
    checker = Rechecker(plan.npu, plan.golden, npu_graph, plan.golden.graph)
    used = {id(p.golden) for p in plan.pairs if p.golden is not None}
    repairs: list[Repair] = []
    # a re-paired output's value (its tensor name, the golden tensor it was paired with) -> what it is paired
    # with now: the same value as a consumer's input row is re-paired alike (CONV_2D's output and the next
    # op's input: both the value after the activation the .tflite fused)
    moved: dict[tuple[str, int], tuple[_Candidate, float]] = {}
    for i in suspects:
        pair = plan.pairs[i]
        if pair.npu.nbytes > MAX_BYTES:
            continue
        same = moved.get((pair.npu.tensor_name, id(pair.golden))) if pair.npu.tensor_name else None
        if same is not None:
            _repair(plan, cells, repairs, checker, i, *same)
            continue
        options = checker.candidates(pair, used)
        if not options:
            continue
        try:
            x = pair.npu.load()
        except (TensorError, OSError, ValueError):
            continue
        best, best_cos, best_euclid = None, float("nan"), float("nan")
        for c in options:
            if c.tensor.nbytes > MAX_BYTES:
                continue
            try:
                value, euclid = similarity(x, c.tensor.load())
            except (TensorError, OSError, ValueError):
                continue
            if value == value and (best is None or (value, euclid) > (best_cos, best_euclid)):
                best, best_cos, best_euclid = c, value, euclid
        if best is None:
            continue
        if not _better(cells[i], best_cos, best_euclid):
            # by the verdict's own thresholds: the identity pair breaks them, the candidate (every metric) does not
            if broken is None or best_cos < cells[i]["cos"] or not broken(cells[i]):
                continue
            candidate = run_job(Job(i, pair.npu, best.tensor, tuple(plan.metrics)))[1]
            if broken(candidate):
                continue
        if pair.npu.tensor_name:
            moved[(pair.npu.tensor_name, id(pair.golden))] = (best, best_cos)
        used.discard(id(pair.golden))
        used.add(id(best.tensor))
        _repair(plan, cells, repairs, checker, i, best, best_cos)
    return repairs


def _repair(plan, cells: list[dict], repairs: list[Repair], checker: Rechecker, i: int, best: _Candidate,
            best_cos: float) -> None:
    """Row i re-paired to `best` (its cells computed again), the re-pairing listed."""
    pair = plan.pairs[i]
    anchor = checker._type_of(pair.golden)
    rule = f"fused: {', '.join(best.chain)} folded into {anchor}"
    repairs.append(Repair(i, pair.npu.name, pair.golden.name, cells[i]["cos"], best.tensor.name, best_cos, rule,
                          best.source))
    new = replace(pair, golden=best.tensor, how=rule, ground_truth=best.tensor.op)
    plan.pairs[i] = new
    row = dict(plan.rows[i])
    row.update(golden_op=new.ground_truth, golden_dtype=best.tensor.dtype_name, how=rule,
               golden_file=best.tensor.source)
    plan.rows[i] = row
    cells[i] = run_job(Job(i, new.npu, new.golden, tuple(plan.metrics)))[1]


def _better(cells: dict, cos: float, euclid: float) -> bool:
    """Whether a candidate agrees where the identity pair does not: cosine at AGREE and above the
    pair's; or, when the pair's cosine already agrees, euclidean similarity at AGREE and above the
    pair's, the cosine no worse."""
    was_cos, was_euclid = cells["cos"], cells.get("euclid_sim", float("nan"))
    if cos < AGREE:
        return False
    if was_cos < AGREE:
        return cos > was_cos
    return euclid == euclid and euclid >= AGREE and (was_euclid != was_euclid or euclid > was_euclid) and cos >= was_cos
