"""`accuscope compare` on snapshots RKNN-Toolkit2 2.5.0's accuracy_analysis wrote (tests/fixtures/rknn,
made by its make_fixtures.py): the snapshot folder alone (simulator against golden) and its side folders,
accuscope's cos and euc held to RKNN's own error_analysis.txt, RKNN's "single" figures as columns and as
the advisor's origins, a snapshot without its npy/ folders (flat values), and broken snapshots."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.narrow import present

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "rknn"
SNAP = HERE / "cls-int8" / "snapshot"  # npy/ folders kept
TEXT = HERE / "cls-int8-narrow-calib" / "snapshot"  # .txt only: flat values
# one layer of error_analysis.txt, read here independently of the reader: [Type] name  cos | euc  cos | euc
ROW = re.compile(r"^\[[^\]]+\] (\S+)\s+([\d.]+) \| ([\d.]+)\s+([\d.]+) \| ([\d.]+)")


def rknn_figures(snapshot: Path) -> dict[str, tuple[float, float, float, float]]:
    found: dict[str, tuple[float, float, float, float]] = {}
    for line in (snapshot / "error_analysis.txt").read_text().splitlines():
        m = ROW.match(line)
        if m:
            found[m.group(1)] = (float(m[2]), float(m[3]), float(m[4]), float(m[5]))
    assert len(found) > 100
    return found


def columns(task: Path) -> dict:
    c = present(load_task(task).table).columns
    return {k: c[k].tolist() for k in ("npu_op", "cos", "euc", "rknn_single_cos", "rknn_single_euc", "shape")}


@pytest.mark.parametrize("snapshot", [SNAP, TEXT], ids=["npy", "text"])
def test_the_snapshot_alone_agrees_with_rknns_own_error_analysis(snapshot, tmp_path):
    r = accuscope("compare", snapshot, "--out", tmp_path / "t", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["rows"] == 129
    c = columns(tmp_path / "t")
    figures = rknn_figures(snapshot)
    rows = {op: k for k, op in enumerate(c["npu_op"])}
    assert list(rows)[:2] == ["x", "x_int8"] and len(rows) == 129  # map_name_to_file.txt's order
    for name, (cos, euc, single_cos, single_euc) in figures.items():
        k = rows[name]
        assert abs(c["cos"][k] - cos) <= 1e-4, (name, c["cos"][k], cos)  # RKNN's "entire": simulator vs golden
        assert abs(c["euc"][k] - euc) <= 1e-4 * max(1.0, euc), (name, c["euc"][k], euc)
        assert c["rknn_single_cos"][k] == single_cos and c["rknn_single_euc"][k] == single_euc
    unreported = [op for op in c["npu_op"] if op not in figures]  # a layer RKNN prints no numbers for
    assert all(c["rknn_single_cos"][rows[op]] != c["rknn_single_cos"][rows[op]] for op in unreported)  # NaN


def test_the_side_folders_compare_as_the_snapshot_does_and_keep_the_shapes(tmp_path):
    r = accuscope("compare", "--npu", SNAP / "simulator", "--golden", SNAP / "golden", "--out", tmp_path / "sides")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rknn" in r.stdout and "paired 129 of 129" in r.stdout
    r = accuscope("compare", SNAP, "--out", tmp_path / "alone")
    assert r.returncode == 0, r.stdout + r.stderr
    sides, alone = columns(tmp_path / "sides"), columns(tmp_path / "alone")
    for key in ("cos", "euc", "rknn_single_cos"):
        np.testing.assert_array_equal(sides[key], alone[key])
    assert alone["shape"][alone["npu_op"].index("hardswish_0.tmp_0")] in ("[1,8,12,4]", "[1, 8, 12, 4]")


def test_a_snapshot_without_npy_folders_is_read_flat_and_says_so(tmp_path):
    r = accuscope("inspect", TEXT / "simulator")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sides golden, simulator" in " ".join(r.stdout.split()) and "129 from .txt (flat)" in r.stdout
    r = accuscope("compare", TEXT, "--out", tmp_path / "t")
    c = columns(tmp_path / "t")
    assert c["shape"][c["npu_op"].index("hardswish_0.tmp_0")]  == "[384]"  # 1x8x12x4, flat


def test_rknns_single_figures_are_the_advisors_origins_and_shown_by_default(tmp_path):
    r = accuscope("compare", TEXT, "--out", tmp_path / "t", "--advisor", "--fail-on-error")
    assert r.returncode == 1, r.stdout + r.stderr  # the planted fault: calibrated 20x too narrow, the output fails
    assert "origins by the dump tool's own single-layer figures (RKNN's error_analysis.txt)" in r.stdout
    assert "relu_0.tmp_0 introduced the error" in r.stdout
    assert "RKNN's own single-layer cos 0.8003" in r.stdout
    advice = json.loads((tmp_path / "t" / "advice.json").read_text())
    origins = {o["op"]: o for o in advice["ops"]}
    single = rknn_figures(TEXT)
    for op, o in origins.items():
        if op in single and o["method"] == "reported":
            assert o["origin"] == ("introduced" if single[op][2] < 0.99 else "inherited"), (op, o)
    assert sum(o["method"] == "reported" for o in origins.values()) >= 100
    r = accuscope("show", tmp_path / "t", "--format", "csv")
    header = r.stdout.splitlines()[0].split(",")
    assert {"euc", "rknn_single_cos", "rknn_single_euc"} <= set(header), header
    r = accuscope("sensitivity", tmp_path / "t")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "own error by the dump tool's single-layer figures (RKNN's error_analysis.txt)" in r.stdout
    first = next(line for line in r.stdout.splitlines() if line.strip().startswith("1 "))
    assert "relu_0.tmp_0" in first and "introduced" in first, first  # the lowest single cos, 0.8003


def test_broken_snapshots_are_named_with_their_problem(tmp_path):
    bad = tmp_path / "snapshot"
    shutil.copytree(TEXT, bad)
    with (bad / "map_name_to_file.txt").open("a") as fh:
        fh.write("a layer with spaces   file.txt\n")
    r = accuscope("compare", bad, "--out", tmp_path / "t")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "map_name_to_file.txt: line 132: expected 'layer_name file_name'" in r.stdout + r.stderr
    shutil.rmtree(bad / "golden")
    (bad / "map_name_to_file.txt").write_text((TEXT / "map_name_to_file.txt").read_text())
    r = accuscope("compare", bad, "--out", tmp_path / "t2")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "golden: no such folder in this RKNN snapshot (its sides: simulator)" in r.stdout + r.stderr
    (bad / "simulator" / "relu_0_tmp_0.txt").unlink()
    r = accuscope("inspect", bad / "simulator")
    assert r.returncode == 1 and "relu_0.tmp_0: neither relu_0_tmp_0.txt nor npy/relu_0_tmp_0.npy here" in r.stdout + r.stderr


def test_a_model_of_fixed_shape_shapes_the_flat_layers(cls_model, tmp_path):
    import onnx
    m = onnx.load(cls_model)
    for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, (1, 3, 24, 8)):  # the snapshot's input size
        d.ClearField("dim_param")
        d.dim_value = v
    batch = m.graph.output[0].type.tensor_type.shape.dim[0]
    batch.ClearField("dim_param")
    batch.dim_value = 1
    onnx.save(onnx.shape_inference.infer_shapes(m), tmp_path / "cls-24x8.onnx")
    r = accuscope("compare", TEXT, "--model", tmp_path / "cls-24x8.onnx", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    shaped = columns(tmp_path / "t")
    r = accuscope("compare", TEXT, "--out", tmp_path / "flat")
    flat = columns(tmp_path / "flat")
    at = shaped["npu_op"].index
    assert shaped["shape"][at("hardswish_0.tmp_0")] == "[1,8,12,4]" and shaped["shape"][at("x")] == "[1,3,24,8]"
    assert shaped["shape"][at("x_int8")] == "[576]"  # RKNN's own layer: no tensor of the model, flat
    np.testing.assert_array_equal(shaped["cos"], flat["cos"])
    r = accuscope("inspect", TEXT, "--option", f"model={tmp_path / 'cls-24x8.onnx'}")
    assert "124 from .txt shaped by cls-24x8.onnx" in " ".join(r.stdout.split()), r.stdout


def test_a_snapshot_with_a_runtime_folder_compares_the_board_against_golden(tmp_path):
    board = tmp_path / "snapshot"  # a board's run (target='rk3588') adds runtime/: the simulator's values stand in
    shutil.copytree(TEXT, board)
    shutil.copytree(board / "simulator", board / "runtime")
    (board / "runtime" / "relu_0_tmp_0.txt").write_text("0\n" * 384)
    r = accuscope("compare", board, "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    c = columns(tmp_path / "t")
    row = c["npu_op"].index("relu_0.tmp_0")
    assert c["cos"][row] != c["cos"][row]  # all zeros on the board: no cos (NaN), the simulator's figures not its own
    assert all(v != v for v in c["rknn_single_cos"])  # RKNN's single figures are the simulator's: none here
    assert json.loads((tmp_path / "t" / "task.json").read_text())["golden_runner"] == "golden"
    r = accuscope("compare", board, "--npu-runner", "simulator", "--out", tmp_path / "sim")
    assert r.returncode == 0, r.stdout + r.stderr
    assert columns(tmp_path / "sim")["rknn_single_cos"][row] == rknn_figures(TEXT)["relu_0.tmp_0"][2]


def test_a_layer_rknn_reports_as_q_zero_has_no_figures_and_inspect_lists_it(tmp_path):
    snap = tmp_path / "snapshot"  # q_zero as RKNN 2.5.0 writes it (the det's sigmoid output: the cache's det-int8)
    shutil.copytree(TEXT, snap)
    table = (snap / "error_analysis.txt").read_text()
    line = next(x for x in table.splitlines() if x.startswith("[Reshape] save_infer_model/scale_0.tmp_1"))
    q_zero = "[Reshape] save_infer_model/scale_0.tmp_1".ljust(50) + "q_zero |  q_zero    q_zero |  q_zero       "
    (snap / "error_analysis.txt").write_text(table.replace(line, q_zero))
    r = accuscope("compare", snap, "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    c = columns(tmp_path / "t")
    row = c["npu_op"].index("save_infer_model/scale_0.tmp_1")
    assert c["rknn_single_cos"][row] != c["rknn_single_cos"][row] and c["cos"][row] > 0.99  # no figure: NaN
    r = accuscope("inspect", snap)
    assert "1 layer(s) RKNN reports as q_zero (its int8 values all zero, no figure): save_infer_model/scale_0.tmp_1" \
        in " ".join(r.stdout.split()), r.stdout
