"""The msprobe part of the conformance corpus (tests/fixtures/conformance/msprobe, written by its
make_corpus.py with mindstudio-probe 26.2 and torch CPU): the manifest is well formed, says what msprobe
compare itself concluded on every case, holds the runs issue 44 asks for, and every committed case's files
are there, with no trace of the machine that made them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parents[1] / "fixtures" / "conformance" / "msprobe"
MANIFEST = json.loads((HERE / "cases.json").read_text())
CASES = MANIFEST["cases"]
COMMITTED = [c for c in CASES if not c["cached"]]


def test_manifest_says_which_tool_and_how_its_verdict_is_read():
    assert MANIFEST["tool"] == "msprobe" and MANIFEST["version"] == "26.2.0"
    assert (Path(__file__).parents[2] / MANIFEST["made_by"]).is_file()
    assert "Result" in MANIFEST["verdict_rule"] and "error" in MANIFEST["verdict_rule"]
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z0-9-]+", i) for i in ids)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_case_is_well_formed(case):
    """A cached case's rows are only in the cache's cases.json (every case there: 3 MB of rows)."""
    assert set(case) == {"id", "what", "tool_command", "accuscope", "verdict", "verdict_text", "rows", "planted",
                         "cached"}
    assert case["tool_command"].startswith("msprobe compare -tp ")
    side = case["accuscope"]
    assert set(side) == {"npu", "golden", "options"} and not Path(side["npu"]).is_absolute()
    assert side["options"][0::2] == ["--step", "--rank"]
    assert case["verdict"] in ("pass", "fail") and case["verdict_text"].startswith("Result: ")
    assert case["planted"] is None or set(case["planted"]) == {"what", "op"}
    if case["cached"]:
        assert case["rows"] is None
        return
    assert case["rows"] and all(isinstance(r["pass"], bool) and r["label"] in ("pass", "warning", "error")
                                for r in case["rows"].values())
    # the rule, as verdict_rule says it: a case fails when any row's Result is error
    assert case["verdict"] == ("fail" if any(r["label"] == "error" for r in case["rows"].values()) else "pass")
    assert all(r["pass"] == (r["label"] != "error") for r in case["rows"].values())


def test_corpus_holds_the_runs_the_issue_asks_for():
    runs = {c["id"].rsplit("-step", 1)[0] for c in CASES}
    for variant in ("rerun", "seed", "bf16", "fp16", "noscale", "relu", "weight", "group"):
        assert {f"{variant}-{mode}" for mode in ("tensor", "stats", "md5")} <= runs
    assert {c["planted"]["op"] for c in CASES if c["planted"]} == {
        "Module.attn.Attention.forward.0", "Module.act.GELU.forward.0", "Module.attn.v.Linear.forward.0",
        "Distributed.all_reduce"}
    # finding 4: bf16 autocast against fp32, tensor mode, 2 ranks x 2 steps, the key projection's bias
    # gradient (zero in exact arithmetic) among the rows
    assert {c["id"] for c in CASES if c["id"].startswith("bf16-tensor-")} == {
        f"bf16-tensor-step{s}-rank{r}" for s in (0, 1) for r in (0, 1)}
    bias = "Module.attn.k.Linear.parameters_grad.0.bias"
    assert all(bias in c["rows"] for c in COMMITTED)  # every mode, every variant lists it
    # the same run twice: msprobe passes every row of the tensor and statistics modes
    assert all(c["verdict"] == "pass" for c in CASES if re.match(r"rerun-(tensor|stats)-", c["id"]))


@pytest.mark.parametrize("case", COMMITTED, ids=lambda c: c["id"])
def test_committed_case_files_are_there(case):
    step, rank = case["accuscope"]["options"][1], case["accuscope"]["options"][3]
    for side in (case["accuscope"]["npu"], case["accuscope"]["golden"]):
        folder = HERE / side / f"step{step}" / f"rank{rank}"
        assert (folder / "dump.json").is_file() and (folder / "construct.json").is_file()


def test_committed_corpus_is_small_and_says_nothing_of_where_it_was_made():
    assert COMMITTED
    files = [p for p in HERE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) < 1_600_000
    for p in files:
        if p.suffix == ".json":
            assert not re.search(r"/(root|home|tmp|work)/", p.read_text()), p
