"""Why an op differs, in the models' own terms: its parameters and attributes in the reference
model against the candidate (the converted, quantized or lower-precision ONNX model).

The advisor knows *that* an op introduced error (its re-run on the candidate's inputs disagrees);
this says what the conversion did to it: weights stored in another dtype, quantized to a few
levels, constants clamped or saturated to the float16 range, an attribute (epsilon, say) changed.
Each finding carries a `cause` the advice is chosen by.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accuscope.engine.sources.inputfile import user_path

FP16_MAX = 65504.0
LEVELS_QUANTIZED = 256  # a weight tensor with at most this many distinct values is quantized


@dataclass(frozen=True)
class Difference:
    cause: str  # "dtype", "quantized", "fp16_range", "attribute", "replaced"
    text: str


class ModelView:
    """The nodes, weights and producers of an ONNX model, by node name and by tensor name."""

    def __init__(self, path: str):
        import onnx
        from onnx import numpy_helper
        self.model = onnx.load(user_path(path, "model file"), load_external_data=False)
        g = self.model.graph
        self._to_array = numpy_helper.to_array
        self.weights = {t.name: t for t in g.initializer}
        self.nodes = {n.name: n for n in g.node if n.name}
        self.producer = {o: n for n in g.node for o in n.output if o}
        for n in g.node:
            if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].name == "value":
                self.weights.setdefault(n.output[0], n.attribute[0].t)

    def node(self, name: str, tensor: str = ""):
        return self.nodes.get(name) or (self.producer.get(tensor) if tensor else None)

    def weight(self, tensor: str):
        """The array behind a node input: an initializer or Constant, through Cast / DequantizeLinear
        (then also what it was stored as), else None."""
        seen = 0
        stored = None
        while seen < 4:
            if tensor in self.weights:
                arr = self._to_array(self.weights[tensor])
                return arr, stored if stored is not None else arr
            prod = self.producer.get(tensor)
            if prod is None or prod.op_type not in ("Cast", "DequantizeLinear") or not prod.input:
                return None
            if prod.op_type == "DequantizeLinear" and prod.input[0] in self.weights:
                stored = self._to_array(self.weights[prod.input[0]])
            tensor = prod.input[0]
            seen += 1
        return None


def differences(ref: ModelView, cand: ModelView, op: str, output: str = "") -> list[Difference]:
    """What the candidate model changed in op (found by node name, else by the tensor it writes)."""
    r, c = ref.node(op, output), cand.node(op, output)
    if r is None or c is None:
        return []
    found: list[Difference] = []
    if r.op_type != c.op_type:
        return _replacement(ref, cand, r, output or (c.output[0] if c.output else ""))
    stored_as: dict[str, list[str]] = {}
    for k, (ri, ci) in enumerate(zip(r.input, c.input)):
        rw, cw = ref.weight(ri), cand.weight(ci)
        if rw is None or cw is None:
            continue
        found += _weight_changes(f"input {k} ({ri})", rw[0], cw[0], cw[1])
        if cw[1].dtype != rw[0].dtype:
            stored_as.setdefault(f"{cw[1].dtype} (reference: {rw[0].dtype})", []).append(str(k))
    for how, inputs in stored_as.items():
        found.append(Difference("dtype", f"input{'s' if len(inputs) > 1 else ''} {', '.join(inputs)} stored as {how}"))
    found += _attribute_changes(r, c)
    return found


QUANTIZED_OPS = {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
                 "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeMatMul"}


def _replacement(ref: ModelView, cand: ModelView, r, output: str) -> list[Difference]:
    """The candidate computes the reference node's output with other nodes (a quantizer's chain):
    walk back from that output to tensors the reference also has, and say what stands there."""
    known = set(ref.producer) | {i.name for i in ref.model.graph.input} | set(ref.weights)
    chain: list = []
    todo, seen = [output], set()
    while todo and len(chain) < 12:
        t = todo.pop()
        node = cand.producer.get(t)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        chain.append(node)
        todo += [i for i in node.input if i and (i not in known or i == output) and i not in cand.weights]
    types = [n.op_type for n in reversed(chain)]
    int_weights = [cand._to_array(cand.weights[i]) for n in chain for i in n.input
                   if i in cand.weights and cand._to_array(cand.weights[i]).dtype.itemsize == 1
                   and cand._to_array(cand.weights[i]).size > 1]
    if set(types) & QUANTIZED_OPS:
        w = (f", weights {int_weights[0].dtype} ({int(np.unique(int_weights[0]).size)} levels)"
             if int_weights else "")
        return [Difference("quantized", f"{r.op_type} was replaced by the quantized chain "
                                        f"{' + '.join(dict.fromkeys(types))}{w}")]
    return [Difference("replaced", f"{r.op_type} became {' + '.join(dict.fromkeys(types)) or '?'} in the candidate model")]


def _weight_changes(what: str, ref: np.ndarray, cand: np.ndarray, stored: np.ndarray) -> list[Difference]:
    if ref.dtype.kind != "f" or ref.size == 0 or cand.shape != ref.shape:
        return []
    r, c = np.abs(ref.astype(np.float64)), np.abs(cand.astype(np.float64))
    top = float(c.max())
    clamped = (r > top * (1 + 1e-3)) & (c >= top * (1 - 1e-3))
    if clamped.any() or not np.isfinite(c).all():
        beyond = int(clamped.sum() + (~np.isfinite(c)).sum())
        where = "inf" if not np.isfinite(c).all() else f"clamped to ±{top:.6g}"
        return [Difference("fp16_range", f"{what}: {beyond} value(s) beyond the float16 conversion's range (largest "
                                         f"{float(r.max()):.4g}) became {where}")]
    levels = int(np.unique(stored).size) if stored.size <= 1 << 22 else None
    if stored.dtype.kind in "iu" or (levels is not None and levels <= LEVELS_QUANTIZED < np.unique(ref).size):
        return [Difference("quantized", f"{what} quantized to {levels} levels"
                                        + (f" ({stored.dtype})" if stored.dtype.kind in "iu" else ""))]
    err = float(np.max(np.abs(cand.astype(np.float64) - ref)) / (r.max() or 1.0))
    if err > 0.01:
        return [Difference("quantized", f"{what} changed by up to {100 * err:.2g}% of its largest value")]
    return []


def _attribute_changes(r, c) -> list[Difference]:
    from onnx import helper
    ra = {a.name: helper.get_attribute_value(a) for a in r.attribute}
    ca = {a.name: helper.get_attribute_value(a) for a in c.attribute}
    out = []
    for name in sorted(set(ra) | set(ca)):
        if name in ("value", "then_branch", "else_branch", "body"):
            continue
        a, b = ra.get(name), ca.get(name)
        if a != b and not (isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-7 * max(abs(a), 1)):
            out.append(Difference("attribute", f"attribute {name}: {a!r} in the reference, {b!r} in the candidate"))
    return out


ADVICE = {
    "fp16_range": "keep this op in float32 (a mixed-precision conversion with it on the block list) or rescale "
                  "its parameters into the float16 range",
    "quantized": "quantize it per channel or with better calibration data, or exclude it from quantization",
    "dtype": "run it in the reference precision (exclude it from the conversion)",
    "attribute": "restore the reference attribute value in the conversion",
    "replaced": "check the converter's replacement of this op (or exclude it from the conversion)",
}
