"""A statically quantized model simulated in float with its own scales: the third side of an int8
candidate whose calibration is not at hand (`accuscope run --expected auto`).

The framework "at the device's precision" for int8 is fake quantization: every tensor the candidate
quantizes is rounded to its int8 grid with the candidate's own scale and zero point, and every op
computes in float on the dequantized values. A QDQ model (QuantizeLinear / DequantizeLinear pairs
around float ops, onnxruntime's default format) already is that simulation when run op by op, so it
is kept as it is. A QOperator model (QLinearConv, QLinearMatMul and onnxruntime's com.microsoft
QLinear* ops) computes in integers: each such op becomes DequantizeLinear of its quantized
activations, the float op on them (weights and int32 bias dequantized once, per channel where their
scales are), and QuantizeLinear with the op's output scale, under the op's own name and output name,
so the simulation's tensors pair with the reference as the candidate's do. What the simulation and
the candidate share (the grid, the scales, every rounding to int8) is the precision; what the device
adds beyond it (integer accumulation, requantization, a kernel's own rounding) is the implementation.
"""
from __future__ import annotations

import numpy as np

from accuscope.engine.graphs.optypes import QLINEAR
from accuscope.engine.sources.tensor import SourceError

MS = "com.microsoft"
# attributes of the com.microsoft ops the float op does not take
_NOT_FLOAT = {"channels_last", "opset"}


def is_qdq(model) -> bool:
    """The model quantizes with QuantizeLinear / DequantizeLinear around float ops only (no QLinear op,
    no integer-arithmetic op): run op by op, it is its own simulation."""
    return not any(n.op_type.startswith("QLinear") or n.op_type in ("ConvInteger", "MatMulInteger")
                   for n in model.graph.node)


def simulate(model):
    """The float simulation of a statically quantized ONNX model (a new model; `model` is left as it is).
    SourceError naming the op when one cannot be simulated (channels-last layouts, an op onnxruntime does not write)."""
    import onnx
    from onnx import helper, numpy_helper

    if is_qdq(model):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    made: dict[str, str] = {}  # an initializer dequantized once, by its three names
    new_inits = []
    nodes = []

    def constant(name: str):
        return numpy_helper.to_array(inits[name]) if name in inits else None

    def dequantized(value: str, scale: str, zero: str, axis: int) -> str:
        """The float tensor of a quantized input: an initializer dequantized here (per channel along
        `axis` where its scale has one value per channel), an activation through DequantizeLinear."""
        key = f"{value}|{scale}|{zero}"
        if key in made:
            return made[key]
        q, s, z = constant(value), constant(scale), constant(zero) if zero else None
        name = f"{value}_simulated"
        if q is not None and s is not None:
            f = (q.astype(np.float64) - (0.0 if z is None else _along(z, q.ndim, axis))) * _along(s, q.ndim, axis)
            new_inits.append(numpy_helper.from_array(f.astype(np.float32), name))
        else:
            nodes.append(helper.make_node("DequantizeLinear", [value, scale] + ([zero] if zero else []), [name],
                                          name=f"{value}_DequantizeLinear_simulated"))
        made[key] = name
        return name

    for node in graph.node:
        if node.domain not in ("", "ai.onnx", MS) or node.op_type not in QLINEAR:
            if node.op_type.startswith("QLinear") or node.op_type in ("ConvInteger", "MatMulInteger"):
                raise SourceError(f"{node.name or node.op_type}: {node.op_type} has no float simulation here "
                                  "(give the reference run at int8 as --expected PATH)")
            nodes.append(node)
            continue
        float_op, quantized, output_at = QLINEAR[node.op_type]
        if any(a.name == "channels_last" and a.i for a in node.attribute):
            raise SourceError(f"{node.name}: {node.op_type} in channels-last layout has no float simulation here")
        args = list(node.input)
        if node.op_type == "QLinearConcat":
            quantized = tuple(range(2, len(args), 3))
        inputs = [dequantized(args[k], args[k + 1], args[k + 2] if len(args) > k + 2 else "",
                              axis=0 if node.op_type == "QLinearConv" and k == 3 else -1)
                  for k in quantized]
        if node.op_type == "QLinearConv" and len(args) > 8 and args[8]:  # the int32 bias: x_scale * w_scale
            x_scale, w_scale = constant(args[1]), constant(args[4])
            bias = constant(args[8])
            if x_scale is None or w_scale is None or bias is None:
                raise SourceError(f"{node.name}: QLinearConv's bias or scales are not initializers")
            name = f"{args[8]}_simulated"
            f = bias.astype(np.float64) * float(x_scale.reshape(-1)[0]) * w_scale.astype(np.float64).reshape(-1)
            new_inits.append(numpy_helper.from_array(f.astype(np.float32), name))
            inputs.append(name)
        result = f"{node.output[0]}_float"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in _NOT_FLOAT}
        nodes.append(helper.make_node(float_op, inputs, [result], name=f"{node.name}_float", **attrs))
        nodes.append(helper.make_node("QuantizeLinear", [result, args[output_at], args[output_at + 1]],
                                      [node.output[0]], name=node.name))
    del graph.node[:]
    graph.node.extend(nodes)
    used = {n for node in nodes for n in node.input} | {o.name for o in graph.output}
    keep = [t for t in list(graph.initializer) + new_inits if t.name in used]  # the integer weights dequantized
    del graph.initializer[:]
    graph.initializer.extend(keep)
    if not any(o.domain == MS for o in out.opset_import) or any(n.domain == MS for n in graph.node):
        return out
    domains = [o for o in out.opset_import if o.domain != MS]
    del out.opset_import[:]
    out.opset_import.extend(domains)
    return out


def _along(a: np.ndarray, ndim: int, axis: int) -> np.ndarray | float:
    """A scale or zero point shaped to broadcast along `axis` of an ndim tensor (one per channel), or
    its one value."""
    a = a.astype(np.float64)
    if a.size == 1 or not ndim:
        return float(a.reshape(-1)[0])
    return a.reshape([-1 if i == axis % ndim else 1 for i in range(ndim)])
