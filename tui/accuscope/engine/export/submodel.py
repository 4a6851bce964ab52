"""The runnable submodel of an export: an ONNX model cut from the framework model (boundary tensors
become graph inputs and outputs, weights kept, If/Loop bodies followed, shapes inferred), or a Caffe
prototxt holding the chosen layers after an input layer."""
# lazy: engine.graphs.caffegraph, engine.runs.onnxmodel
from __future__ import annotations

from pathlib import Path

import numpy as np

from accuscope import __version__
from accuscope.engine.graphs.graph import read_text
from accuscope.engine.graphs.subgraph import Selection
from accuscope.engine.runs.onnxmodel import onnx_module
from accuscope.engine.sources.tensor import SourceError

# ------------------------------------------------------------------ the ONNX submodel
EXPORTING = "exporting an ONNX submodel"  # what onnx is needed for, in its message



def write_onnx(sel: Selection, path: Path, data_shapes: dict[str, tuple], boundary: dict,
                notes: list[str]) -> str:
    """The framework model's nodes of the selection, its weights (initializers and Constant nodes),
    the boundary as graph inputs and outputs; shapes inferred; checked. Returns the checker verdict."""
    onnx = onnx_module(EXPORTING)
    from onnx import helper

    from accuscope.engine.runs.onnxmodel import node_names
    src = Path(sel.graph.path)
    try:
        model = onnx.load(str(src))
    except Exception as exc:  # noqa: BLE001 - protobuf and external-data errors alike
        raise SourceError(f"{src}: cannot load the framework model ({type(exc).__name__}: {exc})") from None
    g = model.graph
    types = _inferred_types(onnx, model, notes)
    names = node_names(g.node)
    by_name = {name: n for n, name in zip(g.node, names)}
    wanted = set(sel.weights)
    constants = []
    for n, name in zip(g.node, names):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and any(o in wanted for o in n.output):
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = c.name or name
            constants.append(c)
    nodes = []
    for op in sel.ops:
        src_node = by_name.get(op.name)
        if src_node is None:
            raise SourceError(f"{src}: node {op.name} not found in the model file")
        n = onnx.NodeProto()
        n.CopyFrom(src_node)
        n.name = op.name  # unnamed nodes get the name accuscope shows (and dumps use)
        nodes.append(n)
    inits = [i for i in g.initializer if i.name in wanted]
    sparse = [s for s in g.sparse_initializer if s.values.name in wanted]
    dtypes = {e["name"]: (e.get("golden") or e.get("npu") or {}).get("dtype") for e in boundary["inputs"]}
    inputs = [_value_info(onnx, b.tensor, types.get(b.tensor), b.dtype or dtypes.get(b.tensor),
                          data_shapes.get(b.tensor), fill_unknown=True) for b in sel.inputs]
    if model.ir_version < 4:  # initializers had to be graph inputs then
        inputs += [_value_info(onnx, i.name, types.get(i.name), None, tuple(i.dims), True) for i in inits]
    outputs = [_value_info(onnx, b.tensor, types.get(b.tensor), None, None, fill_unknown=False)
               for b in sel.outputs]
    graph = helper.make_graph(constants + nodes, f"{g.name or 'graph'}_sub", inputs, outputs, inits,
                              sparse_initializer=sparse)
    sub = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="accuscope",
                            producer_version=__version__)
    sub.ir_version = model.ir_version
    sub.functions.extend(model.functions)
    sub.doc_string = f"{', '.join(sel.start)} .. {', '.join(sel.end)} of {src.name}, exported by accuscope"
    try:
        sub = onnx.shape_inference.infer_shapes(sub)
    except Exception as exc:  # noqa: BLE001 - custom ops, odd models: shapes stay as declared
        notes.append(f"shape inference of the submodel failed ({type(exc).__name__}: {exc})")
    for out, b in zip(sub.graph.output, sel.outputs):
        if not out.type.tensor_type.elem_type:  # the checker needs a type: fall back to the data
            entry: dict = next((e for e in boundary["outputs"] if e["name"] == b.tensor), {})
            side = entry.get("golden") or entry.get("npu")
            out.CopyFrom(_value_info(onnx, b.tensor, None, b.dtype or (side or {}).get("dtype") or "float32",
                                     tuple(side["shape"]) if side else None, fill_unknown=True))
            notes.append(f"type of output {b.tensor} unknown to shape inference; taken from the data")
    for infos, entries in ((sub.graph.input, boundary["inputs"]), (sub.graph.output, boundary["outputs"])):
        declared = {v.name: v.type.tensor_type for v in infos}
        for e in entries:  # the manifest says what the submodel declares
            tt = declared.get(e["name"])
            if tt is not None:
                e["dtype"] = getattr(np_dtype(onnx, tt.elem_type), "name", e["dtype"])
                if tt.HasField("shape"):
                    e["shape"] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                  for d in tt.shape.dim]
    checker = "passed"
    try:
        onnx.checker.check_model(sub)
    except Exception as exc:  # noqa: BLE001 - ValidationError, and protobuf size errors
        checker = f"failed: {exc}"
        notes.append(f"onnx.checker: {exc}")
    if sub.ByteSize() > (1 << 31) - (64 << 20):
        onnx.save(sub, str(path), save_as_external_data=True, location=f"{path.name}.data")
    else:
        onnx.save(sub, str(path))
    return checker


def _inferred_types(onnx, model, notes: list[str]) -> dict:
    """tensor name -> TypeProto.Tensor of the full model (shape inference, else what the file declares)."""
    g = model.graph
    infos = []
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        infos += [*inferred.input, *inferred.value_info, *inferred.output]
    except Exception as exc:  # noqa: BLE001
        notes.append(f"shape inference of the framework model failed ({type(exc).__name__}: {exc})")
    infos += [*g.input, *g.value_info, *g.output]
    types: dict = {}
    for v in infos:
        if v.type.HasField("tensor_type") and v.name not in types:
            types[v.name] = v.type.tensor_type
    return types


def _value_info(onnx, name: str, tt, dtype: str | None, data_shape: tuple | None, fill_unknown: bool):
    """A typed graph input/output. Known dims and symbolic names are kept; an unknown dim (or the
    -1 some exporters write) takes the data's size when `fill_unknown`."""
    from onnx import helper
    elem = tt.elem_type if tt is not None and tt.elem_type else 0
    if not elem and dtype:
        try:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        except (TypeError, KeyError, ValueError):
            elem = 0
    elem = elem or onnx.TensorProto.FLOAT
    dims: list | None = None
    if tt is not None and tt.HasField("shape"):
        dims = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            elif fill_unknown and data_shape is not None and len(data_shape) == len(tt.shape.dim):
                dims.append(int(data_shape[k]))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(None)
    elif data_shape is not None and fill_unknown:
        dims = [int(d) for d in data_shape]
    return helper.make_tensor_value_info(name, elem, dims)


# ------------------------------------------------------------------ the Caffe submodel


def write_prototxt(sel: Selection, path: Path, data_shapes: dict[str, tuple], notes: list[str]) -> str:
    """The chosen layers' text as written in the source prototxt, after an input layer that gives
    the boundary blobs (an `Input` layer; top-level `input:` fields for V1 `layers` nets)."""
    from accuscope.engine.graphs.caffegraph import parse_text_format, train_only
    src = Path(sel.graph.path)
    text = read_text(src)
    spans = []
    for key, lo, hi in _layer_spans(text):
        try:
            parsed = parse_text_format(text[lo:hi])
        except ValueError:
            continue
        layer = parsed.get(key)
        if layer is not None and not train_only(layer):
            spans.append((key, lo, hi))
    by_index = {n.index: n for n in sel.ops}
    chosen = [text[lo:hi] for i, (_, lo, hi) in enumerate(spans) if i in by_index]
    if len(chosen) != len(sel.ops):
        raise SourceError(f"{src}: could not find the text of every chosen layer (found {len(chosen)} of "
                          f"{len(sel.ops)})")
    legacy = any(key == "layers" for key, _, _ in spans)
    blobs, shapes = [], []
    for b in sel.inputs:
        blob = b.tensor[:-len(b.producer) - 1] if b.producer and b.tensor.endswith("@" + b.producer) else b.tensor
        if blob in blobs:
            notes.append(f"two versions of blob {blob} enter the region (an in-place layer outside it); "
                         "the prototxt gives it once")
            continue
        shape = data_shapes.get(b.tensor) or (b.shape if b.shape and None not in b.shape else None)
        if shape is None:
            notes.append(f"shape of input blob {blob} unknown: fill in its dims in the prototxt")
        blobs.append(blob)
        shapes.append(shape)
    lines = [f'name: "{_escape(sel.graph.name)}_sub"',
             f"# {', '.join(sel.start)} .. {', '.join(sel.end)} of {src.name}, exported by accuscope {__version__}"]
    if blobs and legacy:
        for blob, shape in zip(blobs, shapes):
            lines.append(f'input: "{_escape(blob)}"')
            lines.append("input_shape { " + " ".join(f"dim: {d}" for d in shape or ()) + " }")
    elif blobs:
        lines.append("layer {")
        lines.append('  name: "accuscope_input"')
        lines.append('  type: "Input"')
        lines += [f'  top: "{_escape(blob)}"' for blob in blobs]
        lines.append("  input_param {")
        lines += ["    shape { " + " ".join(f"dim: {d}" for d in shape or ()) + " }" for shape in shapes]
        lines.append("  }")
        lines.append("}")
    path.write_text("\n".join(lines + chosen) + "\n", encoding="utf-8")
    try:
        parse_text_format(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        notes.append(f"the written prototxt does not parse: {exc}")
        return f"failed: {exc}"
    return "parsed"


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _layer_spans(text: str) -> list[tuple[str, int, int]]:
    """(key, start, end) of every top-level `layer {...}` / `layers {...}` block, in file order."""
    spans: list[tuple[str, int, int]] = []
    depth, i, n = 0, 0, len(text)
    pending: tuple[str, int] | None = None
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and pending is not None:
                spans.append((pending[0], pending[1], i + 1))
                pending = None
        elif depth == 0 and (c.isalpha() or c == "_"):
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_."):
                j += 1
            word = text[i:j]
            pending = (word, i) if word in ("layer", "layers") else None
            i = j
            continue
        i += 1
    return spans

def np_dtype(onnx, elem: int):
    try:
        return np.dtype(onnx.helper.tensor_dtype_tonp_dtype(elem))
    except Exception:  # noqa: BLE001 - undefined or exotic element types
        return None
