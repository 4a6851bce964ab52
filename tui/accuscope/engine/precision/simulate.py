"""A quantized model simulated in float with its own scales: the third side of an int8 candidate
(`accuscope run --expected auto`), whose calibration (static) or quantizer settings (per channel,
reduced range, the ops it left out) are not at hand.

The framework "at the device's precision" for int8 is fake quantization: every tensor the candidate
quantizes is rounded to its int8 grid with the candidate's own scale and zero point, and every op
computes in float on the dequantized values. A QDQ model (QuantizeLinear / DequantizeLinear pairs
around float ops, onnxruntime's default format) already is that simulation when run op by op, so it
is kept as it is. A QOperator model (QLinearConv, QLinearMatMul and onnxruntime's com.microsoft
QLinear* ops) computes in integers: each such op becomes DequantizeLinear of its quantized
activations, the float op on them (weights and int32 bias dequantized once, per channel where their
scales are), and QuantizeLinear with the op's output scale, under the op's own name and output name,
so the simulation's tensors pair with the reference as the candidate's do. A dynamically quantized model (DynamicQuantizeLinear chains) keeps its
DynamicQuantizeLinear ops, which are the precision (each activation's scale computed at run time);
ConvInteger and MatMulInteger become the float op on the centred integers (the same sums, in float)
and com.microsoft's DynamicQuantizeMatMul and MatMulIntegerToFloat become DequantizeLinear and the
float op. What the simulation and
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


INTEGER = {"ConvInteger": "Conv", "MatMulInteger": "MatMul"}  # (a, b, a_zero, b_zero) -> int32 sums
# com.microsoft's integer MatMuls with a float output: where A's scale and zero point (-1: computed
# inside, as DynamicQuantizeLinear does), B's scale and zero point and the bias are
FLOAT_OUT = {"DynamicQuantizeMatMul": (-1, -1, 2, 3, 4), "MatMulIntegerToFloat": (2, 4, 3, 5, 6)}


def integer_ops(model) -> list:
    """The nodes that compute in integers (QLinear*, ConvInteger, MatMulInteger, com.microsoft's
    integer MatMuls): none means the model (QuantizeLinear / DequantizeLinear around float ops) is its
    own simulation when run op by op."""
    return [n for n in model.graph.node
            if n.op_type.startswith("QLinear") or n.op_type in INTEGER or n.op_type in FLOAT_OUT]


def simulate(model):
    """The float simulation of a quantized ONNX model (a new model; `model` is left as it is).
    SourceError naming the op when one cannot be simulated (channels-last layouts, an op onnxruntime does not write)."""
    import onnx
    from onnx import helper, numpy_helper

    if not integer_ops(model):
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

    def centred(value: str, zero: str, axis: int) -> str:
        """The float of an integer input less its zero point: an initializer computed here, an
        activation through Cast and Sub."""
        key = f"{value}|{zero}"
        if key in made:
            return made[key]
        q, z = constant(value), constant(zero) if zero else None
        name = f"{value}_centred_simulated"
        if q is not None:
            f = q.astype(np.float64) - (0.0 if z is None else _along(z, q.ndim, axis))
            new_inits.append(numpy_helper.from_array(f.astype(np.float32), name))
        else:
            nodes.append(helper.make_node("Cast", [value], [f"{value}_float_simulated"], name=f"{value}_Cast_simulated",
                                          to=onnx.TensorProto.FLOAT))
            if zero:
                nodes.append(helper.make_node("Cast", [zero], [f"{zero}_float_simulated"], name=f"{zero}_Cast_simulated",
                                              to=onnx.TensorProto.FLOAT))
                nodes.append(helper.make_node("Sub", [f"{value}_float_simulated", f"{zero}_float_simulated"], [name],
                                              name=f"{value}_Sub_simulated"))
            else:
                name = f"{value}_float_simulated"
        made[key] = name
        return name

    def attributes(node) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in _NOT_FLOAT}

    integer_outputs = set()
    for node in graph.node:
        args = list(node.input) + [""] * 8
        if node.op_type in INTEGER and node.domain in ("", "ai.onnx"):  # the same sums, in float
            a = centred(args[0], args[2], -1)
            b = centred(args[1], args[3], 0 if node.op_type == "ConvInteger" else -1)
            nodes.append(helper.make_node(INTEGER[node.op_type], [a, b], [node.output[0]], name=node.name,
                                          **attributes(node)))
            integer_outputs.add(node.output[0])
            continue
        if node.op_type in FLOAT_OUT and node.domain == MS:  # the sums in float, scaled as the kernel does
            a_scale, a_zero, b_scale, b_zero, bias = (args[k] for k in FLOAT_OUT[node.op_type])
            if node.op_type == "DynamicQuantizeMatMul":  # it quantizes A itself
                q = [f"{args[0]}_{x}_simulated" for x in ("quantized", "scale", "zero_point")]
                nodes.append(helper.make_node("DynamicQuantizeLinear", [args[0]], q,
                                              name=f"{node.name}_DynamicQuantizeLinear_simulated"))
                a, a_scale, a_zero = q
            else:
                a = args[0]
            y = node.output[0]
            nodes += [helper.make_node("MatMul", [centred(a, a_zero, -1), centred(args[1], b_zero, -1)], [f"{y}_sums_simulated"],
                                       name=f"{node.name}_MatMul_simulated"),
                      helper.make_node("Mul", [a_scale, b_scale], [f"{y}_scale_simulated"], name=f"{node.name}_scale_simulated"),
                      helper.make_node("Mul", [f"{y}_sums_simulated", f"{y}_scale_simulated"], [f"{y}_scaled_simulated" if bias else y],
                                       name=f"{node.name}_Mul_simulated" if bias else node.name)]
            if bias:
                nodes.append(helper.make_node("Add", [f"{y}_scaled_simulated", bias], [y], name=node.name))
            continue
        if node.domain not in ("", "ai.onnx", MS) or node.op_type not in QLINEAR:
            if node.op_type.startswith("QLinear"):
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
        nodes.append(helper.make_node(float_op, inputs, [result], name=f"{node.name}_float", **attributes(node)))
        nodes.append(helper.make_node("QuantizeLinear", [result, args[output_at], args[output_at + 1]],
                                      [node.output[0]], name=node.name))
    del graph.node[:]
    graph.node.extend(nodes)
    typed = [v for v in graph.value_info if v.name not in integer_outputs]  # their int32 sums are float now
    del graph.value_info[:]
    graph.value_info.extend(typed)
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
