"""Gives the keep lists `accuscope precision` writes for RKNN-Toolkit2 and OpenVINO NNCF to the real tools
and says whether the named layer stays out of int8 (neither tool installs beside accuscope: each runs in
its own venv). A two-Conv model (conv1 -> relu1 -> conv2), conv1 kept:

    PYTHONPATH=tui python benchmarks/check_keep_lists.py make /tmp/keep       # the model and the lists
    ~/.cache/accuscope-tests/rknn-venv/bin/python benchmarks/check_keep_lists.py rknn /tmp/keep
    ~/.cache/accuscope-tests/openvino-venv/bin/python benchmarks/check_keep_lists.py nncf /tmp/keep

Measured (rknn-toolkit2 2.5.0, target rk3588; openvino 2026.4.1 with nncf 3.4.0):
  rknn: rknn_hybrid.cfg's block in step1's quantization.cfg: hybrid_quantization_step2 returns 0 and
        logs `Meet hybrid type, dtype: float16, tensor: c1`; a node name there (conv1) is refused
        ("Invalid operands name 'conv1' in custom_quantize_layers")
  nncf: ignored_scope.json on the IR ov.convert_model makes of the ONNX model: conv1 reads its input and
        weights unquantized (Parameter, Constant), conv2 through FakeQuantize
"""
import json
import os
import sys


def make(folder: str) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from accuscope.engine.precision.outputs import toolchain_lists
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
               for n, s in (("w1", (8, 3, 3, 3)), ("w2", (4, 8, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, os.path.join(folder, "model.onnx"))
    np.save(os.path.join(folder, "x.npy"), rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    with open(os.path.join(folder, "dataset.txt"), "w") as fh:
        fh.write(os.path.join(folder, "x.npy") + "\n")
    for name, text in toolchain_lists(model, ["conv1"]).values():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    print(f"wrote {folder}: model.onnx, x.npy and the lists")


def rknn(folder: str) -> None:
    from rknn.api import RKNN
    os.chdir(folder)
    r = RKNN()
    r.config(target_platform="rk3588")
    assert r.load_onnx("model.onnx") == 0
    assert r.hybrid_quantization_step1(dataset="dataset.txt", proposal=False) == 0
    with open("model.quantization.cfg", encoding="utf-8") as fh:
        cfg = fh.read()
    with open("rknn_hybrid.cfg", encoding="utf-8") as fh:
        block = "".join(line for line in fh if not line.startswith("#"))
    assert "custom_quantize_layers: {}\n" in cfg
    with open("model.quantization.cfg", "w", encoding="utf-8") as fh:
        fh.write(cfg.replace("custom_quantize_layers: {}\n", block))
    r = RKNN(verbose=True)
    r.config(target_platform="rk3588")
    ret = r.hybrid_quantization_step2(model_input="model.model", data_input="model.data",
                                      model_quantization_cfg="model.quantization.cfg")
    print(f"rknn: hybrid_quantization_step2 returned {ret} (its log above says which tensors run in float16)")


def nncf(folder: str) -> None:
    import nncf as nn
    import numpy as np
    import openvino as ov
    model = ov.convert_model(os.path.join(folder, "model.onnx"))
    with open(os.path.join(folder, "ignored_scope.json"), encoding="utf-8") as fh:
        scope = nn.IgnoredScope(**json.load(fh))
    x = np.load(os.path.join(folder, "x.npy"))
    q = nn.quantize(model, nn.Dataset([x]), subset_size=1, ignored_scope=scope)
    for op in q.get_ops():
        if op.get_type_name() == "Convolution":
            fed = [i.get_source_output().get_node().get_type_name() for i in op.inputs()]
            print(f"nncf: {op.get_friendly_name()} reads {', '.join(fed)}")


if __name__ == "__main__":
    {"make": make, "rknn": rknn, "nncf": nncf}[sys.argv[1]](sys.argv[2])
