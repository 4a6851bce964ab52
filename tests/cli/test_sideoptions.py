"""A task's format options (task.json's npu_options / golden_options: atb's round, tpu-mlir's bf16) reach
every later reading of its sides, through the real entry point: `export` copies the dumps as the
comparison read them, and `compare --expected` reads the third side as the side of its format."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.dialects import write_atb
from support.narrow import present


def _settled(root: Path) -> None:
    """Files written a moment ago, aged as a dump's are (sides.registry.RACY_NS)."""
    past = time.time_ns() - 10**9
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(past, past))


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_export_copies_the_npu_data_read_with_the_tasks_options(tmp_path):
    """A bf16 tpu-mlir run (uint16 arrays, names that do not say bf16) compared with --npu-option bf16=yes:
    the export's NPU boundary data are those bfloat16 values, not the raw uint16 bits."""
    pytest.importorskip("onnx")
    from support.models import relu_sigmoid  # onnxruntime: with the onnx extra
    relu_sigmoid(tmp_path / "tiny.onnx")
    x = np.array([[1.0, -2.0, 3.0, 0.5]], np.float32)
    r = np.maximum(x, 0)
    out = (1 / (1 + np.exp(-r))).astype(np.float32)
    np.savez(tmp_path / "tiny_top_outputs.npz", x=x, r_Relu=r, out_Sigmoid=out)
    cand = tmp_path / "tiny_bm1684x_bf16_tpu_outputs.npz"
    np.savez(cand, x=_bf16_bits(x), r_Relu=_bf16_bits(r), out_Sigmoid=_bf16_bits(out))
    _settled(tmp_path)
    task = tmp_path / "t"
    done = accuscope("compare", "--npu", cand, "--golden", tmp_path / "tiny_top_outputs.npz",
                     "--model", tmp_path / "tiny.onnx", "--npu-option", "bf16=yes", "--out", task)
    assert done.returncode == 0, done.stdout + done.stderr
    done = accuscope("export", task, "--start", "relu", "--end", "sigmoid")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = task / "exports" / "relu--sigmoid"
    read_as_bf16 = (_bf16_bits(out).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(np.load(folder / "inputs" / "npu" / "00_x.npy"), x)
    np.testing.assert_array_equal(np.load(folder / "outputs" / "npu" / "00_out.npy"), read_as_bf16)


def test_expected_side_is_read_with_the_options_of_its_format(tmp_path):
    """Three ATB dumps of two rounds, compared on round 1 (--golden-option/--npu-option round=...): the
    third side, an ATB dump too, is read at round 1 as well. Its round 1 is the NPU's own error (x1.5:
    expected error 0.5, excess 1); its round 0 holds other values altogether."""
    rng = np.random.default_rng(0)
    rounds = {rnd: [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)] for rnd in ("0", "1")}
    scale = {"gold": {"0": 1.0, "1": 1.0}, "npu": {"0": 1.0, "1": 1.5}, "exp": {"0": -1.0, "1": 1.5}}
    for side, by_round in scale.items():
        for rnd, arrays in rounds.items():
            layer = tmp_path / side / "0_4242" / rnd / "0_ClsModel"
            for k, a in enumerate(arrays, 1):
                write_atb(layer / f"{k}_ConvOperation" / "after" / "outtensor0.bin", a * by_round[rnd])
    _settled(tmp_path)
    chosen = "round=0_4242/1"
    done = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "gold",
                     "--expected", tmp_path / "exp", "--npu-option", chosen, "--golden-option", chosen,
                     "--out", tmp_path / "t")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    columns = present(load_task(tmp_path / "t").table).columns
    assert len(columns["exp_err"]) == 3
    np.testing.assert_allclose(columns["exp_err"], 0.5, rtol=1e-5)
    np.testing.assert_allclose(columns["excess"], 1.0, rtol=1e-5)
