"""An OpenVINO IR's BatchNormalization folded into the convolution before it, paired value for value.

`ov.convert_model` turns an ONNX Conv -> BatchNormalization into one convolution and an Add: it splits the
BN into a Multiply by its scale s = gamma / sqrt(var + eps) and an Add of its shift, multiplies the
convolution's weights by s (the bias joins the shift) and keeps the Add under the BN's name (its friendly
name and output names). The IR's Convolution or GroupConvolution then computes (y - b) * s per channel,
where y is the reference Conv's output and b its bias: no reference tensor holds that, and by identity it
pairs with y (the Add's input 0 by the BN's name; a depthwise conv keeps the Conv's output name on it).
PP-OCR cls fp32: 46 rows failing at cos 0.79-0.996 that are no error.

`BatchNormFolds.pair` recognises the fold from the two graphs: an IR convolution whose only consumer is an
Add named as a BatchNormalization of the reference model, whose input the reference's Conv made. The
reference is the ONNX model (onnxruntime's side) or that model as OpenVINO reads it (`--reference-runtime
openvino`: `core.read_model` keeps the BN, as BatchNormInference, and the Conv, as a Convolution without
bias). The convolution's output (and the Add's input 0, the same tensor) is paired with the reference's y
made into what the IR computes, (y - b) * s, with the BN's and the Conv's parameters read from the
reference model (the ONNX model's initializers or Constant nodes, the IR's Const layers in its .bin):
`how` says the fold, the golden tensor's `conversion` the arithmetic. The row is still compared
value for value: a fault in the convolution's weights fails it there.
"""
# lazy: engine.graphs.irgraph, engine.graphs.onnxgraph
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare.pair import Pair
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import INPUT, OUTPUT, Tensor

if TYPE_CHECKING:
    from accuscope.engine.graphs.graph import Graph, Node
    from accuscope.engine.sides.side import Side
    from accuscope.engine.sources.oprecord import OpRecord

CONVOLUTIONS = frozenset({"Convolution", "GroupConvolution"})  # the IR's ops a BN's scale folds into
# the reference's ops, by its kind: (its BatchNormalization: data, scale, bias, mean, variance; its Conv)
REFERENCE_OPS = {kinds.ONNX: ({"BatchNormalization"}, {"Conv"}),
                 kinds.OPENVINO_IR: ({"BatchNormInference"}, CONVOLUTIONS)}
FOLDED = "fused: BatchNormalization folded into Conv by OpenVINO"
EPSILON = 1e-5  # ONNX BatchNormalization's default


class BatchNormFolds:
    """The folds of one IR (the NPU side's graph) against its ONNX reference (the golden side's)."""

    def __init__(self, ir: Graph, reference: Graph, golden: Side):
        self.ir, self.reference, self.golden = ir, reference, golden
        self.norms, self.convs = REFERENCE_OPS[reference.kind]
        self._params: dict[str, np.ndarray] | None = None  # read once, when the first fold is found
        self._made: dict[str, Tensor | str] = {}  # by BN name: the golden tensor made, or why there is none
        self.made_from: dict[int, int] = {}  # id of a golden tensor made -> id of the reference's it was made from

    def pair(self, df: OpRecord, t: Tensor) -> Pair | None:
        """The pair of an NPU tensor that a folded BatchNormalization made; None for any other tensor."""
        add = self._add_of(df.op_name, t)
        bn = self.reference.node(add.name) if add is not None else None
        if bn is None or bn.type not in self.norms or len(bn.inputs) < 5:
            return None
        made = self.reference.producer(bn.inputs[0])
        if made is None or made[0].type not in self.convs:
            return None
        conv = made[0]
        if bn.name not in self._made:
            self._made[bn.name] = self._scaled(bn, conv, made[1])
        golden = self._made[bn.name]
        if isinstance(golden, str):
            return Pair(t, None, df, conv.name, "", f"{FOLDED[len('fused: '):]} ({conv.name} -> {bn.name}): {golden}")
        return Pair(t, golden, df, conv.name, FOLDED)

    def _add_of(self, op: str, t: Tensor) -> Node | None:
        """The Add a folded BN left, when `t` is the convolution's output before it (its output 0, the Add's input 0)."""
        node = self.ir.node(op)
        if node is None or t.index != 0 or not node.outputs or not node.inputs:
            return None
        if t.io == OUTPUT and node.type in CONVOLUTIONS:
            conv_out = node.outputs[0]
        elif t.io == INPUT and node.type == "Add":
            hit = self.ir.producer(node.inputs[0])
            if hit is None or hit[0].type not in CONVOLUTIONS or hit[1] != 0:
                return None
            conv_out = node.inputs[0]
        else:
            return None
        users = self.ir.consumers(conv_out)
        if len(users) != 1 or users[0][0].type != "Add" or users[0][1] != 0:
            return None
        return users[0][0]

    def _read_params(self) -> dict[str, np.ndarray]:
        """The reference's BN parameters and Conv biases, by tensor name, read once."""
        wanted = {name for node in self.reference.nodes if node.type in self.norms for name in node.inputs[1:5]}
        wanted |= {node.inputs[2] for node in self.reference.nodes if node.type in self.convs and len(node.inputs) > 2}
        if not self.reference.path:
            return {}
        if self.reference.kind == kinds.OPENVINO_IR:
            from accuscope.engine.graphs.irgraph import constant_values
            return constant_values(self.reference.path, wanted)
        from accuscope.engine.graphs.onnxgraph import named_initializers  # onnx: only where a fold is found
        return named_initializers(self.reference.path, wanted)

    def _scaled(self, bn: Node, conv: Node, j: int) -> Tensor | str:
        """The reference Conv's output as the IR's convolution computes it, (y - b) * s; else why not."""
        y = self.golden.find_tensor(bn.inputs[0]) or self.golden.find(conv.name, OUTPUT, j)
        if y is None:
            return f"the reference run holds no {bn.inputs[0]}"
        if self._params is None:
            self._params = self._read_params()
        gamma, _, mean, var = (self._params.get(name) for name in bn.inputs[1:5])
        bias = self._params.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(1)
        channels = y.shape[1] if len(y.shape) > 1 else None
        if gamma is None or var is None or mean is None or bias is None:
            return f"its scale is not an initializer of {self.reference.path or 'the reference model'}"
        if channels is None or {gamma.size, var.size} != {channels} or bias.size not in (1, channels):
            return f"its scale holds {gamma.size} values for {channels} channels"
        eps = float(bn.attrs.get("epsilon", EPSILON))
        scale = (gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)).reshape(-1)
        shift = bias.astype(np.float64).reshape(-1)
        at = (1, -1) + (1,) * (len(y.shape) - 2)
        load = y.load

        def read() -> np.ndarray:
            return ((load().astype(np.float64) - shift.reshape(at)) * scale.reshape(at)).astype(np.float32)

        bias_text = f" - {conv.name}'s bias" if len(conv.inputs) > 2 and conv.inputs[2] else ""
        made = replace(y, dtype=np.dtype(np.float32), payload=None, dtype_name="float32", reader=read,
                       conversion=f"({bn.inputs[0]}{bias_text}) * {bn.name}'s scale gamma/sqrt(var+eps): "
                                  "the BatchNormalization OpenVINO folded into the convolution")
        self.made_from[id(made)] = id(y)
        return made
