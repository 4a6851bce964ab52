"""The pairing ladder's coverage and what it leaves, named (compare/leftovers.py, docs/pairing.md), through the
real entry point on msprobe's own dumps of one step in MindSpore and in PyTorch (tests/fixtures/msprobe/cross):
the tensor pairs each rung made, every call left over named (fused N:1, absorbed 1:0, no counterpart) in the
summary, `--json`, task.json, the row's reason (`show`) and the unused golden tensors."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from support.cli import accuscope

ROOT = Path(__file__).parents[2]
CROSS = ROOT / "tests" / "fixtures" / "msprobe" / "cross"
RANK = "step0/rank0"
NONE_LEFT = {"fused N:1": 0, "absorbed 1:0": 0, "no counterpart": 0}
# MindSpore (NPU side) against PyTorch, no mapping file: identical names, then the layer names read through
# their variants, then the MindSpore-to-PyTorch API table
# (Any: the summary's JSON, counts by rung, kind and side, and lists)
LADDER: dict[str, Any] = {"rungs": {"tensor": 22, "name_variants": 60, "api_table": 27},
          "leftovers": {"fused N:1": 27, "absorbed 1:0": 10, "no counterpart": 9},
          "sides": {"npu": {"fused N:1": 18, "absorbed 1:0": 10, "no counterpart": 9},
                    "golden": {"fused N:1": 9, "absorbed 1:0": 0, "no counterpart": 0}},
          "unmapped_apis": ["Primitive.Shape"]}


def compare(tmp_path: Path, name: str, npu: Path, golden: Path, *more) -> tuple[dict, str, Path]:
    out = tmp_path / name
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", out, "--json", *more)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    return json.loads(r.stdout), r.stderr, out


def test_each_rung_counted_and_every_call_left_named_in_json_summary_and_task(tmp_path):
    doc, err, out = compare(tmp_path, "ranks", CROSS / "ms", CROSS / "pt")
    assert doc["pairing"] == LADDER
    assert doc["ranks"]["step0_rank0"]["pairing"] == LADDER  # each rank's own, the whole run's summed
    task = json.loads((out / "task.json").read_text())
    assert task["coverage"]["ladder"] == LADDER and task["ranks"]["step0_rank0"]["pairing"] == LADDER
    text = " ".join(err.split())
    assert "pairing ladder (tensor pairs per rung): tensor 22, name_variants 60, api_table 27 " \
           "(mindspore against pytorch)" in text
    # what to put in a mapping file: the calls nothing explains, by name, and a fused run's output pair
    assert "37 NPU calls left: 18 fused N:1, 10 absorbed 1:0, 9 no counterpart; 9 golden calls left: " \
           "9 fused N:1" in text
    assert "in a mapping file (--mapping" in text and "first: Primitive.shape_op.Shape.0.forward" in text
    assert 'a line of such a file: "Primitive.bias_add.BiasAdd.0.forward:output:0": ' \
           '"Functional.linear.0.forward:output:0"' in text
    assert "Primitive.Shape (9)" in text  # the APIs the table cannot map, by name
    assert not doc["problems"]  # what pairing says is a note, never a problem of the input


def test_a_left_call_says_its_outcome_on_its_row_and_the_golden_side_on_its_tensors(tmp_path):
    doc, err, out = compare(tmp_path, "one", CROSS / "ms" / RANK, CROSS / "pt" / RANK)
    assert doc["pairing"] == LADDER and doc["coverage"]["ladder"] == LADDER
    shown = accuscope("show", out, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    table = json.loads(shown.stdout)
    at = table["columns"].index("reason")
    reason: dict[str, str] = {}
    for row in table["data"]:
        reason.setdefault(row[table["columns"].index("npu_op")], row[at])
    # MindSpore's Dense is MatMul + BiasAdd; PyTorch's is one linear: fused, 2 NPU calls to 1 golden call
    assert reason["Primitive.matmul.MatMul.0.forward"].startswith(
        "fused N:1 (2:1 NPU:golden): Primitive.matmul.MatMul.0.forward + Primitive.bias_add.BiasAdd.0.forward "
        "compute golden Functional.linear.0.forward")
    assert "fused N:1 (2:1" in reason["Primitive.bias_add.BiasAdd.8.forward"]
    # a cast PyTorch does not make; a chunk whose output a paired matmul reads: absorbed
    assert reason["Tensor.to.0.forward"].startswith("absorbed 1:0: its output holds its input's values")
    assert reason["Mint.chunk.0.forward"].startswith("absorbed 1:0: its output holds the values of a paired call's")
    assert reason["Tensor.permute.1.forward"].startswith("absorbed 1:0")
    assert reason["Primitive.shape_op.Shape.0.forward"].startswith("no counterpart: no golden call pairs with it")
    assert not any(o in reason["Mint.matmul.0.forward"] for o in NONE_LEFT)  # a paired call says none
    unused = dict(map(tuple, doc["coverage"]["golden_unused"]))
    assert unused["Functional.linear.0.forward:output:0"] == "fused N:1 (2:1 NPU:golden): npu computes it in 2 calls"
    assert "36 fused N:1 (2:1 NPU:golden): npu computes it in 2 calls" in " ".join(err.split())
    # a tensor left in a paired call (LayerNorm's mean and rstd; torch's normalized_shape argument): its slot
    assert reason_of(table, "Primitive.layer_norm.LayerNorm.0.forward:output:1").startswith(
        "no counterpart: its call is paired, this slot is not")
    assert unused["Functional.layer_norm.0.forward:input:1"].startswith("no counterpart: its call is paired")


def test_the_other_way_round_one_npu_call_stands_for_several_golden_calls(tmp_path):
    doc, err, _ = compare(tmp_path, "swapped", CROSS / "pt" / RANK, CROSS / "ms" / RANK)
    assert doc["pairing"]["rungs"] == {"tensor": 22, "name_variants": 54}
    assert doc["pairing"]["sides"] == {"npu": {"fused N:1": 9, "absorbed 1:0": 5, "no counterpart": 4},
                                       "golden": {"fused N:1": 18, "absorbed 1:0": 13, "no counterpart": 15}}
    reasons = {row["npu_op"]: row["reason"] for row in _rows(tmp_path / "swapped")}
    assert reasons["Functional.linear.0.forward"].startswith(
        "fused N:1 (1:2 NPU:golden): Functional.linear.0.forward is computed by golden "
        "Primitive.matmul.MatMul.0.forward + Primitive.bias_add.BiasAdd.0.forward")
    assert '"Functional.linear.0.forward:output:0": "Primitive.bias_add.BiasAdd.0.forward:output:0"' in err


def test_with_msprobe_layer_mapping_its_rung_pairs_and_the_bias_adds_are_absorbed(tmp_path):
    doc, err, _ = compare(tmp_path, "lm", CROSS / "ms" / RANK, CROSS / "pt" / RANK,
                          "--mapping", CROSS / "layer_mapping.yaml")
    assert doc["pairing"]["rungs"] == {"layer_mapping": 130}  # msprobe's own layer mapping pairs 130 (its data mapping)
    assert doc["pairing"]["sides"]["npu"] == {"fused N:1": 0, "absorbed 1:0": 19, "no counterpart": 9}
    assert doc["pairing"]["sides"]["golden"] == NONE_LEFT
    reasons = {row["npu_op"]: row["reason"] for row in _rows(tmp_path / "lm")}
    # msprobe pairs MatMul with linear; the BiasAdd after it is inside linear on the PyTorch side
    assert "absorbed 1:0" in reasons["Primitive.bias_add.BiasAdd.0.forward"]
    assert "; layer mapping:" in reasons["Primitive.bias_add.BiasAdd.0.forward"]  # the rule's own reason after it
    assert not doc["problems"] and "layer mapping" not in " ".join(doc["problems"])  # its success is no problem


def test_the_line_the_summary_suggests_pairs_the_fused_run_on_the_mapping_rung(tmp_path):
    doc, err, _ = compare(tmp_path, "fused", CROSS / "ms" / RANK, CROSS / "pt" / RANK,
                          "--mapping", CROSS / "fused_pairs.yaml")
    assert doc["pairing"]["rungs"] == {"mapping": 1, **LADDER["rungs"]}  # the other rungs still pair the rest
    assert doc["pairing"]["sides"]["npu"] == {"fused N:1": 16, "absorbed 1:0": 11, "no counterpart": 9}
    rows = {row["tensor"]: row for row in _rows(tmp_path / "fused")}
    assert rows["Primitive.bias_add.BiasAdd.0.forward:output:0"]["golden_op"] == "Functional.linear.0.forward"
    assert rows["Primitive.bias_add.BiasAdd.0.forward:output:0"]["norm_diff"] is not None  # compared
    # its MatMul's output is now the paired BiasAdd's input: absorbed into that call
    assert rows["Primitive.matmul.MatMul.0.forward:output:0"]["reason"].startswith("absorbed 1:0")


def test_same_framework_identical_names_say_nothing_more(tmp_path):
    doc, err, _ = compare(tmp_path, "same", ROOT / "tests" / "fixtures" / "msprobe" / "cand",
                          ROOT / "tests" / "fixtures" / "msprobe" / "bench")
    assert doc["pairing"] == {"rungs": {"tensor": 6}, "leftovers": NONE_LEFT,
                              "sides": {"npu": NONE_LEFT, "golden": NONE_LEFT}, "unmapped_apis": []}
    assert "pairing ladder" not in err and "calls left" not in err


def reason_of(table: dict, tensor: str) -> str:
    at = table["columns"].index("tensor")
    return next(row[table["columns"].index("reason")] for row in table["data"] if row[at] == tensor)


def _rows(folder: Path) -> list[dict]:
    shown = accuscope("show", folder, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    table = json.loads(shown.stdout)
    return [dict(zip(table["columns"], row)) for row in table["data"]]


DOC = ROOT / "docs" / "pairing.md"


@pytest.mark.parametrize("command", [c for c in re.findall(r"^\$ (accuscope .+)$", DOC.read_text(), re.M)]
                         if DOC.exists() else [])
def test_the_docs_commands_run_as_written(command, tmp_path):
    args = [str(tmp_path / "task") if a == "TASK" else str(ROOT / a) if a.startswith("tests/") else a
            for a in shlex.split(command)[1:]]
    r = accuscope(*args)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr


def test_the_docs_pairing_object_is_what_compare_writes():
    block = re.search(r"```json\n(.+?)```", DOC.read_text(), re.S)
    assert block is not None and json.loads(block.group(1)) == LADDER


def test_what_msprobe_pairs_and_the_ladder_does_not_is_named_fused(tmp_path):
    """msprobe's own layer mapping pairs 130 tensors of 44 calls (msprobe_pairs.json); without a mapping file
    the ladder pairs 35 of those calls with the golden call msprobe pairs them with (test_crossmap holds the
    tensors: 103, none otherwise), and each of the other 9 (a MatMul, whose linear PyTorch computes in one
    call) is named fused, never left unexplained."""
    compare(tmp_path, "one", CROSS / "ms" / RANK, CROSS / "pt" / RANK)
    theirs: dict[str, str] = {}
    for k, v in json.loads((CROSS / "msprobe_pairs.json").read_text()).items():
        if v != "N/A":
            split = re.compile(r"\.(?:input|output|parameters)\.")
            theirs[split.split(k)[0]] = split.split(v)[0]
    rows: dict[str, list[dict]] = {}
    for r in _rows(tmp_path / "one"):
        rows.setdefault(r["npu_op"], []).append(r)
    alike = [c for c, g in theirs.items() if any(r["golden_op"] == g for r in rows[c])]
    assert len(theirs) == 44 and len(alike) == 35
    for call in set(theirs) - set(alike):
        assert all(r["reason"].startswith("fused N:1 (2:1 NPU:golden)") for r in rows[call]), call
