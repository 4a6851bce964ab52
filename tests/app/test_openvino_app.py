"""An OpenVINO `run` task in the app (Pilot, text on screen, an SVG snapshot at 80x24): PP-OCR cls's ONNX model
on onnxruntime against its fp32 IR (`ov.convert_model`, as a user converts it) on OpenVINO's CPU plugin. The
task screen opens on its rows, named as the IR names its ops, the convolutions OpenVINO folded a
BatchNormalization into compared (compare/folds.py). The smallest values shown (red ~1e-7) are rounding of
this CPU's kernels: a machine with another instruction set may differ in their last digits."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from accuscope.app import browser
from appkit import check_snapshot, opened_task_screen
from support.cli import accuscope

ov = pytest.importorskip("openvino", reason="openvino is not installed (pip install 'accuscope[openvino]')")


@pytest.fixture(scope="module")
def ov_task(cls_model):
    """`accuscope run cls.onnx cls_fp32.xml` into a folder whose path has the same length every run (the
    snapshot's normalized() hides its random part)."""
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    # converted in a fresh interpreter: OpenVINO names the ops it makes from a counter of the process
    # (Multiply_7575 first there, another number after any other conversion in this one)
    subprocess.run([sys.executable, "-c", "import sys, openvino as ov; ov.save_model(ov.convert_model(sys.argv[1]), "
                    "sys.argv[2], compress_to_fp16=False)", str(cls_model), str(root / "cls_fp32.xml")], check=True,
                   timeout=600)
    np.save(root / "x.npy", np.random.default_rng(7).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
    r = accuscope("run", cls_model, root / "cls_fp32.xml", "--input", f"x={root / 'x.npy'}",
                  "--out", root / "ov")
    assert r.returncode == 0, r.stdout + r.stderr
    yield root / "ov"
    shutil.rmtree(root, ignore_errors=True)


def test_the_app_opens_an_openvino_run_task(ov_task, monkeypatch):
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")  # the browser's ages move

    text, svg = opened_task_screen(ov_task)
    assert "✓ pass · none of 376 rows breaks a threshold" in text, text  # 46 failed by identity (BNs folded)
    conv = next(line for line in text.splitlines() if "Convolution" in line and "out:0" in line)
    assert conv.split()[1].startswith("Multiply_") and "nan" not in conv, text  # the folded conv, compared
    check_snapshot("openvino-run-80x24", svg)
