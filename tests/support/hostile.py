"""Helpers of test_exports_hostile.py that other tests use too."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sides.registry import open_golden
from accuscope.engine.tasks.task import save_task

PLAIN = ["conv1", "-0.5", "+3", "'quote", "-"]


FORMULA = "=cmd|'/c calc'!A1"


FORMULAS = [FORMULA, "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0",
            "\t=1+1", "\r=1+1", "'=already quoted", "''+twice"]


HTML = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "a|b`c`&amp;d", "[x](javascript:alert(1))"]


BIDI = ["evil\u202egnp.exe", "\u2066isolate\u2069", "\u200emark\u200f", "arabic\u061cmark", "\u202aembed\u202c"]


def hostile_rows() -> list[dict]:
    rows = []
    for k, name in enumerate(FORMULAS + HTML + BIDI + PLAIN):
        rows.append({"type": "Conv2D", "npu_op": name, "golden_op": name, "tensor": f"{name}:output:0",
                     "io": "output", "shape": "[1, 4]", "npu_dtype": "float16", "golden_dtype": "float32",
                     "cos": -0.5 if k % 2 else 0.25, "max_abs": -1.0, "mean_abs": 1e-3 * k,
                     "reason": name if k % 3 == 0 else "", "npu_nonfinite": 0, "golden_nonfinite": 0,
                     "is_output": True})
    return rows


def hostile_task(folder: Path) -> Path:
    save_task(folder, {"model": None}, ResultTable.from_rows(hostile_rows()), Thresholds())
    return folder


def golden_json(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    from support.polygraphy import polygraphy_json
    return polygraphy_json(path, {"trt": [tensors]})


def _tmpfs(folder: Path, size: str = "64k") -> None:
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs (a full disk) needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")


@pytest.fixture
def full_disk(tmp_path):
    folder = tmp_path / "full"
    _tmpfs(folder)
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def tiny_export_task(folder: Path) -> Path:
    """relu -> sigmoid: an ONNX model, its onnxruntime golden dump, a simulated NPU dump, task.json."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from accuscope.engine.demo.npusim import simulate
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.sides.registry import load_graph
    from support.models import relu_sigmoid
    folder.mkdir(parents=True)
    path = folder / "tiny.onnx"
    relu_sigmoid(path)
    dump_onnx(path, folder / "golden", {"x": np.array([[1.0, -2.0, 3.0, 0.5]], np.float32)}, timestamp=1700000000000000)
    simulate(load_graph(path), open_golden(folder / "golden"), str(folder / "npu"), model_name="tiny")
    (folder / "task.json").write_text(json.dumps({"state": "done", "npu": str(folder / "npu"),
                                                  "golden": str(folder / "golden"), "model": str(path)}))
    return folder
