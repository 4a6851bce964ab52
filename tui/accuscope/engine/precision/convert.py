"""The conversions a precision search tries: fp16 (onnxconverter-common, `node_block_list`) and
int8 (onnxruntime.quantization, `nodes_to_exclude`; static with a calibration folder of inputs).

The reference is prepared once: weights held in Constant nodes become initializers (the converters
need them there) and every node gets the name accuscope's dumps give it, so the ranking's op names,
the block lists and the written lists all name the same nodes."""
# lazy: engine.precision.simulate
from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.runs.onnxedit import constants_as_initializers
from accuscope.engine.runs.onnxmodel import load_model, node_names
from accuscope.engine.sources.inputfile import not_regular, user_path
from accuscope.engine.sources.npyfile import user_npy, user_npz
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:
    import onnx

TARGETS = ("fp16", "int8")


def float16():
    """onnxconverter-common's float16 converter; a SourceError with the install line where it is
    missing (the [onnx] extra does not bring it)."""
    try:
        from onnxconverter_common import float16 as module
    except ImportError as exc:
        raise SourceError(f"--to fp16 needs onnxconverter-common: pip install onnxconverter-common "
                          f"({type(exc).__name__}: {exc})") from None
    return module


DYNAMIC_INT8 = {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
STATIC_INT8 = {"QuantizeLinear", "QLinearConv", "QLinearMatMul"}


def recognise(model_path) -> str:
    """Which conversion made the ONNX model at `model_path`, from its nodes and weights: "int8"
    (onnxruntime's dynamic quantization), "int8-static" (QuantizeLinear/QLinear ops: calibrated),
    "fp16" (float16 weights or casts to float16), "" (none of these, or not a readable model)."""
    import onnx
    if not_regular(os.fspath(model_path)):  # missing, or a FIFO onnx.load would wait on
        return ""
    try:
        graph = onnx.load(str(model_path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - protobuf raises several kinds on garbage
        return ""
    types = {n.op_type for n in graph.node}
    if types & DYNAMIC_INT8:
        return "int8"
    if types & STATIC_INT8:
        return "int8-static"
    f16 = onnx.TensorProto.FLOAT16
    if any(i.data_type == f16 for i in graph.initializer) or any(
            n.op_type == "Cast" and any(a.name == "to" and a.i == f16 for a in n.attribute) for n in graph.node):
        return "fp16"
    return ""


def as_candidate(reference_path, candidate_path) -> tuple[onnx.ModelProto, str]:
    """(the model of the third side `accuscope run --expected auto` dumps, the candidate's precision as
    `recognise` names it): for fp16 the reference converted as the candidate was; for int8 (static or
    dynamic) the candidate's own quantization simulated in float with its own scales (simulate.py), so
    neither its calibration data nor its quantizer settings need be at hand. SourceError when the
    candidate is none of these."""
    to = recognise(candidate_path)
    if to in ("int8", "int8-static"):
        from accuscope.engine.precision.simulate import simulate
        try:
            return simulate(load_model(candidate_path)), to
        except SourceError as exc:
            raise SourceError(f"--expected auto: {candidate_path}: {exc}") from None
    if to not in TARGETS:
        raise SourceError(f"--expected auto: {candidate_path} is neither an fp16 conversion nor an int8 one from "
                          "onnxruntime's quantizers; give the reference run at the candidate's precision as "
                          "--expected PATH")
    require(to)
    return convert(prepare(reference_path), to, []), to


def require(to: str) -> None:
    """SourceError, before any work, when the converter `to` needs is not installed."""
    if to == "fp16":
        float16()


def prepare(model_path) -> onnx.ModelProto:
    """The reference model as the search converts it (see the module doc); SourceError if unreadable."""
    model = load_model(model_path)
    for node, name in zip(model.graph.node, node_names(model.graph.node)):  # named as in the original's dumps
        node.name = name
    return constants_as_initializers(model)


def candidates(model, to: str, calibration: str | None = None) -> list[str]:
    """The node names, in execution order, whose precision the conversion changes (what a block
    list can name): for fp16 every node but the converter's own default block list; for int8 the
    op types onnxruntime's quantizer handles (dynamic or, with calibration, static)."""
    if to == "fp16":
        skip = set(float16().DEFAULT_OP_BLOCK_LIST) | {"Constant"}
        return [n.name for n in model.graph.node if n.op_type not in skip]
    from onnxruntime.quantization import registry
    types = set(registry.QLinearOpsRegistry if calibration else registry.IntegerOpsRegistry)
    return [n.name for n in model.graph.node if n.op_type in types]


class CalibrationReader:
    """onnxruntime.quantization's calibration data: one sample per .npy or .npz file of a folder
    (an .npz holds every input by name; an .npy is the model's only input)."""

    def __init__(self, folder: str, input_names: list[str]):
        self.samples = calibration_samples(folder, input_names)
        self.position = 0

    def get_next(self):
        if self.position >= len(self.samples):
            return None
        self.position += 1
        return self.samples[self.position - 1]

    def rewind(self):
        self.position = 0


def calibration_samples(folder: str, input_names: list[str]) -> list[dict[str, np.ndarray]]:
    root = Path(user_path(folder, "calibration folder", folder=True))
    samples = []
    for f in sorted(root.iterdir()):
        if f.suffix not in (".npy", ".npz"):
            continue
        if f.suffix == ".npy":
            if len(input_names) != 1:
                raise SourceError(f"{f}: an .npy sample fits a model with one input; this one has "
                                  f"{len(input_names)}: give .npz files keyed by input name")
            samples.append({input_names[0]: user_npy(str(f), "calibration sample")})
        else:
            arrays = user_npz(str(f), "calibration sample")
            missing = sorted(set(input_names) - set(arrays))
            if missing:
                raise SourceError(f"{f}: no array for input(s) {', '.join(missing)}")
            samples.append({k: arrays[k] for k in input_names})
    if not samples:
        raise SourceError(f"--calibration {folder}: holds no .npy or .npz sample")
    return samples


def convert(model, to: str, keep: list[str], calibration: str | None = None) -> onnx.ModelProto:
    """`model` converted to `to` with the nodes named in `keep` left in fp32 (a new ModelProto)."""
    import onnx
    if to == "fp16":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it warns about every value it truncates
            return float16().convert_float_to_float16(model, keep_io_types=True, node_block_list=list(keep))
    if to != "int8":
        raise SourceError(f"unknown precision {to!r} (choose {', '.join(TARGETS)})")
    with tempfile.TemporaryDirectory(prefix="accuscope-q") as tmp:
        src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "out.onnx")
        onnx.save(model, src)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # the quantizer logs advice about pre-processing on every call
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _quantize(src, dst, model, keep, calibration)
        finally:
            root.setLevel(level)
        return onnx.load(dst)


def _quantize(src: str, dst: str, model, keep: list[str], calibration: str | None) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic, quantize_static
    if calibration:
        inits = {i.name for i in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        quantize_static(src, dst, CalibrationReader(calibration, names), nodes_to_exclude=list(keep),
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    else:
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, nodes_to_exclude=list(keep))
