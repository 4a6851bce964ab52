"""Chains of real conversions for the chain tests and benchmark: ONNX models made by the real tools
(onnxruntime's optimiser, onnxconverter-common's fp16 conversion), a fault planted in one stage's node."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def optimised_fp16_chain(model: Path, root: Path, plant_in: str = "opt") -> tuple[dict[str, Path], str]:
    """The chain fp32 (`model`, the reference) -> ORT-optimised (onnxruntime's basic graph optimisations:
    constants folded, Conv+BatchNormalization fused) -> fp16 (onnxconverter-common of the optimised model,
    its inputs and outputs kept fp32), written under root, with a fault planted in the middle Conv of
    the optimised model (a quarter of its output channels' weights negated): `plant_in` "opt" plants
    it before the fp16 conversion (so fp16 inherits it), "fp16" in the fp16 model only, "" nowhere.
    Returns ({label: model path}, the planted node's name)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    from onnxconverter_common import float16

    root.mkdir(parents=True, exist_ok=True)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(root / "opt.onnx")
    ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])

    def plant(m):
        convs = [n for n in m.graph.node if n.op_type == "Conv"]
        target = convs[len(convs) // 2]
        init = next(i for i in m.graph.initializer if i.name == target.input[1])
        w = numpy_helper.to_array(init).astype(np.float32)
        w[: max(1, w.shape[0] // 4)] *= -1.0
        init.CopyFrom(numpy_helper.from_array(w.astype(numpy_helper.to_array(init).dtype), init.name))
        return target.name

    opt = onnx.load(str(root / "opt.onnx"))
    planted = plant(opt) if plant_in == "opt" else ""
    onnx.save(opt, str(root / "opt.onnx"))
    fp16 = float16.convert_float_to_float16(opt, keep_io_types=True)
    if plant_in == "fp16":
        planted = plant(fp16)
    onnx.save(fp16, str(root / "fp16.onnx"))
    return {"opt": root / "opt.onnx", "fp16": root / "fp16.onnx"}, planted


def clamp_builds(root: Path) -> tuple[Path, dict[str, Path], str]:
    """Two builds of one fp16 conversion by onnxconverter-common: `default` with its default range clamp
    (max_finite_val 1e4: the Mul `scale` by 2e4 becomes a Mul by 1e4) and `keep` keeping that op in fp32
    (node_block_list). The model: x (1, 64) -> MatMul -> Mul `scale` (2e4) -> Mul (1e-4) -> Add -> Relu
    -> MatMul -> out, weights seeded. Returns (the fp32 reference, {label: build}, the clamped op)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper
    from onnxconverter_common import float16

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array((rng.standard_normal((64, 64)) * 0.0125).astype(np.float32), "w1"),
             numpy_helper.from_array(np.array(2e4, np.float32), "big"),
             numpy_helper.from_array(np.array(1e-4, np.float32), "small"),
             numpy_helper.from_array((rng.standard_normal(64) * 0.2).astype(np.float32), "bias"),
             numpy_helper.from_array((rng.standard_normal((64, 10)) * 0.125).astype(np.float32), "w2")]
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             h.make_node("Mul", ["h", "big"], ["scaled"], name="scale"),
             h.make_node("Mul", ["scaled", "small"], ["back"], name="unscale"),
             h.make_node("Add", ["back", "bias"], ["biased"], name="add_bias"),
             h.make_node("Relu", ["biased"], ["act"], name="relu"),
             h.make_node("MatMul", ["act", "w2"], ["out"], name="fc2")]
    graph = h.make_graph(nodes, "clamp", [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                         [h.make_tensor_value_info("out", T.FLOAT, [1, 10])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    ref = root / "model.onnx"
    onnx.save(model, str(ref))
    builds = {"keep": root / "keep.onnx", "default": root / "default.onnx"}
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True, node_block_list=["scale"]),
              str(builds["keep"]))
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), str(builds["default"]))
    np.save(root / "x.npy", rng.standard_normal((1, 64)).astype(np.float32))
    return ref, builds, "scale"


def repaired_chain(model: Path, stages: dict[str, Path], stage: str, op: str, root: Path) -> dict[str, Path]:
    """The chain of optimised_fp16_chain with the fault taken out of the node `op` of stage `stage` alone:
    that node's initializers given back from a build without the fault, and the stages after it made
    again from it as the chain is made (fp16 converted from opt). Written under root; AssertionError where
    the stage's model has no node `op`."""
    import onnx
    from onnxconverter_common import float16

    clean, _ = optimised_fp16_chain(model, root / "clean", "")
    fixed = onnx.load(str(stages[stage]))
    node = [n for n in fixed.graph.node if n.name == op]
    assert node, f"{stages[stage]} has no node {op!r}"
    weights = {i.name: i for i in onnx.load(str(clean[stage])).graph.initializer}
    for init in fixed.graph.initializer:
        if init.name in node[0].input and init.name in weights:
            init.CopyFrom(weights[init.name])
    out = dict(stages)
    out[stage] = root / f"{stage}.onnx"
    onnx.save(fixed, str(out[stage]))
    if stage == "opt":
        onnx.save(float16.convert_float_to_float16(fixed, keep_io_types=True), str(root / "fp16.onnx"))
        out["fp16"] = root / "fp16.onnx"
    return out
