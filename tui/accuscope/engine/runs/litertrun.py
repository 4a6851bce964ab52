"""Dump with LiteRT (`ai-edge-litert`, TFLite's runtime): every op output of a `.tflite` model, as the npy
folder ortdump writes (`{op}.{index}.{ts}.npy`, mapping.csv, dump.json).

LiteRT's interpreter reuses a tensor's memory once no op needs it; `experimental_preserve_all_tensors`
keeps every tensor, so one `invoke` leaves each op output readable by its index (`get_tensor`). The dump
runs the model so, on the interpreter LiteRT builds by default (its CPU kernels, XNNPACK where it takes
an op), and reads every tensor graphs/tflitegraph lists as an op output (ops have no names in TFLite:
each is named by its first output tensor, the tensor by its own name, which a float model and its
int8 version share). The model is copied into the folder as model.tflite, the dump's own model.

Quantized tensors (int8, uint8, int16 with a scale and a zero point, per tensor or per axis) are read on
their own grid, `(q - zero_point) * scale` (tflitegraph.Quantization: the exact value rounded once to
float32, as LiteRT's reference DEQUANTIZE), so that an int8 model's tensors compare with the float
model's; dump.json's `quantized` says which were, with the dtype they held and their grid. A quantized
input (ai-edge-quantizer's static recipes leave the input int8) takes real values as the float model
does: they are put on its grid as LiteRT's QUANTIZE would (an input given as integers is taken as
already on it), and written as the model reads them, on its grid.

The network outputs written are those of a second interpreter made as LiteRT's users make it (no
preserved tensors) and run on the same inputs: LiteRT's own result, bit for bit; dump.json says how far
the preserving run's moved (0 where nothing differs). ai-edge-litert is an optional extra (`litert`),
imported inside the functions.
"""
from __future__ import annotations

import os
import shutil
import time
import warnings

import numpy as np

from accuscope.engine.graphs.onnxgraph import need
from accuscope.engine.graphs.tflitegraph import TensorInfo, read_tflite
from accuscope.engine.progress import OnProgress
from accuscope.engine.runs.onnxmodel import feeds_for
from accuscope.engine.runs.ortdump import DumpFolder, DumpReport, Writes, fed, new_dump_folder
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.outputfile import atomic_path
from accuscope.engine.sources.tensor import SourceError

MODEL_COPY = "model.tflite"
_QUANTIZED_KINDS = "iu"  # integer tensors with a grid are quantized; a float tensor's grid (rare) is ignored


def litert_module(purpose: str = "running a .tflite model on LiteRT"):
    """ai_edge_litert.interpreter (the optional extra `litert`), else a SourceError naming the install."""
    return need("ai_edge_litert.interpreter", purpose, extra="litert")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _interpreter(lite, path: str, preserve: bool):
    try:
        with warnings.catch_warnings():  # preserving every tensor warns that it is for debugging: it is
            warnings.simplefilter("ignore", UserWarning)
            return lite.Interpreter(model_path=path, experimental_preserve_all_tensors=preserve)
    except Exception as exc:  # noqa: BLE001 - LiteRT raises ValueError, RuntimeError and its own kinds
        raise SourceError(f"{path}: LiteRT cannot load the model: {_first_line(exc)}") from None


def _invoke(interpreter, feeds: dict[int, np.ndarray], path: str) -> None:
    """Set the inputs (resized where their shape is not the model's), allocate, run once."""
    try:
        for index, arr in feeds.items():
            interpreter.resize_tensor_input(index, list(arr.shape))
        interpreter.allocate_tensors()
        for index, arr in feeds.items():
            interpreter.set_tensor(index, arr)
        interpreter.invoke()
    except Exception as exc:  # noqa: BLE001 - LiteRT raises ValueError and RuntimeError
        raise SourceError(f"{path}: LiteRT cannot run the model: {_first_line(exc)}") from None


def read_tensor(values: np.ndarray, info: TensorInfo) -> tuple[np.ndarray, bool]:
    """A tensor as dumped: an integer tensor with a grid read on it (float32), any other as it is;
    and whether it was quantized."""
    q = info.quantization
    if q is None or values.dtype.kind not in _QUANTIZED_KINDS:
        return values, False
    return q.dequantize(values), True


def _input_grids(tensors: list[TensorInfo], details: list[dict], inputs: dict[str, np.ndarray]) -> dict:
    """The quantized inputs (an int8 model whose input is int8: ai-edge-quantizer's static recipes) by
    tensor index: (their grid, whether they take real values: all but one given as integers, already on
    its grid)."""
    grids = {}
    for d in details:
        info = tensors[d["index"]]
        if info.quantization is not None and info.quantization.axis is None and np.dtype(d["dtype"]).kind in "iu":
            own = inputs.get(info.name)
            grids[d["index"]] = (info.quantization, own is None or np.asarray(own).dtype.kind not in "iu")
    return grids


def input_dims(path) -> list[tuple[str, list | None]]:
    """A .tflite's inputs' (name, dims: None where dynamic), as onnxmodel.feeds_for's `like` takes them."""
    path = user_path(path, "model file")
    tensors = read_tflite(path).tensors
    details = _interpreter(litert_module(), path, preserve=False).get_input_details()
    return [(tensors[d["index"]].name, [int(n) if n >= 0 else None for n in d.get("shape_signature", d["shape"])])
            for d in details]


def dump_litert(model_path, out_dir, inputs: dict[str, np.ndarray] | None = None, *, random_inputs=False,
                seed=0, timestamp: int | None = None, progress: OnProgress | None = None,
                dims: dict[str, int] | None = None, files: Writes | None = None,
                counterpart: dict[str, tuple[np.ndarray, str]] | None = None,
                like: list[tuple[str, list | None]] | None = None) -> DumpReport:
    """Run the .tflite on LiteRT's interpreter with every tensor kept and write every op output as
    `{op}.{index}.{ts}.npy` (quantized ones dequantized), the inputs as `{input}.0.{ts}.npy`,
    model.tflite and dump.json (module doc). Options as ortdump.dump_onnx takes them."""
    start = time.perf_counter()
    lite = litert_module()
    path = user_path(model_path, "model file")
    model = read_tflite(path)
    out = new_dump_folder(out_dir)
    preserving = _interpreter(lite, path, preserve=True)
    details = preserving.get_input_details()
    grids = _input_grids(model.tensors, details, inputs or {})
    specs: list[tuple[str, np.dtype, list | None]] = [
        (model.tensors[d["index"]].name, np.dtype(np.float32 if grids.get(d["index"], (0, False))[1] else d["dtype"]),
         [int(n) if n >= 0 else None for n in d.get("shape_signature", d["shape"])]) for d in details]
    feeds = feeds_for(specs, path, inputs, random_inputs, seed, dims, counterpart, like)
    given = {}
    for d, (name, _, _) in zip(details, specs):
        arr, origin = feeds[name]
        if d["index"] in grids:  # real values put on the input's grid; written as the model reads them
            grid, real = grids[d["index"]]
            given[d["index"]] = grid.quantize(arr, np.dtype(d["dtype"])) if real else arr
            feeds[name] = (grid.dequantize(given[d["index"]]), origin)
        else:
            given[d["index"]] = arr
    own = _interpreter(lite, path, preserve=False)
    _invoke(own, given, path)
    outputs = {d["index"]: own.get_tensor(d["index"]) for d in own.get_output_details()}
    _invoke(preserving, given, path)
    ts = int(time.time() * 1e6) if timestamp is None else int(timestamp)
    report = DumpReport(out)
    report.inputs = {k: tuple(v[0].shape) for k, v in feeds.items()}
    report.casts = {k: o for k, (_, o) in feeds.items() if o.startswith("given as")}
    report.fed = feeds
    index = {t.name: t for t in model.tensors}
    wanted = [(node.name, k, tensor) for node in model.graph.nodes for k, tensor in enumerate(node.outputs) if tensor]
    quantized: dict[str, dict] = {}
    moved = 0.0
    quantized.update((model.tensors[i].name, {"dtype": str(np.dtype(d["dtype"])), **grids[i][0].as_json(),
                                              "input": "real values put on its grid" if grids[i][1] else
                                                       "given on its grid"})
                     for d in details if (i := d["index"]) in grids)
    with DumpFolder(out, ts, [*feeds, *(name for name, _, _ in wanted)], report, files, progress,
                    len(feeds) + len(wanted)) as folder:
        with atomic_path(os.path.join(out, MODEL_COPY)) as tmp:
            shutil.copyfile(path, tmp)
        folder.made.append(MODEL_COPY)
        for name, (arr, _) in feeds.items():
            folder.write(name, 0, name, arr)
        for name, k, tensor in wanted:
            info = index[tensor]
            if info.dtype is None:
                report.skipped.append((tensor, "a string, resource or variant tensor: no numbers to compare"))
                continue
            try:
                values = preserving.get_tensor(info.number)
            except ValueError as exc:  # a tensor LiteRT left unallocated (a delegate's inside)
                report.skipped.append((tensor, f"LiteRT did not keep it: {_first_line(exc)}"))
                continue
            if info.number in outputs:
                mine, values = values, outputs[info.number]
                if mine.shape == values.shape and mine.dtype.kind in "fiu" and mine.size:
                    moved = max(moved, float(np.max(np.abs(mine.astype(np.float64) - values))))
            held = values.dtype
            try:
                values, was = read_tensor(values, info)
            except ValueError as exc:
                report.skipped.append((tensor, f"its quantization does not fit it: {exc}"))
                continue
            if was and info.quantization is not None:
                quantized[tensor] = {"dtype": str(held), **info.quantization.as_json()}
            folder.write(name, k, tensor, values)
        folder.finish({
            "model": os.path.abspath(path),
            "model_copy": MODEL_COPY,
            "runtime": "litert",
            "litert": _version(),
            "preserve_all_tensors": True,
            "network_outputs": "from an interpreter made without preserving tensors (LiteRT's own result); every "
                               "other tensor from one that preserves them all "
                               f"(its network outputs differed from LiteRT's own by up to {moved:.3g})",
            "instrumented_output_difference": moved,
            "quantized": quantized,
            "dequantized_as": "(q - zero_point) * scale, in float64, rounded once to float32",
            **fed(feeds, seed),
            "timestamp": ts,
        })
    report.seconds = time.perf_counter() - start
    return report


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ai-edge-litert")
    except PackageNotFoundError:
        return "unknown"
