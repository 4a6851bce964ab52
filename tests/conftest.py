"""Shared fixtures: real pretrained ONNX models taken from a PyPI wheel (downloaded once, cached)."""
from __future__ import annotations

pytest_plugins = ["appkit"]  # the demo workspace fixtures of the app tests

import gc
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.data import CACHE, RAPIDOCR
from support.dialects import cls_run  # noqa: F401 - fixtures every folder uses
from support.hostile import full_disk  # noqa: F401
from support.kernel import loops  # noqa: F401 - the kernel's loops, each in turn
from support.ranks import tree  # noqa: F401


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    """Each test leaves the cyclic collector as it found it: the app freezes what its start-up made
    (app.py's _collect_again, when a comparison's gcpause holds the collector off at its first frame),
    and in a test process those objects would stay frozen for every later test of the worker (a frozen
    count where gcpause's test expects none)."""
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    yield
    if gc.get_freeze_count() > frozen and not frozen:
        gc.unfreeze()
    if enabled and not gc.isenabled():
        gc.enable()


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


@pytest.fixture(scope="module")
def cls_cliff(cls_model, tmp_path_factory):
    """(root, fp32 model, its fp16 conversion, the planted BatchNormalization, input)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnxconverter_common import float16

    from accuscope.engine.runs.onnxedit import constants_as_initializers
    root = tmp_path_factory.mktemp("cliff")
    m = constants_as_initializers(onnx.load(str(cls_model)))
    inits = {t.name: t for t in m.graph.initializer}
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"][12]
    k = 1e4  # variance * k^2 and scale * k: the same function in fp32, far beyond float16 in fp16
    for name, f in ((bn.input[4], lambda v: (v + 1e-5) * k * k - 1e-5), (bn.input[1], lambda s: s * k)):
        a = numpy_helper.to_array(inits[name])
        inits[name].CopyFrom(numpy_helper.from_array(f(a).astype(a.dtype), name))
    onnx.save(m, str(root / "ref.onnx"))
    with pytest.warns(UserWarning):  # the converter says it truncates
        onnx.save(float16.convert_float_to_float16(m, keep_io_types=True), str(root / "fp16.onnx"))
    x = np.random.default_rng(5).standard_normal((1, 3, 48, 192)).astype(np.float32)
    np.save(root / "x.npy", x)
    return root, root / "ref.onnx", root / "fp16.onnx", bn.name, x
