"""Shared fixtures: real pretrained ONNX models taken from a PyPI wheel (downloaded once, cached)."""
from __future__ import annotations

pytest_plugins = ["appkit"]  # the demo workspace fixtures of the app tests

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"  # in the repository: a fresh clone needs nothing beside it
ASCEND_FIXTURES = FIXTURES / "ascend-dump"
RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
CACHE = Path(os.environ.get("ACCUSCOPE_TEST_CACHE", Path.home() / ".cache" / "accuscope-tests"))


def _rapidocr_models() -> Path:
    """The PP-OCR ONNX models shipped in rapidocr-onnxruntime's wheel, fetched with pip."""
    target = CACHE / "rapidocr-models"
    if (target / "ch_ppocr_mobile_v2.0_cls_infer.onnx").exists():
        return target
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), RAPIDOCR],
                   check=True, capture_output=True)
    wheel = next(wheels.glob("rapidocr_onnxruntime-*.whl"))
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.startswith("rapidocr_onnxruntime/models/") and info.filename.endswith(".onnx"):
                (target / Path(info.filename).name).write_bytes(zf.read(info))
    return target


@pytest.fixture(scope="session")
def rapidocr_models() -> Path:
    return _rapidocr_models()


@pytest.fixture(scope="session")
def cls_model(rapidocr_models) -> Path:
    """PP-OCR direction classifier: 566 nodes, weights in Constant nodes, unnamed nodes, 0.6 MB."""
    return rapidocr_models / "ch_ppocr_mobile_v2.0_cls_infer.onnx"


@pytest.fixture(scope="session")
def det_model(rapidocr_models) -> Path:
    """PP-OCRv4 text detector: 672 nodes, convolutions with real 4-D activations, 4.7 MB."""
    return rapidocr_models / "ch_PP-OCRv4_det_infer.onnx"


def text_image_nchw() -> np.ndarray:
    """A 320x96 RGB image of two lines of text drawn with Pillow's built-in font (one black, one blue),
    normalised as PP-OCR's detector takes it ((x / 255 - 0.5) / 0.5), NCHW float32."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (320, 96), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    draw.text((8, 20), "accuracy 42 hello", fill=(0, 0, 0), font=ImageFont.load_default())
    draw.text((8, 60), "the quick brown fox", fill=(20, 20, 200), font=ImageFont.load_default())
    return ((np.asarray(img, np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


def cls_with_planted_fault(cls_model: Path, root: Path, op: str, breaker):
    """PP-OCR cls run by onnxruntime into root/golden, and an Ascend-style fp16 NPU dump of it in
    root/npu whose values are the golden ones except op's output 0, replaced by breaker(array).
    Returns npusim's Simulation (model_json, ...)."""
    import shutil

    import numpy as np

    from accuscope.engine.demo.npusim import simulate
    from accuscope.engine.graphs.modelfile import load_graph
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.sources.golden import open_golden

    x = np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32)
    dump_onnx(cls_model, root / "golden", {"x": x}, timestamp=1700000000000000)
    shutil.copytree(root / "golden", root / "npu-values")
    bad = root / "npu-values" / f"{op}.0.1700000000000000.npy"
    np.save(bad, breaker(np.load(bad)))
    return simulate(load_graph(cls_model), open_golden(root / "npu-values"), str(root / "npu"), model_name="cls")
