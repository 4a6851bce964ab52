"""The demo workspace: finished comparison tasks of small real networks with planted faults.

Everything is built in code, deterministically, in a couple of seconds: ONNX models made with
onnx.helper (weights from fixed seeds), golden dumps by onnxruntime in fp32 through the same code
as `accuscope dump`, and Ascend-style NPU dumps written by `npusim` from an onnxruntime run of a
float16 emulation of the model (every weight and every op output rounded to float16, so errors
propagate downstream as they do on the device), then compared and saved as task folders.

    WORKSPACE/<task>/model/<net>.onnx       the framework model
    WORKSPACE/<task>/model/<net>.json       its offline model as `atc --mode=1` renders it
    WORKSPACE/<task>/golden/                onnxruntime fp32 dump (MindStudio npy naming)
    WORKSPACE/<task>/npu/dump/<time>/0/<net>/1/0/   Ascend dump files (fp16, NC1HWC0, fused ops)
    WORKSPACE/<task>/task.json, result_*.csv, result.npz, README.md

The dumps and models are the same bytes on every build, wherever the workspace is: fixed time
stamps, no absolute paths inside them. task.json names the dumps and models by their absolute
paths and relative to the task folder (the relative form read first: a copied workspace reads its own
files), the framework model relative only, and the time they were saved.

Tasks:
- `tinynet-fp16-int4` (the main one): conv/BN/ReLU blocks with a residual Add, then an attention
  block whose LayerNorm is decomposed the way exporters write it. On the NPU side one convolution
  runs with per-tensor int4-like weights (its own error is large, the ops after it inherit it), and
  one channel of the activations is large ("massive activations"), so the LayerNorm's variance
  (x - mean)^2 exceeds the float16 maximum 65504 and becomes inf.
- `tinycnn-bgr-input`: a CNN whose network input was fed in BGR instead of RGB channel order on the
  NPU side (AIPP's channel swap or cv2.imread left unconverted): wrong from the very first op.
- `llm-msprobe-4ranks`: msprobe tensor dumps (4 ranks x 2 steps, `msprobesim`) of a small transformer
  in bfloat16 against float32, one rank's attention scores missing their scale.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from accuscope import __version__
from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.demo import msprobesim
from accuscope.engine.demo.npusim import simulate
from accuscope.engine.progress import OnProgress, Reporter
from accuscope.engine.runs.onnxmodel import onnx_modules
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import TASK_JSON, save_task
from accuscope.engine.tasks.taskdoc import spec_fields

MARKER = ".accuscope-demo"  # in every task folder the demo made: only those are ever replaced
TIMESTAMP_US = 1717236000000000  # 2024-06-01 10:00:00 UTC: every time stamp inside the dumps
DUMP_TIME_DIR = "20240601100000"
OPSET = 17
INPUT = "image"
IMAGE_SIZE = 32
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)  # ImageNet RGB normalization
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
QUANTIZED_CONV = "/block1/conv1/Conv"
QUANTIZED_BITS = 4
OUTLIER_CHANNEL = 7
MSPROBE_FAULT_RANK = 2


@dataclass(frozen=True)
class DemoTask:
    name: str
    title: str
    model_name: str
    age: int  # seconds before the build time: the main task is listed first
    story: tuple[str, ...]
    network: str  # "attention" or "cnn"
    seed: int
    quantize: tuple[str, ...] = ()  # conv node names whose weights the NPU side quantizes
    bgr: bool = False  # NPU side fed BGR instead of RGB
    onnx_only: bool = False  # the side under test is the float16 ONNX model itself, run by onnxruntime
    expected: bool = False  # a third side: the model at float16 without the planted quantization (--expected)


MAIN = DemoTask(
    name="tinynet-fp16-int4",
    title="fp16 + int4 deployment of a conv/attention net: two planted faults",
    model_name="tinynet", age=0, network="attention", seed=2024,
    quantize=(QUANTIZED_CONV,), expected=True,
    story=(
        f"The NPU runs the network in float16, with the weights of `{QUANTIZED_CONV}` quantized per "
        f"tensor to {QUANTIZED_BITS} bits (an outlier weight makes the scale coarse for all others).",
        "Fault 1: the first failing row in execution order is that convolution's fused device op "
        "(Conv+BatchNorm+ReLU): its input agrees with the golden data, its output does not. The ops "
        "after it only inherit the error: their inputs are as wrong as their outputs.",
        f"Fault 2: channel {OUTLIER_CHANNEL} of the activations entering the attention block is large "
        "(a few hundred, like the 'massive activations' of real transformers). In the LayerNorm "
        "(ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add) the square (x - mean)^2 "
        "exceeds 65504, the float16 maximum: the Pow output holds inf (see the NPU inf/NaN count), "
        "the variance, eps sum and Sqrt are inf, and Div turns those tokens into zeros.",
        "Which one breaks the output: the overflow. Each fault alone (re-run on the fp32 model): the int4 "
        "conv leaves the output at cos 0.9995, the float16 overflow takes it to 0.949. The advisor ranks them "
        "so, by how far each op's own error reaches the outputs, not by position.",
        "The third side (`expected/`, compared with --expected): the same network at float16 without the "
        "quantized conv, the framework at the device's precision. The overflow is float16's own (the float16 run "
        "overflows too: the output's error is 0.99 times what float16 itself gives, the verdict's cause); the "
        "conv's error is hundreds of times float16's: the quantization, not the precision (beyond_expected).",
        "Fixes a user would try: quantize that conv per channel or keep it in int8/fp16; keep the "
        "LayerNorm in float32 (mixed precision) or fuse it into one LayerNorm op.",
    ),
)
BGR = DemoTask(
    name="tinycnn-bgr-input",
    title="input fed as BGR instead of RGB on the NPU side",
    model_name="tinycnn", age=60, network="cnn", seed=7, bgr=True,
    story=(
        "The NPU side was fed the image with its channels in BGR order (cv2.imread, or AIPP's "
        "rbuv_swap_switch set wrong) while the model was trained on RGB.",
        "Everything disagrees from the first convolution on: its input row (the network input, "
        "traced back through the device-only TransData) is already the first failing row. When the "
        "very first compared tensor is wrong, check the preprocessing before suspecting any operator.",
    ),
)
ONNX_FP16 = DemoTask(
    name="tinynet-onnx-fp16",
    title="an ONNX model against its float16 version: no accelerator format involved",
    model_name="tinynet", age=120, network="attention", seed=2024, onnx_only=True,
    story=(
        "Both sides are ONNX models run by onnxruntime, as `accuscope run REF.onnx CAND.onnx` does: the "
        "fp32 model, and its float16 conversion (float16 weights and activations, a Cast at the network "
        "input and output, as onnxconverter-common's keep_io_types makes). The dumps are npy folders paired "
        "by ONNX tensor names.",
        f"Planted: channel {OUTLIER_CHANNEL} of the activations entering the attention block is large, so "
        "the decomposed LayerNorm's (x - mean)^2 exceeds 65504, the float16 maximum: the Pow output holds inf. "
        "onnxruntime's float16 ReduceMean after it accumulates in float32, so the overflow stays local and the "
        "network output still agrees: a deviation to report as local, with its (absent) effect on the output.",
        "The two Casts of the float16 model have no counterpart in the fp32 model: they are listed as "
        "NPU-only, not as unpaired. Fix a user would try: keep the LayerNorm in float32 (a mixed-precision "
        "conversion with the norm's nodes on the block list).",
    ),
)
MSPROBE = DemoTask(
    name="llm-msprobe-4ranks",
    title="a training step dumped by msprobe on 4 ranks: one rank's attention kernel is wrong",
    model_name="tinyformer", age=180, network="msprobe", seed=2026,
    story=(
        "Both sides are msprobe tensor dumps (dump.json, construct.json, stack.json, dump_tensor_data/*.npy) of "
        "a small two-block transformer, 4 ranks x 2 steps (data parallel: same weights, each rank its own "
        "batch). The side under test runs in bfloat16 (every call's output rounded): small differences "
        "everywhere, all within the thresholds.",
        f"Planted: on rank {MSPROBE_FAULT_RANK} only, the second block's attention scores miss their 1/sqrt(d) "
        f"scale (`{msprobesim.FAULT_CALL}`, a fused-attention kernel variant picked on one device). Its "
        "inputs agree with the reference, its output is 4x off: the advisor names it as the first call "
        "that diverges; every later call of that rank inherits it.",
        f"This task compares step 1 of rank {MSPROBE_FAULT_RANK}; the others agree: `accuscope compare "
        "--npu npu --golden golden --step 1 --rank 0 --out r0`. Statistics first: add --stats-only "
        "(dump.json only, no tensor file read) and the same call is flagged by msprobe's Max/Min/Mean/Norm "
        "rule.",
    ),
)
TASKS = (MAIN, BGR, ONNX_FP16, MSPROBE)


def default_workspace() -> Path:
    """`$XDG_DATA_HOME/accuscope/demo`, else `~/.local/share/accuscope/demo`."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "accuscope" / "demo"


def build_workspace(root: str | os.PathLike, progress: OnProgress | None = None) -> list[Path]:
    """Build (or rebuild) every demo task under root; returns the task folders, main task first.
    `progress` names each step (not counted: `what` only).

    Only folders the demo made itself (they hold a `.accuscope-demo` marker) are replaced; a
    foreign folder with a demo task's name is a SourceError, and other folders are left alone.
    """
    onnx_modules()  # SourceError with the pip hint when onnx/onnxruntime are missing
    root = Path(root).expanduser().absolute()
    if root.exists() and not root.is_dir():
        raise SourceError(f"{root}: not a folder; choose another --workspace")
    for task in TASKS:  # refuse before building anything
        _check_replaceable(root / task.name)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{root}: cannot create the workspace ({exc.strerror or exc})") from None
    return [build_task(task, root / task.name, progress) for task in TASKS]


def build_task(task: DemoTask, folder: Path, progress: OnProgress | None = None) -> Path:
    say = Reporter(progress)
    _check_replaceable(folder)
    if folder.exists():
        shutil.rmtree(folder)
    for sub in ("model", "golden", "npu"):
        (folder / sub).mkdir(parents=True)
    (folder / MARKER).write_text("made by `accuscope demo`; rebuilt (replaced) by it\n", encoding="utf-8")
    if task.network == "msprobe":
        spec, model_path = _msprobe_dumps(task, folder, say), None
    else:
        spec, model_path = _onnx_task(task, folder, say)

    say(f"{task.name}: comparing")
    plan = engine.plan(spec)
    table = engine.execute(plan, workers=1)
    assert table is not None  # execute returns None only when cancelled, and a demo passes no cancel
    meta = {**spec_fields(spec, folder), "algorithms": plan.metrics, "tool": f"accuscope {__version__}",
            "created": (datetime.now() - timedelta(seconds=task.age)).isoformat(timespec="seconds"), "workers": 1,
            "problems": [str(p) for p in plan.problems], **plan.sides_fields(),
            "coverage": plan.coverage.to_meta(),
            "demo": {"title": task.title, "story": list(task.story),
                     "framework_model": os.path.relpath(model_path, folder) if model_path else None}}
    save_task(folder, meta, table, spec.thresholds, {"with_op_sequence": False, "npu_is_npy": task.onnx_only,
                                                     "golden_is_npy": plan.golden.kind == kinds.NPY})
    (folder / "README.md").write_text(_readme(task), encoding="utf-8")
    return folder


def _onnx_task(task: DemoTask, folder: Path, say) -> tuple[CompareSpec, Path]:
    """A model built with onnx.helper, its onnxruntime fp32 golden dump and the side under test."""
    onnx = onnx_modules()[0]
    say(f"{task.name}: building the model")
    model = build_model(task.network, task.seed)
    model_path = folder / "model" / f"{task.model_name}.onnx"
    onnx.save(model, str(model_path))
    image = demo_image()

    say(f"{task.name}: golden dump (onnxruntime, fp32)")
    dump_onnx(model_path, folder / "golden", {INPUT: normalize(image)}, timestamp=TIMESTAMP_US)
    _relative_model_path(folder / "golden" / "dump.json", f"../model/{model_path.name}")

    if task.onnx_only:
        spec = _onnx_candidate(task, folder, model, image, say)
    else:
        spec = _npu_dump(task, folder, model, model_path, image, say)
    return spec, model_path


def _msprobe_dumps(task: DemoTask, folder: Path, say) -> CompareSpec:
    """Reference and side under test as msprobe tensor dumps of every rank and step (msprobesim)."""
    say(f"{task.name}: msprobe dumps, 4 ranks x 2 steps")
    for side in ("model", "golden", "npu"):
        shutil.rmtree(folder / side, ignore_errors=True)
    msprobesim.write(str(folder / "golden"), seed=task.seed)
    msprobesim.write(str(folder / "npu"), seed=task.seed, fault_rank=MSPROBE_FAULT_RANK)
    return CompareSpec(str(folder / "npu"), str(folder / "golden"), thresholds=Thresholds(), step="1",
                              rank=str(MSPROBE_FAULT_RANK))


def _npu_dump(task: DemoTask, folder: Path, model, model_path: Path, image, say) -> CompareSpec:
    """An Ascend-style dump of the float16 emulation (npusim), with its offline-model JSON."""
    say(f"{task.name}: NPU dump (float16{', ' + str(QUANTIZED_BITS) + '-bit conv' if task.quantize else ''}"
        f"{', BGR input' if task.bgr else ''})")
    npu_input = normalize(image[:, :, ::-1] if task.bgr else image).astype(np.float16).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="accuscope-demo-") as tmp:
        emulated = Path(tmp) / "npu.onnx"
        onnx_modules()[0].save(float16_emulation(model, task.quantize), str(emulated))
        dump_onnx(emulated, Path(tmp) / "values", {INPUT: npu_input}, timestamp=TIMESTAMP_US)
        with np.errstate(over="ignore"):  # values beyond 65504 become inf in float16: the point
            sim = simulate(load_graph(model_path), open_golden(Path(tmp) / "values"), str(folder / "npu"),
                           model_name=task.model_name, start_time=TIMESTAMP_US, dump_time_dir=DUMP_TIME_DIR,
                           output_cast=True)
    om_json = folder / "model" / f"{task.model_name}.json"
    os.replace(sim.model_json, om_json)
    expected = None
    if task.expected:  # the framework at the device's precision: float16, no quantized conv
        say(f"{task.name}: the model at float16 (the third side)")
        with tempfile.TemporaryDirectory(prefix="accuscope-demo-") as tmp:
            at_fp16 = Path(tmp) / "fp16.onnx"
            onnx_modules()[0].save(float16_emulation(model), str(at_fp16))
            with np.errstate(over="ignore"):
                dump_onnx(at_fp16, folder / "expected", {INPUT: npu_input}, timestamp=TIMESTAMP_US)
                for stored in (folder / "expected").glob("*.npy"):  # each op's output as float16 holds it, as
                    values = np.load(stored, allow_pickle=False)   # the device stores it (npusim's rounding)
                    if values.dtype == np.float32:
                        np.save(stored, values.astype(np.float16).astype(np.float32))
        expected = str(folder / "expected")
    return CompareSpec(str(folder / "npu"), str(folder / "golden"), model=str(om_json), thresholds=Thresholds(),
                              expected=expected)


def _onnx_candidate(task: DemoTask, folder: Path, model, image, say) -> CompareSpec:
    """The float16 version as an ONNX model of its own, dumped by onnxruntime like the reference."""
    say(f"{task.name}: float16 model dump (onnxruntime)")
    candidate = folder / "model" / f"{task.model_name}-fp16.onnx"
    onnx_modules()[0].save(float16_model(model), str(candidate))
    shutil.rmtree(folder / "npu")
    with np.errstate(over="ignore"):
        dump_onnx(candidate, folder / "npu", {INPUT: normalize(image)}, timestamp=TIMESTAMP_US)
    _relative_model_path(folder / "npu" / "dump.json", f"../model/{candidate.name}")
    return CompareSpec(str(folder / "npu"), str(folder / "golden"), thresholds=Thresholds())


def _check_replaceable(folder: Path) -> None:
    if folder.exists() and not (folder / MARKER).is_file():
        raise SourceError(f"{folder}: exists and was not made by `accuscope demo`; choose another --workspace")


def _relative_model_path(dump_json: Path, relative: str) -> None:
    """dump.json records the model's absolute path: make it relative, so the bytes do not depend
    on where the workspace is."""
    doc = json.loads(dump_json.read_text(encoding="utf-8"))
    doc["model"] = relative
    with open(dump_json, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)


def _readme(task: DemoTask) -> str:
    lines = [f"# {task.name}: {task.title}", ""]
    lines += [f"- {text}" for text in task.story]
    npu = ("`npu/` the onnxruntime dump of the float16 model (`model/*-fp16.onnx`)" if task.onnx_only else
           "`npu/` the Ascend dump")
    files = (f"Files: `golden/` and `npu/` msprobe dumps (step{{0,1}}/rank{{0..3}}/), `result_*.csv` the result, "
             f"`{TASK_JSON}` what was compared." if task.network == "msprobe" else
             "Files: `model/` the ONNX model and its offline-model JSON (fusion attributes), `golden/` the "
             f"onnxruntime fp32 dump, {npu}, `result_*.csv` the MindStudio-style result, "
             f"`{TASK_JSON}` what was compared.")
    lines += ["", files, "",
              "Rebuilt by `accuscope demo`, which replaces this folder.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ the input image


def demo_image() -> np.ndarray:
    """A small RGB uint8 scene (sky, sun, red house, grass): channels differ, as in photos."""
    n = IMAGE_SIZE
    rng = np.random.default_rng(1234)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32)
    img = np.zeros((n, n, 3), dtype=np.float32)
    t = y / n
    img[..., 0], img[..., 1], img[..., 2] = 90 + 80 * t, 150 + 60 * t, 250 - 30 * t  # sky
    sun = (y - 6) ** 2 + (x - 25) ** 2 < 16
    img[sun] = (255, 215, 70)
    grass = y >= 22
    img[grass] = np.stack([50 + 0 * y, 140 + 20 * np.sin(x / 2), 45 + 0 * y], axis=-1)[grass]
    house = (y >= 13) & (y < 26) & (x >= 4) & (x < 15)
    img[house] = (190, 45, 40)
    roof = (y >= 7) & (y < 13) & (np.abs(x - 9.5) <= (y - 6.5))
    img[roof] = (110, 60, 40)
    img += rng.normal(0, 6, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def normalize(image: np.ndarray) -> np.ndarray:
    """HWC uint8 -> NCHW float32 with ImageNet mean/std (RGB order assumed)."""
    x = (image.astype(np.float32) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)


# ------------------------------------------------------------------ the networks


class _Builder:
    """Nodes named the way PyTorch's exporter names them (`/block1/conv1/Conv`), weights as
    initializers named like state-dict keys."""

    def __init__(self, seed: int):
        import onnx
        from onnx import helper, numpy_helper
        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []

    def weight(self, name: str, value) -> str:
        value = np.asarray(value)
        if value.dtype.kind == "f":
            value = value.astype(np.float32)
        self.inits.append(self.numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, name: str, inputs: list[str], **attrs) -> str:
        out = f"{name}_output_0"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def conv_bn(self, x: str, scope: str, conv: str, bn: str, cin: int, cout: int, stride: int = 1,
                relu: str | None = None, gain: dict[int, tuple[float, float]] | None = None,
                outlier: float = 0.0) -> str:
        w = self.rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * np.sqrt(2.0 / (cin * 9))
        if outlier:  # one weight `outlier` times the largest, as trained convs often have
            w.reshape(-1)[int(np.argmax(np.abs(w)))] *= outlier
        y = self.op("Conv", f"/{scope}/{conv}/Conv", [x, self.weight(f"{scope}.{conv}.weight", w)],
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
        gamma = self.rng.uniform(0.8, 1.2, cout).astype(np.float32)
        beta = self.rng.normal(0.0, 0.1, cout).astype(np.float32)
        mean = self.rng.normal(0.0, 0.1, cout).astype(np.float32)
        var = self.rng.uniform(0.8, 1.5, cout).astype(np.float32)
        for channel, (g, b) in (gain or {}).items():
            gamma[channel], beta[channel] = g, b
        p = f"{scope}.{bn}"
        y = self.op("BatchNormalization", f"/{scope}/{bn}/BatchNormalization",
                    [y, self.weight(f"{p}.weight", gamma), self.weight(f"{p}.bias", beta),
                     self.weight(f"{p}.running_mean", mean), self.weight(f"{p}.running_var", var)], epsilon=1e-5)
        return self.op("Relu", f"/{scope}/{relu}/Relu", [y]) if relu else y

    def layer_norm(self, x: str, scope: str, dim: int) -> str:
        """LayerNorm over the last axis, as torch.onnx exports it below opset 17."""
        s = f"/{scope}"
        mean = self.op("ReduceMean", f"{s}/ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", f"{s}/Sub", [x, mean])
        sq = self.op("Pow", f"{s}/Pow", [d, self.weight(f"{s}/Constant_output_0", np.array(2.0, np.float32))])
        var = self.op("ReduceMean", f"{s}/ReduceMean_1", [sq], axes=[-1], keepdims=1)
        var = self.op("Add", f"{s}/Add", [var, self.weight(f"{s}/Constant_1_output_0", np.array(1e-5, np.float32))])
        std = self.op("Sqrt", f"{s}/Sqrt", [var])
        y = self.op("Div", f"{s}/Div", [d, std])
        gamma = 1.0 + self.rng.normal(0, 0.1, dim).astype(np.float32)
        beta = self.rng.normal(0, 0.1, dim).astype(np.float32)
        y = self.op("Mul", f"{s}/Mul", [y, self.weight(f"{scope.replace('/', '.')}.weight", gamma)])
        return self.op("Add", f"{s}/Add_1", [y, self.weight(f"{scope.replace('/', '.')}.bias", beta)])

    def linear(self, x: str, name: str, cin: int, cout: int) -> str:
        w = self.rng.standard_normal((cin, cout)).astype(np.float32) / np.sqrt(cin)
        return self.op("MatMul", f"/{name.replace('.', '/')}/MatMul", [x, self.weight(f"{name}.weight", w)])

    def model(self, name: str, output: str, shape: list[int]):
        h, T = self.helper, self.onnx.TensorProto
        image = h.make_tensor_value_info(INPUT, T.FLOAT, [1, 3, IMAGE_SIZE, IMAGE_SIZE])
        graph = h.make_graph(self.nodes, name, [image], [h.make_tensor_value_info(output, T.FLOAT, shape)], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="accuscope-demo",
                             producer_version=__version__)
        model.ir_version = 8  # what onnxruntime releases of the last years all read
        self.onnx.checker.check_model(model)
        return model


def build_model(network: str, seed: int):
    """`attention`: 36 nodes; `cnn`: 16 nodes. Same seed, same bytes."""
    b = _Builder(seed)
    x = b.conv_bn(INPUT, "stem", "conv", "bn", 3, 16, relu="relu")
    y = b.conv_bn(x, "block1", "conv1", "bn1", 16, 16, relu="relu1", outlier=2.0)
    y = b.conv_bn(y, "block1", "conv2", "bn2", 16, 16)
    x = b.op("Relu", "/block1/relu2/Relu", [b.op("Add", "/block1/Add", [y, x])])
    if network == "cnn":
        x = b.conv_bn(x, "down", "conv", "bn", 16, 32, stride=2, relu="relu")
        x = b.op("GlobalAveragePool", "/pool/GlobalAveragePool", [x])
        x = b.op("Flatten", "/Flatten", [x], axis=1)
        return b.model("tinycnn", _head(b, x), [1, 10])
    # One channel with large activations (a few hundred), as transformers' "massive activations".
    x = b.conv_bn(x, "down", "conv", "bn", 16, 32, stride=2, relu="relu", gain={OUTLIER_CHANNEL: (45.0, 250.0)})
    x = b.op("Reshape", "/tokens/Reshape", [x, b.weight("/tokens/Constant_output_0", np.array([1, 32, -1], np.int64))])
    t = b.op("Transpose", "/tokens/Transpose", [x], perm=[0, 2, 1])  # (1, 256 tokens, 32)
    n = b.layer_norm(t, "attn/norm", 32)
    q, k, v = (b.linear(n, f"attn.{p}", 32, 32) for p in ("q", "k", "v"))
    kt = b.op("Transpose", "/attn/Transpose", [k], perm=[0, 2, 1])
    s = b.op("MatMul", "/attn/MatMul", [q, kt])
    s = b.op("Mul", "/attn/Mul", [s, b.weight("/attn/Constant_output_0", np.array(32 ** -0.5, np.float32))])
    a = b.op("Softmax", "/attn/Softmax", [s], axis=-1)
    a = b.op("MatMul", "/attn/MatMul_1", [a, v])
    a = b.linear(a, "attn.proj", 32, 32)
    t = b.op("Add", "/attn/Add", [t, a])
    x = b.op("ReduceMean", "/head/ReduceMean", [t], axes=[1], keepdims=0)  # (1, 32)
    return b.model("tinynet", _head(b, x, quiet_channel=OUTLIER_CHANNEL), [1, 10])


def _head(b: _Builder, x: str, quiet_channel: int | None = None) -> str:
    cin = 32
    w = b.rng.standard_normal((10, cin)).astype(np.float32) / np.sqrt(cin)
    if quiet_channel is not None:  # trained heads learn to ignore a massive, near-constant channel
        w[:, quiet_channel] *= 0.02
    bias = b.rng.normal(0, 0.1, 10).astype(np.float32)
    return b.op("Gemm", "/head/fc/Gemm", [x, b.weight("head.fc.weight", w), b.weight("head.fc.bias", bias)],
                transB=1)


# ------------------------------------------------------------------ what the device computes


def quantize_per_tensor(w: np.ndarray, bits: int = QUANTIZED_BITS) -> np.ndarray:
    """Symmetric per-tensor fake quantization: one scale from the largest |w| for all weights."""
    top = 2 ** (bits - 1) - 1
    scale = float(np.abs(w).max()) / top
    return (np.clip(np.rint(w / scale), -top - 1, top) * scale).astype(w.dtype)


def float16_model(model):
    """The model converted to float16 the way converters do it (onnxconverter-common with
    keep_io_types): float weights stored as float16, the network computing in float16, one Cast
    after each float input and one before each output, so the interface stays float32. Node and
    tensor names are kept (the output's producer writes `{name}_fp16`, the Cast the name)."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for k, init in enumerate(g.initializer):
        w = numpy_helper.to_array(init)
        if w.dtype == np.float32:
            g.initializer[k].CopyFrom(numpy_helper.from_array(w.astype(np.float16), init.name))
    head, renamed = [], {}
    for k, inp in enumerate(g.input):
        if inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            renamed[inp.name] = f"{inp.name}_fp16"
            head.append(helper.make_node("Cast", [inp.name], [renamed[inp.name]], name=f"graph_input_cast_{k}",
                                         to=onnx.TensorProto.FLOAT16))
    outputs = {o.name for o in g.output}
    tail: list[onnx.NodeProto] = []
    for node in g.node:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
        for i, name in enumerate(node.output):
            if name in outputs:
                node.output[i] = f"{name}_fp16"
                tail.append(helper.make_node("Cast", [node.output[i]], [name], name=f"graph_output_cast_{len(tail)}",
                                             to=onnx.TensorProto.FLOAT))
    nodes = head + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    g.ClearField("value_info")
    return m


def float16_emulation(model, quantize: tuple[str, ...] = ()):
    """A copy of the model computing what a float16 device computes: float weights rounded to
    float16 (those of the convs named in `quantize` first fake-quantized per tensor), every op's
    float output rounded to float16 (a Cast pair after it, so a value beyond 65504 becomes inf and
    the next ops read it). Each op computes in float32 from float16 inputs, as the device's cube
    and vector units accumulate in float32. Node names are kept; each node's raw output is
    `{tensor}/fp32`, the rounded one keeps the tensor's name (npusim rounds the raw one when it
    stores it as float16)."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    quantized = {n.input[1] for n in g.node if n.name in quantize and n.op_type == "Conv"}
    for k, init in enumerate(g.initializer):
        w = numpy_helper.to_array(init)
        if w.dtype != np.float32:
            continue
        if init.name in quantized:
            w = quantize_per_tensor(w)
        g.initializer[k].CopyFrom(numpy_helper.from_array(w.astype(np.float16).astype(np.float32), init.name))
    nodes = []
    for node in g.node:
        nodes.append(node)
        for i, out in enumerate(list(node.output)):
            node.output[i] = f"{out}/fp32"
            nodes.append(helper.make_node("Cast", [f"{out}/fp32"], [f"{out}/fp16"], name=f"{node.name}/to_fp16_{i}",
                                          to=onnx.TensorProto.FLOAT16))
            nodes.append(helper.make_node("Cast", [f"{out}/fp16"], [out], name=f"{node.name}/from_fp16_{i}",
                                          to=onnx.TensorProto.FLOAT))
    del g.node[:]
    g.node.extend(nodes)
    return m
