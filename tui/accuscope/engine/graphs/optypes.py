"""Ascend op vocabulary: which op types are network inputs, which only move data, and the walk
from a tensor back through the ops ATC inserted between framework ops.

Two sets used to be called LAYOUT_ONLY and disagreed about Cast (the mapping and the advisor
walked through it, the thresholds did not exempt it). They answer two questions, so there are two:

- `LAYOUT_ONLY` (TransData, TransDataRNN) change where values sit, never a value: their rows are
  exempt from thresholds (with the network inputs, `EXEMPT_TYPES`), as msit exempts them.
- `INSERTED` adds Cast: ATC inserts Casts (fp32 -> fp16) with no framework op of their own, so
  tracing an input back to its framework producer walks through them, as through TransData. But a
  Cast does change values (rounding, fp16 overflow): its own row is judged like any op, never
  exempt. A Cast the framework model has (it has a golden tensor, or fusion names it) is where a
  walk stops; each caller says which (`walk_back` yields every step so a caller can stop early).
- `CONVERTER_OWN` (tpu-mlir lowering's `tpu.Cast`, an OpenVINO IR's FakeQuantize): ops a converter adds that stand for no framework
  op and are named after none (`xconv2d_53.tmp_0_Conv_f16`: the input x cast to f16 for that Conv):
  their tensors are the converter's own, like a device-only op's (GroundTruth `*`, exempt), never
  "unpaired". Tracing an input back walks through them as through INSERTED ops.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the op vocabulary is read where no graph is (judging a task's rows at the app's start)
    from accuscope.engine.graphs.graph import Graph, Node

INPUT_TYPES = frozenset({"Data", "RefData"})  # network inputs of an offline model
LAYOUT_ONLY = frozenset({"TransData", "TransDataRNN"})  # values moved, not changed
CONVERTER_OWN = frozenset({"tpu.Cast", "FakeQuantize"})  # tpu-mlir lowering's casts, OpenVINO IR's (NNCF's) int8
# fake quantization: no framework counterpart
INSERTED = LAYOUT_ONLY | {"Cast"} | CONVERTER_OWN  # what converters put between framework ops; walked through
EXEMPT_TYPES = LAYOUT_ONLY | INPUT_TYPES  # rows no threshold fails
# ONNX ops a converter inserts around the ops it converts (onnxruntime.quantization's QDQ and dynamic
# chains, onnxconverter-common's casts): an output of one of these that the reference does not hold
# is the converter's own, with no counterpart by nature (compare.mapping marks it so, never unpaired)
CONVERTER_TYPES = CONVERTER_OWN | {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast"}
# onnxruntime's QOperator ops (QLinearConv, QLinearMatMul, com.microsoft QLinear*): the float op each
# computes in integers, the positions of its quantized inputs (each a value, scale, zero point triple)
# and of its output's scale and zero point; its output `{tensor}_quantized` is `{tensor}` on the grid
QLINEAR = {"QLinearConv": ("Conv", (0, 3), 6), "QLinearMatMul": ("MatMul", (0, 3), 6),
           "QLinearAdd": ("Add", (0, 3), 6), "QLinearMul": ("Mul", (0, 3), 6),
           "QLinearSigmoid": ("Sigmoid", (0,), 3), "QLinearLeakyRelu": ("LeakyRelu", (0,), 3),
           "QLinearGlobalAveragePool": ("GlobalAveragePool", (0,), 3), "QLinearAveragePool": ("AveragePool", (0,), 3),
           "QLinearSoftmax": ("Softmax", (0,), 3), "QLinearConcat": ("Concat", (), 0)}  # Concat: (Y_scale, Y_zp, then triples)
QUANTIZED_SUFFIX = "_quantized"


def walk_back(graph: Graph, tensor: str) -> Iterator[tuple[str, tuple[Node, int] | None]]:
    """Each tensor from `tensor` back through `INSERTED` ops (first input), with its producer (node,
    output index), or None when the graph has no producer of it. Ends after the first producer that
    is not an inserted op, has no input, or was met before (a cycle in a damaged graph)."""
    seen: set[str] = set()
    while True:
        found = graph.producer(tensor)
        yield tensor, found
        if found is None:
            return
        node = found[0]
        if node.type not in INSERTED or not node.inputs or node.name in seen:
            return
        seen.add(node.name)
        tensor = node.inputs[0]


def op_kind(op_type: str) -> str:
    """`top.Conv` -> `Conv`, `tpu.Conv2D` -> `Conv2D`: the op without its tpu-mlir dialect."""
    return op_type.split(".", 1)[1] if op_type.startswith(("top.", "tpu.")) else op_type
