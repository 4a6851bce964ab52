"""tpu-mlir's part of the conformance corpus (tests/fixtures/conformance/tpumlir, made by its make_corpus.py with
tpu-mlir 1.30.2 itself): the manifest is well formed, and every case not left in the cache has its files here.

What accuscope concludes on each case against npz_tool's own verdict is asserted by the conformance run, not here.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance" / "tpumlir"
MANIFEST = json.loads((HERE / "cases.json").read_text())
CASES = MANIFEST["cases"]
COMMITTED = [c for c in CASES if not c["cached"]]
LABELS = {"EQUAL": True, "CLOSE": True, "SIMILAR": True, "NOT_EQUAL": False, "NOT_SIMLIAR": False,
          "NOT_MATCH": False}  # npz_tool's own words, its misspelling of NOT_SIMILAR included


def test_the_manifest_names_the_tool_its_version_and_how_its_verdict_is_read():
    assert MANIFEST["tool"] == "tpu-mlir" and MANIFEST["version"] == "1.30.2"
    assert MANIFEST["made_by"] == "tests/fixtures/conformance/tpumlir/make_corpus.py"
    assert (HERE / "make_corpus.py").is_file() and "npz compare PASSED." in MANIFEST["verdict_rule"]
    assert {m["name"] for m in MANIFEST["models"]} >= {"cls", "tfm"}


def test_case_ids_are_unique_and_plain():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z0-9-]+", i) for i in ids)


def test_every_model_has_each_comparison_of_the_flow_at_every_mode():
    ids = {c["id"] for c in CASES}
    models = [m["name"] for m in MANIFEST["models"]]
    assert {"cls", "det", "rec", "tfm"} <= set(models)
    for model in models:
        assert f"{model}-top-vs-onnx" in ids
        for mode in ("f32", "f16", "bf16", "int8"):
            for kind in ("tpu-vs-top", "model-vs-tpu", "tpu-vs-onnx-all"):
                assert f"{model}-{mode}-{kind}" in ids, (model, mode, kind)


def test_the_small_models_are_committed_whole_or_in_part():
    assert all(not c["cached"] for c in CASES if c["id"].startswith("tfm-"))
    assert any(not c["cached"] for c in CASES if c["id"].startswith("cls-"))
    assert {c["verdict"] for c in CASES} == {"pass", "fail"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_each_case_says_what_the_tool_ran_and_concluded(case):
    assert case["what"] and case["tool_command"].startswith("npz_tool.py compare ")
    assert case["planted"] is None or {"what", "op"} <= set(case["planted"])
    side = case["accuscope"]
    tolerance = side["options"][side["options"].index("--tolerance") + 1]
    assert f"--tolerance {tolerance} -vv" in case["tool_command"]
    assert case["verdict"] in ("pass", "fail")
    word = "PASSED" if case["verdict"] == "pass" else "FAILED"
    assert case["verdict_text"].startswith(f"npz compare {word}.")
    rows = case["rows"]
    assert rows and all(LABELS[r["label"]] == r["pass"] for r in rows.values()), case["id"]
    assert (case["verdict"] == "pass") == all(r["pass"] for r in rows.values())  # the rule, row by row


@pytest.mark.parametrize("case", COMMITTED, ids=lambda c: c["id"])
def test_a_committed_case_has_its_files_and_every_row_names_a_tensor_of_both(case):
    npu, golden = (np.load(HERE / case["accuscope"][side]) for side in ("npu", "golden"))
    with npu, golden:
        assert set(case["rows"]) <= set(npu.files) & set(golden.files), case["id"]


def test_the_committed_files_stay_small():
    assert sum(f.stat().st_size for f in HERE.rglob("*") if f.is_file()) < 1_700_000
