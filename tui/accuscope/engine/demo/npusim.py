"""Write what an Ascend device would have dumped for an ONNX model: dump files plus the
offline-model JSON, the way ATC lays them out.

For tests and the demo, where no accelerator is at hand. The values come from any dump keyed by
the ONNX node names (an onnxruntime run of the fp32 model, of an fp16 or int8 conversion, or of
a model with planted faults); the structure follows ATC: Conv + BatchNormalization + activation
fused into one device op, a TransData after each network input, 4-D activations stored as
NC1HWC0, the `_datadump_*` fusion attributes in the model JSON.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.graphs.graph import Graph, Node
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.tensor import OUTPUT, sanitize

DEVICE_TYPES = {"Conv": "Conv2D", "MatMul": "MatMulV2", "Gemm": "MatMulV2", "BatchNormalization": "BNInference",
                "GlobalAveragePool": "GlobalAvgPool", "Clip": "ClipByValue", "Div": "RealDiv",
                "ReduceMean": "ReduceMeanD", "Softmax": "SoftmaxV2", "Transpose": "TransposeD"}
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Relu6"}
DTYPE_NAMES = {"float16": "DT_FLOAT16", "float32": "DT_FLOAT", "int32": "DT_INT32", "int64": "DT_INT64",
               "int8": "DT_INT8", "uint8": "DT_UINT8", "bool": "DT_BOOL"}


@dataclass
class DeviceOp:
    name: str
    type: str
    members: list[Node]  # framework ops fused into this device op; [] for device-only ops
    inputs: list[str] = field(default_factory=list)  # framework tensors read (weights excluded)
    outputs: list[str] = field(default_factory=list)  # framework tensors written


def fuse(graph: Graph) -> list[DeviceOp]:
    """Group Conv -> BatchNormalization -> activation chains (each link the sole consumer)."""
    taken: set[int] = set()
    ops = []
    for node in graph.nodes:
        if id(node) in taken:
            continue
        members = [node]
        if node.type == "Conv":
            for wanted in ({"BatchNormalization"}, ACTIVATIONS):
                nxt = _sole_consumer(graph, members[-1])
                if nxt is None or nxt.type not in wanted:
                    continue
                members.append(nxt)
        taken.update(id(m) for m in members)
        name = members[0].name if len(members) == 1 else members[0].name + members[-1].name
        inside = {t for m in members for t in m.outputs}
        inputs = [t for m in members for t in m.inputs if t not in inside and t not in graph.weights]
        ops.append(DeviceOp(name, DEVICE_TYPES.get(node.type, node.type), members, inputs, list(members[-1].outputs)))
    return ops


def _sole_consumer(graph: Graph, node: Node) -> Node | None:
    if len(node.outputs) != 1 or node.outputs[0] in graph.outputs:
        return None
    users = graph.consumers(node.outputs[0])
    return users[0][0] if len(users) == 1 else None


@dataclass
class Simulated:
    run_dir: str
    model_json: str
    ops: list[DeviceOp]


def simulate(graph: Graph, values: GoldenDump, out_dir: str, *, dtype=np.float16, model_name: str = "net",
             start_time: int = 1700000000000000, dump_time_dir: str = "20231114221320",
             output_cast: bool = False) -> Simulated:
    """Write `{out_dir}/dump/{time}/0/{model}/1/0/*` and `{out_dir}/{model}.json`.

    `output_cast` adds what ATC inserts when the network outputs stay float32 while the ops run
    in float16: a `trans_Cast_{k}` per network output, a device-only op (no framework op)."""
    run_dir = os.path.join(out_dir, "dump", dump_time_dir, "0", model_name, "1", "0")
    os.makedirs(run_dir, exist_ok=True)
    device_ops = fuse(graph)
    data_ops = [DeviceOp(name, "Data", [], [], [name]) for name in graph.inputs]
    trans_ops = [DeviceOp(f"trans_TransData_{k}", "TransData", [], [name], [f"{name}#nc1hwc0"])
                 for k, name in enumerate(graph.inputs)]
    renamed = {name: f"{name}#nc1hwc0" for name in graph.inputs}
    cast_ops = [DeviceOp(f"trans_Cast_{k}", "Cast", [], [name], [f"{name}#fp32"])
                for k, name in enumerate(graph.outputs)] if output_cast else []
    everything = data_ops + trans_ops + device_ops + cast_ops
    producer = {t: (op, j) for op in everything for j, t in enumerate(op.outputs)}

    def tensor_value(t: str) -> np.ndarray | None:
        name = t.split("#")[0]
        owner = producer.get(name)
        if owner is None:
            return None
        op, j = owner
        source = op.members[-1].name if op.members else op.name
        found = values.find(source, OUTPUT, j)
        return None if found is None else np.asarray(found.load())

    def to_device(arr: np.ndarray) -> DumpTensor:
        arr = arr.astype(dtype) if arr.dtype.kind == "f" else arr
        return DumpTensor(arr, "NC1HWC0" if arr.ndim == 4 else "ND")

    json_ops = []
    clock = start_time
    for seq, op in enumerate(everything, 1):
        reads = [renamed.get(t, t) if op.type != "TransData" else t for t in op.inputs]
        ins = [v for v in (tensor_value(t) for t in reads) if v is not None]
        outs = [tensor_value(t) for t in op.outputs]
        dump_ins = [to_device(v) for v in ins]
        dump_outs = []
        for j, v in enumerate(outs):
            if v is None:
                continue
            dt = to_device(v)
            if op.type == "Cast" and not op.members:  # the output Cast ATC inserted: back to float32
                dt = DumpTensor(dt.data.astype(np.float32), "ND")
            if op.members:
                dt.original_op = (op.members[-1].name, j)
            dump_outs.append(dt)
        if op.type != "Data":
            clock += 7
            write_dump_file(os.path.join(run_dir, f"{op.type}.{sanitize(op.name)}.{seq}.{clock}"), op.name,
                            dump_ins, dump_outs, dump_time=clock)
        json_ops.append(_json_op(op, seq, reads, producer, dump_outs or [to_device(v) for v in outs if v is not None]))
    model = {"name": model_name, "graph": [{"name": model_name, "op": json_ops}],
             "attr": [{"key": "attr_model_out_nodes_name",
                       "value": {"list": {"s": [f"{producer[t][0].name}:{producer[t][1]}" for t in graph.outputs
                                                if t in producer]}}}]}
    model_json = os.path.join(out_dir, f"{model_name}.json")
    with open(model_json, "w", encoding="utf-8") as fh:
        json.dump(model, fh, indent=1)
    return Simulated(run_dir, model_json, device_ops)


def _json_op(op: DeviceOp, seq: int, reads: list[str], producer: dict, outs: list[DumpTensor]) -> dict:
    inputs = []
    for t in reads:
        owner = producer.get(t)
        if owner is not None:
            inputs.append(f"{owner[0].name}:{owner[1]}")
    attrs = []
    if op.type != "Data":
        names = [m.name for m in op.members]
        attrs.append({"key": "_datadump_original_op_names", "value": {"list": {"s": names}}})
    output_desc = []
    for j, out in enumerate(outs):
        desc_attrs = [{"key": "origin_shape", "value": {"list": {"i": list(out.data.shape)}}},
                      {"key": "_datadump_origin_format", "value": {"s": "NCHW" if out.data.ndim == 4 else "ND"}}]
        if op.members:
            desc_attrs += [{"key": "_datadump_origin_name", "value": {"s": op.members[-1].name}},
                           {"key": "_datadump_origin_output_index", "value": {"i": j}}]
        output_desc.append({"dtype": DTYPE_NAMES.get(out.data.dtype.name, "DT_UNDEFINED"), "layout": out.format,
                            "shape": {"dim": list(out.data.shape)}, "attr": desc_attrs})
    return {"name": op.name, "type": op.type, "id": seq, "input": inputs, "attr": attrs, "output_desc": output_desc}
