"""Loose torch.save folders through the real entry point: inspect, compare against .pt and .npy folders,
a hostile file as a row (tests/fixtures/ptfolder: what torch wrote, make_fixtures.py)."""
from __future__ import annotations

import csv
import shutil

from support.cli import accuscope
from support.data import FIXTURES
from support.pickles import hostile_pt

PT = FIXTURES / "ptfolder"


def rows(task) -> dict[str, dict]:
    with open(next(task.glob("result_*.csv")), newline="") as fh:
        return {row["TensorIndex"]: row for row in csv.DictReader(fh)}


def test_inspect_lists_every_tensor_of_a_pt_folder():
    r = accuscope("inspect", PT / "cand")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dump (pt)" in r.stdout and "tensors 10 (inputs 1, outputs 9)" in r.stdout, r.stdout
    for name in ("conv1.output", "layer1.0.relu", "weights.weight", "meta.lr", "bfloat16"):
        assert name in r.stdout, name


def test_compare_a_pt_folder_with_pt_and_with_npy(tmp_path):
    for golden in ("ref", "npy"):
        out = tmp_path / golden
        r = accuscope("compare", "--npu", PT / "cand", "--golden", PT / golden, "--out", out)
        assert r.returncode in (0, 1) and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
        assert f"pt {PT / 'cand'} against {'pt' if golden == 'ref' else 'npy'} {PT / golden}" in r.stdout, r.stdout
        found = rows(out)
        assert float(found["layer1.0.conv:output:0"]["CosineSimilarity"]) < 0.99
        assert float(found["weights.weight:output:0"]["CosineSimilarity"]) > 0.9999
        assert found["conv1.output:output:0"]["NPUDump"] == "conv1.output"
    r = accuscope("compare", "--npu", PT / "npy", "--golden", PT / "ref", "--out", tmp_path / "back")
    assert r.returncode in (0, 1) and "paired 8 of 8 NPU tensors" in r.stdout, r.stdout + r.stderr


def test_a_hostile_pt_is_a_row_with_its_reason_and_runs_nothing(tmp_path):
    cand, ref = tmp_path / "cand", tmp_path / "ref"
    shutil.copytree(PT / "cand", cand)
    shutil.copytree(PT / "ref", ref)
    marker = tmp_path / "pwned"
    hostile_pt(cand / "layer1.0.relu.pt", marker)  # os.system in place of a tensor
    r = accuscope("inspect", cand)
    assert r.returncode == 1 and "layer1.0.relu.pt: refused global" in r.stdout, r.stdout + r.stderr
    r = accuscope("compare", "--npu", cand, "--golden", ref, "--out", tmp_path / "t")
    assert r.returncode in (0, 1) and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    found = rows(tmp_path / "t")
    assert "refused global" in found["layer1.0.relu:output:0"]["CompareFailReason"]
    assert float(found["head:output:1"]["CosineSimilarity"]) < 1
    assert not marker.exists()
