"""What a finished search writes into DIR/result, each in the form the consuming tool takes:

  model.onnx              the mixed-precision model (the conversion with the kept ops in fp32)
  node_block_list.json    onnxconverter-common's `convert_float_to_float16(node_block_list=...)`
  nodes_to_exclude.json   onnxruntime.quantization's `quantize_*(nodes_to_exclude=...)`
  qtable.txt              tpu-mlir's quantize table (`op_name F32` lines; tpu-mlir names ops by
                          their ONNX output tensor)
  polygraphy.txt          Polygraphy/TensorRT arguments: `--layer-precisions name:float32 ...`
                          (TensorRT's ONNX parser names layers after the original model's nodes,
                          `node_of_{output}` for an unnamed one)
  ignored_scope.json      OpenVINO NNCF's `nncf.quantize(..., ignored_scope=nncf.IgnoredScope(**json))`:
                          `{"names": [...]}`, the ONNX node names (NNCF's ONNX backend names nodes so)
  rknn_hybrid.cfg         RKNN-Toolkit2's hybrid quantization: the `custom_quantize_layers` block of the
                          `{model}.quantization.cfg` hybrid_quantization_step1 writes, `{tensor}: float16`
                          (RKNN names a layer by its output tensor: toolkit2 2.5 refuses a node's name;
                          a kept layer runs in float16, the NPU's float)
  keep_dtype.cfg          Ascend ATC's `--keep_dtype` file: one op name a line, kept in its original
                          precision where --precision_mode lowers the rest (an fp16 search)
  amct_skip_layers.cfg    Ascend AMCT's simplified quantization config (`skip_layers: "name"` lines, the
                          AMCTConfig prototext `create_quant_config(..., config_defination=)` reads): an
                          int8 search's ops left unquantized
  precision.json          every node with its precision, MagicMind-style per-node list
  command.txt             the command converting the model with the list as the search did
  prepared.onnx           only where the list alone cannot act on the user's model (recipe.py:
                          weights in Constant nodes, names accuscope gave): the model the lists
                          name, which command.txt converts
"""
# lazy: engine.precision.recipe
from __future__ import annotations

import json
import shlex
from pathlib import Path

from accuscope.engine.sources.outputfile import atomic_path, write_text

PRECISION = {"fp16": "float16", "int8": "int8"}


def qtable(model, keep: list[str]) -> str:
    outputs = {n.name: n.output[0] for n in model.graph.node if n.output}
    lines = ["# tpu-mlir quantize table written by accuscope precision: ops kept in float32", "# op_name quantize_mode"]
    return "\n".join(lines + [f"{outputs.get(k, k)} F32" for k in keep]) + "\n"


def toolchain_lists(model, keep: list[str]) -> dict[str, tuple[str, str]]:
    """The kept ops in the words of the toolchains above that take a list of names: {key: (file name,
    text)}; `model` names each node's output tensor (RKNN's and tpu-mlir's layer names)."""
    outputs = {n.name: n.output[0] for n in model.graph.node if n.output}
    quoted = [json.dumps(k, ensure_ascii=False) for k in keep]
    return {
        "ignored_scope": ("ignored_scope.json", json.dumps({"names": list(keep)}, indent=1, ensure_ascii=False) + "\n"),
        "rknn": ("rknn_hybrid.cfg", "# RKNN-Toolkit2 hybrid quantization, written by accuscope precision: replace the\n"
                 "# custom_quantize_layers line of {model}.quantization.cfg (hybrid_quantization_step1) with these\n"
                 + "custom_quantize_layers:" + ("".join(f"\n    {json.dumps(outputs.get(k, k), ensure_ascii=False)}: "
                                                       "float16" for k in keep) or " {}") + "\n"),
        "keep_dtype": ("keep_dtype.cfg", "".join(f"{k}\n" for k in keep)),
        "amct": ("amct_skip_layers.cfg", "# AMCT simplified quantization config, written by accuscope precision: the "
                 "ops left unquantized\n" + "".join(f"skip_layers: {q}\n" for q in quoted)),
    }


def polygraphy_args(to: str, keep: list[str]) -> list[str]:
    args = ["--fp16" if to == "fp16" else "--int8"]
    if keep:
        args += ["--precision-constraints", "obey", "--layer-precisions", *(f"{k}:float32" for k in keep)]
    return args


def node_precisions(model, to: str, keep: list[str], candidates: list[str]) -> list[dict]:
    kept, changed = set(keep), set(candidates)
    return [{"name": n.name, "op_type": n.op_type,
             "precision": "float32" if n.name in kept or n.name not in changed else PRECISION[to]}
            for n in model.graph.node]


def write_outputs(folder: str | Path, reference, mixed, to: str, keep: list[str], candidates: list[str],
                  original=None, original_path: str | Path | None = None, calibration: str | None = None,
                  obstacles: list[str] | None = None) -> dict[str, Path]:
    """Write the files above into `folder`; returns them by key. `original` is the user's own model
    (read from `original_path`), `reference` the prepared one the search converted; `obstacles`
    (recipe.obstacles: why the list alone does not act on the original) decide which one
    command.txt converts."""
    import onnx

    from accuscope.engine.precision.recipe import PREPARED, command, trt_layer_names, write_lists
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    files = {"model": root / "model.onnx", **write_lists(root, list(keep)), "qtable": root / "qtable.txt",
             "polygraphy": root / "polygraphy.txt", "precision": root / "precision.json"}
    with atomic_path(files["model"]) as tmp:
        onnx.save(mixed, str(tmp))
    write_text(files["qtable"], qtable(reference, keep))
    for key, (name, text) in toolchain_lists(reference, keep).items():
        files[key] = root / name
        write_text(files[key], text)
    layers = trt_layer_names(original, reference, keep) if original is not None else list(keep)
    write_text(files["polygraphy"], shlex.join(polygraphy_args(to, layers)) + "\n")
    write_text(files["precision"], json.dumps(node_precisions(reference, to, keep, candidates), indent=1,
                                              ensure_ascii=False) + "\n")
    source = original_path
    if source is None or obstacles:
        files["prepared"] = root / PREPARED
        with atomic_path(files["prepared"]) as tmp:
            onnx.save(reference, str(tmp))
        source = files["prepared"]
    inputs = [i.name for i in reference.graph.input if i.name not in {t.name for t in reference.graph.initializer}]
    key = "node_block_list" if to == "fp16" else "nodes_to_exclude"
    files["command"] = root / "command.txt"
    write_text(files["command"], command(to, source, files[key], root / f"model-{to}.onnx", calibration, inputs) + "\n")
    return files
