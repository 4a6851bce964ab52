"""Dump with OpenVINO: every op output of an IR (`.xml` + `.bin`) or an ONNX model run on OpenVINO's
CPU plugin, as the npy folder ortdump writes (`{op}.{index}.{ts}.npy`, mapping.csv, dump.json).

OpenVINO writes no dumps: its users make every op output a model output (`Model.add_outputs`) and
run the model; so does this, once, on the CPU plugin. The model as read (before any output is added:
`add_outputs` names every unnamed output it adds `Result_N`) is written into the folder as model.xml
and model.bin (`ov.serialize`, as it stands: no compression, no transformation), the dump's own
model: graphs/irgraph reads it without OpenVINO, so the ops are named by their friendly names and
their outputs by the tensor names the converter kept (an IR converted from ONNX keeps the ONNX value
names on most outputs), which the pairing matches against the reference by name. Which outputs are
dumped is that graph's to say: its nodes (Const layers and what is computed from them alone, the
fp16/int8 weight decompression, are weights, never dumped; FakeQuantize outputs are dumped and are
the converter's own). Network inputs are written as `{input}.0.{ts}.npy`, named as the graph names the
input.

Precision: the CPU plugin's own default (`INFERENCE_PRECISION_HINT`) is bf16 on a CPU with AVX512-BF16
or AMX and f32 elsewhere, so one IR gives different values on two machines; a dump runs at `f32`
unless asked (`precision`: f32, bf16, f16, or `default`: the plugin's own choice, as deployed), and
dump.json records what ran. Making every op output a model output changes what the CPU plugin
fuses (an int8 IR's FakeQuantize no longer folds into its convolution's int8 kernel: PP-OCR cls's
class probability moved by 1.4e-3), so the model is also compiled and run as it is, and the network
outputs written are that run's, OpenVINO's own result bit for bit; dump.json says how far the
instrumented run's moved. One inference holds every output at once (no batches: a second compile
costs more than the CPU plugin's outputs take for the models this serves). openvino is an optional
extra, imported inside the functions.
"""
from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from accuscope.engine.graphs.irgraph import read_ir
from accuscope.engine.graphs.onnxgraph import need
from accuscope.engine.progress import OnProgress
from accuscope.engine.runs.onnxmodel import feeds_for
from accuscope.engine.runs.ortdump import DumpFolder, DumpReport, Writes, fed, new_dump_folder
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.outputfile import atomic_path
from accuscope.engine.sources.tensor import SourceError

PRECISIONS = ("f32", "bf16", "f16", "default")
DEVICE = "CPU"
MODEL_COPY = "model.xml"  # its weights in model.bin beside it


def openvino_module(purpose: str = "running a model on OpenVINO"):
    """openvino (the optional extra `openvino`), else a SourceError naming the install."""
    return need("openvino", purpose, extra="openvino")


def read_model(core, path: str):
    """The model at `path` (an IR's .xml with its .bin beside it, or an ONNX file) as OpenVINO reads it."""
    try:
        return core.read_model(path)
    except Exception as exc:  # noqa: BLE001 - openvino raises RuntimeError and its own kinds
        raise SourceError(f"{path}: OpenVINO cannot read the model: {_first_line(exc)}") from None


def compile_model(core, model, path: str, precision: str = "f32"):
    """`model` compiled on the CPU plugin at `precision` (PRECISIONS; `default`: the plugin's own)."""
    if precision not in PRECISIONS:
        raise SourceError(f"unknown OpenVINO precision {precision!r} (choose {', '.join(PRECISIONS)})")
    config = {} if precision == "default" else {"INFERENCE_PRECISION_HINT": precision}
    try:
        return core.compile_model(model, DEVICE, config)
    except Exception as exc:  # noqa: BLE001 - openvino raises RuntimeError and its own kinds
        raise SourceError(f"{path}: OpenVINO cannot compile the model for {DEVICE}: {_first_line(exc)}") from None


# the lines of an OpenVINO exception that say where in OpenVINO's sources it was raised, not what is wrong
_WHERE = re.compile(r"^(Exception from \S+:\d+:|Check '.*' failed at \S+:\d+:|FrontEnd API failed with \w+:"
                    r"|Converting input model)$")


def _first_line(exc: BaseException) -> str:
    """What an OpenVINO exception says is wrong (`Incorrect weights in bin file!`), its first line that is
    not a source location (`Exception from src/inference/src/cpp/core.cpp:84:`, `Check '...' failed at ...:`)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    said = [line for line in lines if not _WHERE.match(line)]
    return (said or lines or [type(exc).__name__])[0]


def _sources(model) -> list[tuple[str, int]]:
    """(op, output index) feeding each of the model's outputs, in the order a compiled model returns them."""
    return [(r.input(0).get_source_output().get_node().get_friendly_name(), r.input(0).get_source_output().get_index())
            for r in model.get_results()]


def _infer(compiled, given: dict[int, np.ndarray], path: str, share: bool = False) -> tuple:
    """The model's outputs in order; `share`: views of the compiled model's own output tensors, not copies
    (valid while `compiled` lives and runs nothing else: PP-OCR det's 700 outputs, 0.3 s of copying)."""
    try:
        return compiled(given, share_outputs=share).to_tuple()
    except Exception as exc:  # noqa: BLE001 - openvino raises RuntimeError and its own kinds
        raise SourceError(f"{path}: OpenVINO cannot run the model: {_first_line(exc)}") from None


def _specs(model, parameters: dict[str, str]) -> list[tuple[str, np.dtype, list | None]]:
    """The model's inputs as onnxmodel.feeds_for takes them, named as the dump's graph names them."""
    specs = []
    for port in model.inputs:
        node = port.get_node()
        name = parameters.get(node.get_friendly_name()) or node.get_friendly_name()
        try:
            dtype = np.dtype(port.get_element_type().to_dtype())
        except (TypeError, ValueError, RuntimeError):
            raise SourceError(f"input '{name}' has an element type numpy cannot hold "
                              f"({port.get_element_type()})") from None
        shape = port.get_partial_shape()
        dims = None if shape.rank.is_dynamic else [d.get_length() if d.is_static else None for d in shape]
        specs.append((name, dtype, dims))
    return specs


def input_dims(path) -> list[tuple[str, list | None]]:
    """A model's inputs' (name, dims: None where dynamic) as OpenVINO reads them, as onnxmodel.feeds_for's
    `like` takes them."""
    path = user_path(path, "model file")
    return [(name, dims) for name, _, dims in _specs(read_model(openvino_module().Core(), path), {})]


def dump_openvino(model_path, out_dir, inputs: dict[str, np.ndarray] | None = None, *, random_inputs=False,
                  seed=0, precision: str = "f32", timestamp: int | None = None, progress: OnProgress | None = None,
                  dims: dict[str, int] | None = None, files: Writes | None = None,
                  counterpart: dict[str, tuple[np.ndarray, str]] | None = None,
                like: list[tuple[str, list | None]] | None = None) -> DumpReport:
    """Run the model on OpenVINO's CPU plugin and write every op output as `{op}.{index}.{ts}.npy`,
    the inputs as `{input}.0.{ts}.npy`, model.xml/.bin (the model that ran) and dump.json (module doc).
    `inputs`, `random_inputs`, `seed`, `dims`, `files`, `progress`, `counterpart` as ortdump.dump_onnx takes them."""
    start = time.perf_counter()
    ov = openvino_module()
    path = user_path(model_path, "model file")
    core = ov.Core()
    model = read_model(core, path)
    out = new_dump_folder(out_dir)
    ts = int(time.time() * 1e6) if timestamp is None else int(timestamp)
    report = DumpReport(out)
    xml = os.path.join(out, MODEL_COPY)
    made: list[str] = []
    try:
        with atomic_path(xml) as tmp_xml, atomic_path(os.path.splitext(xml)[0] + ".bin") as tmp_bin:
            ov.serialize(model, str(tmp_xml), str(tmp_bin))
        made += [MODEL_COPY, os.path.basename(os.path.splitext(xml)[0] + ".bin")]
        ir = read_ir(xml)
        feeds = feeds_for(_specs(model, ir.parameters), path, inputs, random_inputs, seed, dims, counterpart, like)
        report.inputs = {k: tuple(v[0].shape) for k, v in feeds.items()}
        report.casts = {k: o for k, (_, o) in feeds.items() if o.startswith("given as")}
        report.fed = feeds

        ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
        wanted = []  # (node name, output index, tensor id)
        for node in ir.graph.nodes:
            op = ops.get(node.name)
            if op is None or op.get_output_size() != len(node.outputs):
                for tensor in node.outputs:
                    report.skipped.append((tensor, f"op {node.name} is not one op of the model as OpenVINO "
                                                   "read it (a repeated friendly name)"))
                continue
            wanted += [(node.name, k, tensor) for k, tensor in enumerate(node.outputs)]
        given = {i: feeds[name][0] for i, name in enumerate(feeds)}
        alone = model.clone()  # compiled and run as it is on a thread of its own, beside the instrumented one
        with ThreadPoolExecutor(1) as pool:
            own = pool.submit(lambda: _infer(compile_model(core, alone, path, precision), given, path))
            sources = _sources(alone)
            model.add_outputs([ops[name].output(k) for name, k, _ in wanted])
            place = {source: i for i, source in enumerate(_sources(model))}
            compiled = compile_model(core, model, path, precision)
            values = _infer(compiled, given, path, share=True)  # written from there: `compiled` lives to the end
            outputs = dict(zip(sources, own.result()))  # the network outputs as OpenVINO computes them alone
        moved = max((float(np.max(np.abs(values[place[s]].astype(np.float64) - v)))
                     for s, v in outputs.items() if s in place and v.dtype.kind == "f" and v.size
                     and v.shape == values[place[s]].shape), default=0.0)
    except BaseException:
        for f in made:
            os.remove(os.path.join(out, f))
        raise
    with DumpFolder(out, ts, [*feeds, *(name for name, _, _ in wanted)], report, files, progress,
                    len(feeds) + len(wanted)) as folder:
        folder.made += made
        for name, (arr, _) in feeds.items():
            folder.write(name, 0, name, arr)
        for name, k, tensor in wanted:
            at = place.get((name, k))
            if at is None:
                report.skipped.append((tensor, "OpenVINO did not return it as an output"))
                continue
            folder.write(name, k, tensor, outputs.get((name, k), values[at]))
        folder.finish({
            "model": os.path.abspath(path),
            "model_copy": MODEL_COPY,
            "runtime": "openvino",
            "openvino": ov.get_version(),
            "device": DEVICE,
            "precision": precision,
            "inference_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
            "network_outputs": "from the model compiled as it is (OpenVINO's own result); every other tensor from "
                               "a run with every op output made a model output, where the CPU plugin fuses less "
                               f"(its network outputs differed from OpenVINO's own by up to {moved:.3g})",
            "instrumented_output_difference": moved,
            **fed(feeds, seed),
            "timestamp": ts,
        })
    report.seconds = time.perf_counter() - start
    return report
