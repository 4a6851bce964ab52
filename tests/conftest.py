"""Shared fixtures: real pretrained ONNX models taken from a PyPI wheel (downloaded once, cached)."""
from __future__ import annotations

pytest_plugins = ["appkit"]  # the demo workspace fixtures of the app tests

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
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
