"""What a finished search writes into DIR/result, each in the form the consuming tool takes:

  model.onnx              the mixed-precision model (the conversion with the kept ops in fp32)
  node_block_list.json    onnxconverter-common's `convert_float_to_float16(node_block_list=...)`
  nodes_to_exclude.json   onnxruntime.quantization's `quantize_*(nodes_to_exclude=...)`
  qtable.txt              tpu-mlir's quantize table (`op_name F32` lines; tpu-mlir names ops by
                          their ONNX output tensor)
  polygraphy.txt          Polygraphy/TensorRT arguments: `--layer-precisions name:float32 ...`
                          (TensorRT's ONNX parser names layers after their nodes)
  precision.json          every node with its precision, MagicMind-style per-node list
"""
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


def write_outputs(folder: str | Path, reference, mixed, to: str, keep: list[str], candidates: list[str]) -> dict[str, Path]:
    """Write the files above into `folder`; returns them by key."""
    import onnx
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    files = {"model": root / "model.onnx", "node_block_list": root / "node_block_list.json",
             "nodes_to_exclude": root / "nodes_to_exclude.json", "qtable": root / "qtable.txt",
             "polygraphy": root / "polygraphy.txt", "precision": root / "precision.json"}
    with atomic_path(files["model"]) as tmp:
        onnx.save(mixed, str(tmp))
    names = json.dumps(list(keep), indent=1, ensure_ascii=False) + "\n"
    write_text(files["node_block_list"], names)
    write_text(files["nodes_to_exclude"], names)
    write_text(files["qtable"], qtable(reference, keep))
    write_text(files["polygraphy"], shlex.join(polygraphy_args(to, keep)) + "\n")
    write_text(files["precision"], json.dumps(node_precisions(reference, to, keep, candidates), indent=1,
                                              ensure_ascii=False) + "\n")
    return files
