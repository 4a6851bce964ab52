"""Whether a list of node names accuscope prints for a converter does, on the user's own model, what
accuscope measured, and the exact command that reproduces the measured result when it does not.

accuscope converts a prepared copy of the model (`convert.prepare`: weights held in Constant nodes
become initializers, every node is named). A list given with the user's original model can differ:

- a name may be no node name of the original (accuscope named an unnamed node);
- fp16: onnxconverter-common converts every Constant node's tensor to float16 (clamping it to its
  range) whatever `node_block_list` says, so a listed node whose weights sit in Constant nodes still
  reads clamped weights (PP-OCR's Paddle export keeps all weights so);
- int8: onnxruntime.quantization quantizes weights it finds as initializers; weights in Constant
  nodes are quantized otherwise or not at all, so the conversion is another one.

Where one of these holds, the prepared model is written next to the list and named, with the command
that converts it with the list (`command`); the TensorRT layer names (`trt_layer_names`) follow the
ONNX parser's naming of the original model.
"""
# lazy: engine.precision.convert, engine.runs.onnxmodel
from __future__ import annotations

import json
import shlex
from pathlib import Path

from accuscope.engine.sources.outputfile import atomic_path, write_text

CONVERTER = {"fp16": "onnxconverter-common", "int8": "onnxruntime.quantization"}
LIST_KEY = {"fp16": "node_block_list", "int8": "nodes_to_exclude"}
PREPARED = "prepared.onnx"


def _float_constants(model) -> set[str]:
    """Outputs of Constant nodes holding a floating-point tensor (what the converters treat apart)."""
    import onnx
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
    return {n.output[0] for n in model.graph.node
            if n.op_type == "Constant" and n.output and any(a.t.data_type in floats for a in n.attribute)}


def obstacles(model, names: list[str], to: str) -> list[str]:
    """Why `names`, given to the `to` converter with `model` (the user's own, as it is), would not act as
    on accuscope's prepared model; [] when nothing stands in the way."""
    found = []
    nodes = {n.name: n for n in model.graph.node if n.name}
    missing = [n for n in names if n not in nodes]
    if missing:
        found.append(f"{len(missing)} of the {len(names)} names are no node name of the model (accuscope named "
                     f"its unnamed nodes; first: {missing[0]})")
    constants = _float_constants(model)
    if not constants:
        return found
    if to == "fp16":
        reading = [n for n in names if n in nodes and any(i in constants for i in nodes[n].input)]
        if reading:
            found.append(f"{reading[0]}{f' and {len(reading) - 1} more' if len(reading) > 1 else ''} read weights "
                         "from Constant nodes, which onnxconverter-common converts to float16 (clamped to its range) "
                         "whatever node_block_list says")
    else:
        from onnxruntime.quantization import registry
        types = set(registry.IntegerOpsRegistry) | set(registry.QLinearOpsRegistry)
        if any(n.op_type in types and any(i in constants for i in n.input) for n in model.graph.node):
            found.append("the weights sit in Constant nodes, and onnxruntime.quantization quantizes weights only as "
                         "initializers (on such a model it stops: 'Expected ... to be an initializer', or converts "
                         "otherwise than measured)")
    return found


def command(to: str, model: str | Path, names_file: str | Path, out: str | Path,
            calibration: str | Path | None = None, input_names: list[str] | None = None) -> str:
    """The shell command converting `model` with the list in `names_file` as accuscope's own trial did
    (`convert.convert`), writing `out`: a python one-liner calling the converter."""
    m, f, o = (json.dumps(str(Path(p).resolve()), ensure_ascii=False) for p in (model, names_file, out))
    if to == "fp16":
        code = ("import json, onnx; from onnxconverter_common import float16; "
                f"onnx.save(float16.convert_float_to_float16(onnx.load({m}), keep_io_types=True, "
                f"node_block_list=json.load(open({f}))), {o})")
    elif calibration is None:
        code = ("import json; from onnxruntime.quantization import QuantType, quantize_dynamic; "
                f"quantize_dynamic({m}, {o}, weight_type=QuantType.QInt8, nodes_to_exclude=json.load(open({f})))")
    else:
        c = json.dumps(str(Path(calibration).resolve()), ensure_ascii=False)
        first = json.dumps((input_names or ["x"])[0], ensure_ascii=False)
        code = ("import glob, json, os, numpy as np; from onnxruntime.quantization import QuantType, quantize_static; "
                f"s = iter([{{{first}: np.load(p)}} if p.endswith(\".npy\") else dict(np.load(p)) "
                f"for p in sorted(glob.glob(os.path.join({c}, \"*.np[yz]\")))]); "
                "r = type(\"Reader\", (), {\"get_next\": lambda self: next(s, None)})(); "
                f"quantize_static({m}, {o}, r, nodes_to_exclude=json.load(open({f})), "
                "activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)")
    return "python -c " + shlex.quote(code)


def trt_layer_names(original, prepared, names: list[str]) -> list[str]:
    """The TensorRT layer names of the listed (prepared-model) nodes when the ONNX parser imports the
    user's original model: a node's own name, or `node_of_{first output}` for an unnamed node (the
    onnx-tensorrt parser's getNodeName). Nodes are matched by their first output, which prepare keeps."""
    by_output = {n.output[0]: n for n in original.graph.node if n.output}
    first = {n.name: n.output[0] for n in prepared.graph.node if n.output}
    out = []
    for name in names:
        node = by_output.get(first.get(name, ""))
        if node is None:
            out.append(name)
        else:
            out.append(node.name or f"node_of_{node.output[0]}")
    return out


def write_lists(folder: str | Path, names: list[str]) -> dict[str, Path]:
    """node_block_list.json and nodes_to_exclude.json (the same names) in `folder`."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    text = json.dumps(list(names), indent=1, ensure_ascii=False) + "\n"
    files = {}
    for key in ("node_block_list", "nodes_to_exclude"):
        files[key] = root / f"{key}.json"
        write_text(files[key], text)
    return files


def for_lists(folder: str | Path, model_path: str | Path, names: list[str]) -> dict:
    """For the lists a ranking prints (sensitivity): in `folder`, the lists as JSON, the prepared model
    when either converter cannot take them with the user's model as it is, and per target ("fp16",
    "int8") the obstacles and the command converting the model the lists act on. Keys: `obstacles`,
    `commands` (by target), `prepared` (a path or None), `files`."""
    import onnx

    from accuscope.engine.precision.convert import prepare
    from accuscope.engine.runs.onnxmodel import load_model
    root = Path(folder)
    files = write_lists(root, names)
    original = load_model(model_path)
    found = {to: obstacles(original, names, to) for to in ("fp16", "int8")}
    prepared = None
    if any(found.values()):
        prepared = root / PREPARED
        with atomic_path(prepared) as tmp:
            onnx.save(prepare(model_path), str(tmp))
    commands = {to: command(to, prepared if prepared is not None and found[to] else model_path, files[LIST_KEY[to]],
                            root / f"model-{to}.onnx")
                for to in ("fp16", "int8")}
    return {"obstacles": found, "commands": commands, "prepared": prepared, "files": files}
