"""`accuscope compare` on files tpu-mlir 1.30.2 wrote (tests/fixtures/tpumlir): the commands a
tpu-mlir user types, the MLIR files as models, the re-pairings listed with their evidence."""
from __future__ import annotations

import json
from pathlib import Path

from support.cli import accuscope

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "tpumlir"


def test_compare_top_against_the_onnx_run_with_the_mlir_as_the_npu_model(tmp_path):
    r = accuscope("compare", "--npu", HERE / "cls_top_outputs.npz", "--golden", HERE / "onnx_out.npz",
                  "--npu-model", HERE / "cls.mlir", "--tolerance", "0.99,0.99", "--out", tmp_path / "task")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not an ONNX model" not in r.stdout + r.stderr
    assert "failing 0" in r.stdout
    assert "judged as tpu-mlir's npz_tool compare --tolerance 0.99,0.99 (fails: NOT_SIMILAR)" in r.stdout
    assert "re-paired 37 NPU tensors" in r.stdout
    assert ("conv2d_53.tmp_0_Conv:output:0: batch_norm_0.tmp_2_BatchNormalization:output:0 (cos 1.0000000) instead "
            "of conv2d_53.tmp_0_Conv:output:0 by identity (cos 0.") in r.stdout
    meta = json.loads((tmp_path / "task" / "task.json").read_text())
    assert len(meta["coverage"]["repaired"]) == 37
    assert meta["thresholds"] == {"cos": {"fail_if": "<", "value": 0.99}, "euclid_sim": {"fail_if": "<", "value": 0.99}}


def test_compare_bmodel_outputs_and_the_mlir_as_any_model_option(tmp_path):
    r = accuscope("compare", "--npu", HERE / "bmodel_out.npz", "--golden", HERE / "onnx_out.npz",
                  "--out", tmp_path / "bmodel")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tpu-mlir-npz" in r.stdout and "paired 1 of 1" in r.stdout and "failing 0" in r.stdout
    r = accuscope("compare", "--npu", HERE / "cls_bm1684x_f16_tpu_outputs.npz", "--golden", HERE / "cls_top_outputs.npz",
                  "--model", HERE / "cls_bm1684x_f16_tpu.mlir", "--tolerance", "0.99,0.90", "--out", tmp_path / "tpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing 0" in r.stdout and "unpaired NPU tensors" not in r.stdout
    assert "40 more only on the NPU side" in r.stdout or "41 more only on the NPU side" in r.stdout
    r = accuscope("inspect", HERE / "cls.mlir")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
