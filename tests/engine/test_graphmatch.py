"""graphmatch's walk on two small graphs built here: two alike branches the values tell apart, an op of one
side the other does inside its convolution (a PAD), and the op kinds across runtimes. The real models, both
ways and with a planted fault, are tests/cli/test_litert.py's (`--match structure`)."""
from __future__ import annotations

from accuscope.engine.compare.graphmatch import PRE, kind_of, match, skeleton
from accuscope.engine.graphs.graph import Graph, Node
from accuscope.engine.sources import kinds


def _graph(kind: str, inputs: list[str], ops: list[tuple[str, str, list[str], str, tuple]], **attrs) -> Graph:
    nodes = [Node(name, op_type, k, k, ins, [out], attrs=dict(attrs.get(name, {})), output_shapes=[shape],
                  output_dtypes=["float32"]) for k, (name, op_type, ins, out, shape) in enumerate(ops)]
    return Graph("g", kind, "", nodes, inputs, [nodes[-1].outputs[0]], weights={"w"})


NHWC, NCHW = (1, 4, 4, 8), (1, 8, 4, 4)
TFLITE = _graph(kinds.TFLITE, ["in"], [
    ("CONV_2D_0", "CONV_2D", ["in", "w"], "a", NHWC), ("CONV_2D_1", "CONV_2D", ["in", "w"], "b", NHWC),
    ("ADD_0", "ADD", ["a", "b"], "sum", NHWC), ("PAD_0", "PAD", ["sum", "w"], "padded", (1, 6, 6, 8)),
    ("CONV_2D_2", "CONV_2D", ["padded", "w"], "c", NHWC)],
    CONV_2D_0={"fused activation": "RELU"})
ONNX = _graph(kinds.ONNX, ["x"], [
    ("to_nchw", "Transpose", ["x"], "xt", NCHW),
    ("conv_b", "Conv", ["xt", "w"], "B", NCHW),  # the branches in the other order
    ("conv_a", "Conv", ["xt", "w"], "A0", NCHW), ("relu_a", "Relu", ["A0"], "A", NCHW),
    ("add", "Add", ["A", "B"], "S", NCHW), ("conv_c", "Conv", ["S", "w"], "C", NCHW)])


def test_alike_branches_are_told_apart_by_values_and_a_pad_is_walked_through():
    values = {("a", "A"): 1.0, ("a", "B"): 0.1, ("b", "B"): 1.0, ("b", "A"): 0.1}
    asked = []

    def agree(n: str, g: str) -> float:
        asked.append((n, g))
        return values[(n, g)]
    found = match(skeleton(TFLITE), skeleton(ONNX), agree)
    assert found.image == {"in": "x", "a": "A", "b": "B", "sum": "S", "c": "C"}
    # CONV_2D_0's own part (before its RELU) had two candidates, conv_b and conv_a: its value is never
    # observed, so its RELU's output told them apart against each candidate's Relu (conv_b has none)
    assert found.fused == {"conv_a": ("CONV_2D_0", "runs it with its activation fused")} and found.by_values == 1
    assert asked == [("a", "A")] and not found.rejected  # CONV_2D_1 then had one candidate left: no value read
    assert all(not g.endswith(PRE) for _, g in asked)


def test_a_disagreeing_candidate_among_several_is_not_taken():
    values = {("b", "B"): 0.2, ("b", "A0"): 0.3}
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "b", NHWC)])
    onnx = _graph(kinds.ONNX, ["x"], [("to_nchw", "Transpose", ["x"], "xt", NCHW),
                                     ("conv_b", "Conv", ["xt", "w"], "B", NCHW),
                                     ("conv_a", "Conv", ["xt", "w"], "A0", NCHW)])
    found = match(skeleton(tflite), skeleton(onnx), lambda n, g: values[(n, g)])
    assert "b" not in found.image and found.by_values == 0
    assert sorted(found.rejected) == [("CONV_2D_0", "conv_a", 0.3), ("CONV_2D_0", "conv_b", 0.2)]
    values[("b", "A0")] = 0.999  # the second one agrees: it is taken, the first one named as not taken
    found = match(skeleton(tflite), skeleton(onnx), lambda n, g: values[(n, g)])
    assert found.image["b"] == "A0" and found.by_values == 1 and found.rejected == [("CONV_2D_0", "conv_b", 0.2)]


def test_a_batchnorm_and_a_pad_the_candidate_folded_are_walked_over():
    """MobileNetV2 by tf2onnx against the TFLite converter: the reference keeps a BatchNormalization's Mul after
    a Conv and a Pad before the next one, which the candidate folded into the first's weights and into the
    second's padding (65 of 65 ops paired on the real models, docs/pairing.md)."""
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "a", NHWC),
                                           ("CONV_2D_1", "CONV_2D", ["a", "w"], "b", NHWC)],
                    CONV_2D_0={"fused activation": "RELU6"})
    onnx = _graph(kinds.ONNX, ["x"], [("conv", "Conv", ["x", "w"], "c", NCHW), ("bn", "Mul", ["c", "w"], "m", NCHW),
                                     ("relu6", "Clip", ["m", "w"], "r", NCHW),
                                     ("pad", "Pad", ["r", "w"], "p", (1, 8, 6, 6)), ("conv2", "Conv", ["p", "w"], "d", NCHW)])
    found = match(skeleton(tflite), skeleton(onnx))
    assert found.image == {"in": "x", "a": "r", "b": "d"}
    assert found.fused == {"conv": ("CONV_2D_0", "runs it with its activation fused"),
                           "bn": ("CONV_2D_0", "folded it into its weights"),
                           "pad": ("CONV_2D_1", "does it inside (its padding)")}
    found = match(skeleton(onnx), skeleton(tflite))  # the other way: the candidate's own Mul and Pad
    assert found.image == {"x": "in", "r": "a", "d": "b"}
    assert found.fused_npu == {"conv": ("CONV_2D_0", "runs it with its activation fused"),
                               "bn": ("CONV_2D_0", "folded it into its weights"),
                               "pad": ("op after it", "does it inside (its padding)")}


def test_a_candidate_mul_the_reference_folded_takes_its_convolution_s_pair():
    """The candidate's Conv then Mul (an unfolded BatchNormalization) against one CONV_2D: the CONV_2D's output
    is the Mul's, and the candidate's Conv is the one left (fused N:1)."""
    onnx = _graph(kinds.ONNX, ["x"], [("conv", "Conv", ["x", "w"], "c", NCHW), ("bn", "Mul", ["c", "w"], "m", NCHW),
                                     ("conv2", "Conv", ["m", "w"], "d", NCHW)])
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "a", NHWC),
                                           ("CONV_2D_1", "CONV_2D", ["a", "w"], "b", NHWC)])
    found = match(skeleton(onnx), skeleton(tflite))
    assert found.image == {"x": "in", "m": "a", "d": "b"}
    assert found.fused_npu == {"conv": ("CONV_2D_0", "folded its Mul into its weights")}


def test_without_a_value_to_read_the_order_decides():
    """The ONNX side as the candidate: its two Convs each meet two fused CONV_2Ds' own parts, whose values no
    dump holds; the first in execution order is taken (by_order), and their Relus then pair by their inputs."""
    onnx = _graph(kinds.ONNX, ["x"], [("conv_a", "Conv", ["x", "w"], "A0", NCHW), ("relu_a", "Relu", ["A0"], "A", NCHW),
                                     ("conv_b", "Conv", ["x", "w"], "B0", NCHW), ("relu_b", "Relu", ["B0"], "B", NCHW)])
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "a", NHWC),
                                           ("CONV_2D_1", "CONV_2D", ["in", "w"], "b", NHWC)],
                    CONV_2D_0={"fused activation": "RELU"}, CONV_2D_1={"fused activation": "RELU"})
    found = match(skeleton(onnx), skeleton(tflite), lambda n, g: float("nan"))
    assert found.image == {"x": "in", "A": "a", "B": "b"} and found.by_order == 1 and found.by_values == 0


def test_an_op_the_reference_computes_as_several_is_found_by_its_values():
    """onnx2tf's HARD_SWISH against PaddleOCR's Add, Clip, Mul, Div: no op of its kind, so the reference ops after
    its input are read, and the one whose values agree (cosine and euclidean similarity: the Mul before the Div by
    6 is the same up to scale) is its pair; the ops between are fused into it."""
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "c", NHWC),
                                           ("HARD_SWISH_0", "HARD_SWISH", ["c"], "h", NHWC),
                                           ("CONV_2D_1", "CONV_2D", ["h", "w"], "d", NHWC)])
    onnx = _graph(kinds.ONNX, ["x"], [("conv", "Conv", ["x", "w"], "C", NCHW), ("add", "Add", ["C", "w"], "A", NCHW),
                                     ("clip", "Clip", ["A", "w"], "K", NCHW), ("mul", "Mul", ["C", "K"], "M", NCHW),
                                     ("div", "Div", ["M", "w"], "D", NCHW), ("conv2", "Conv", ["D", "w"], "E", NCHW)])
    values = {("h", "D"): 1.0, ("h", "M"): 0.5, ("c", "C"): 1.0}
    found = match(skeleton(tflite), skeleton(onnx), lambda n, g: values.get((n, g), 0.0))
    assert found.image == {"in": "x", "c": "C", "h": "D", "d": "E"} and found.by_values == 1
    assert found.fused == {g: ("HARD_SWISH_0", "computes it inside one op") for g in ("add", "clip", "mul")}


def test_an_op_holding_part_of_the_next_one_is_left_fused():
    """onnx2tf folds a HardSigmoid's scale and shift into the Conv before it (CONV_2D then RELU_0_TO_1): the
    CONV_2D's output is no tensor of the reference's (its pair disagrees where the next one agrees), so it is not
    paired; both Convs are fused N:1."""
    tflite = _graph(kinds.TFLITE, ["in"], [("CONV_2D_0", "CONV_2D", ["in", "w"], "c", NHWC),
                                           ("RELU_0_TO_1_0", "RELU_0_TO_1", ["c"], "r", NHWC)])
    onnx = _graph(kinds.ONNX, ["x"], [("conv", "Conv", ["x", "w"], "C", NCHW),
                                     ("hsig", "HardSigmoid", ["C"], "H", NCHW)])
    values = {("r", "H"): 1.0, ("c", "C"): -0.8}
    found = match(skeleton(tflite), skeleton(onnx), lambda n, g: values.get((n, g), 0.0))
    assert found.image == {"in": "x", "r": "H"}
    assert found.fused_npu["CONV_2D_0"][0] == "conv" and found.fused["conv"][0] == "CONV_2D_0"


def test_ops_of_weights_the_candidate_folded_are_found_by_the_values_of_its_op():
    """onnx2tf folds a MobileOne block's scale and shift (a Mul and an Add of weights) into the depthwise conv
    before a HardSwish: the conv's pair by structure (the ONNX Conv) disagrees, the Add after it agrees, so the conv
    stands for the Add, and the HardSwish is looked for from there."""
    tflite = _graph(kinds.TFLITE, ["in"], [("DEPTHWISE_CONV_2D_0", "DEPTHWISE_CONV_2D", ["in", "w"], "c", NHWC),
                                           ("HARD_SWISH_0", "HARD_SWISH", ["c"], "h", NHWC)])
    onnx = _graph(kinds.ONNX, ["x"], [("conv", "Conv", ["x", "w"], "C", NCHW), ("scale", "Mul", ["w", "C"], "M1", NCHW),
                                     ("shift", "Add", ["M1", "w"], "A1", NCHW), ("plus3", "Add", ["A1", "w"], "A2", NCHW),
                                     ("clip", "Clip", ["A2", "w"], "K", NCHW), ("mul", "Mul", ["A1", "K"], "M2", NCHW),
                                     ("div", "Div", ["M2", "w"], "D", NCHW)])
    values = {("c", "C"): 0.3, ("c", "M1"): 0.5, ("c", "A1"): 1.0, ("h", "D"): 1.0}
    found = match(skeleton(tflite), skeleton(onnx), lambda n, g: values.get((n, g), 0.0))
    assert found.image == {"in": "x", "c": "A1", "h": "D"} and not found.fused_npu
    assert {g: how for g, (_, how) in found.fused.items()} == {
        "conv": "folded the ops after it into its weights (its output is theirs)",
        "scale": "folded it into its weights", "shift": "folded it into its weights",
        "plus3": "computes it inside one op", "clip": "computes it inside one op", "mul": "computes it inside one op"}


def test_kinds_across_runtimes():
    assert kind_of("CONV_2D") == kind_of("Conv") == kind_of("DEPTHWISE_CONV_2D") == kind_of("Convolution") == "conv"
    assert kind_of("FULLY_CONNECTED") == kind_of("MatMul") == kind_of("Gemm") == "matmul"
    assert kind_of("RELU6") == kind_of("Clip") == "clip" and kind_of("tpu.Conv2D") == "Conv2D"
