"""The msprobe 26.2 training dumps (tests/fixtures/msprobe/train, written by the real tool: 2 ranks, 2 SGD
steps, level mix) through the real entry point: `inspect` says what it reads, `compare --advisor`
on the rank trees judges each rank, never says "network output" of a training step and never names an
optimizer update as the first call."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.tasks.task import load_task

TRAIN = Path(__file__).parents[1] / "fixtures" / "msprobe" / "train"
ROWS = json.loads((TRAIN / "msprobe_rows.json").read_text())
BENCH = {"cand": "bench", "bf16": "bench", "cand_stats": "bench_stats", "cand_md5": "bench_md5"}
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
NO_OUTPUT = re.compile(r"network output|output passes|outputs pass|model output", re.I)


def test_inspect_says_what_it_reads():
    out = accuscope("inspect", TRAIN / "bench_md5", "--step", "0", "--rank", "1")
    assert out.returncode == 0, out.stderr
    assert "parameters_grad 10" in out.stdout
    tensors = sum(1 for _name, _result, tensor in ROWS["cand_md5/step0/rank1"] if tensor)
    assert f"values {len(ROWS['cand_md5/step0/rank1']) - tensors} (non-tensor arguments" in out.stdout


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=300)


def advise_tree(tmp_path, npu: str) -> tuple[dict, str]:
    out = accuscope("compare", "--npu", TRAIN / npu, "--golden", TRAIN / BENCH[npu], "--out", tmp_path / npu,
                    "--advisor")
    assert out.returncode in (0, 1), out.stderr
    return json.loads((tmp_path / npu / "advice.json").read_text()), out.stdout


def said(advice: dict) -> str:
    return " ".join(f"{f['title']} {f['text']}" for f in advice["findings"])


def test_planted_fault_on_one_rank(tmp_path):
    advice, stdout = advise_tree(tmp_path, "cand")
    assert re.search(r"step 0 rank 0: \d+ rows, 0 failing", stdout)
    assert re.search(r"step 0 rank 1: \d+ rows, [1-9]\d* failing", stdout)  # per rank: only rank 1 diverges
    assert not NO_OUTPUT.search(said(advice) + stdout)
    first = next(f for f in advice["findings"] if f["rule"] == "first_call")
    assert first["op"] == "Tensor.__mul__.0.forward" and first["evidence"]["rank"] == "step 0 rank 1"
    assert {r["rank"] for r in first["evidence"]["ranks"]} == {"step 0 rank 1", "step 1 rank 1"}


def test_bf16_against_fp32_blames_no_optimizer_update(tmp_path):
    advice, stdout = advise_tree(tmp_path, "bf16")
    assert not NO_OUTPUT.search(said(advice) + stdout)
    verdict = advice["findings"][0]
    assert verdict["rule"] == "verdict" and "step" in verdict["title"]
    for f in advice["findings"]:
        assert not f["op"].startswith("Tensor.add_"), f
        assert "parameters_grad" not in f["op"], f
    # bf16 differs from fp32 only where the reference is near zero (a key-bias gradient that cancels
    # through softmax: 8 of 24 values ~1e-9): relative error there is noise, not a divergence
    task = load_task(tmp_path / "bf16")
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    assert state.noisy.any() and not state.fail.any()
    assert "the step matches" in verdict["title"] and "what the step was fed" not in said(advice)
    assert not [f for f in advice["findings"] if f["rule"] == "first_call"]


@pytest.mark.parametrize("npu", ["cand_stats", "cand_md5"])
def test_statistics_trees_say_nothing_of_a_network_output(tmp_path, npu):
    advice, stdout = advise_tree(tmp_path, npu)
    assert not NO_OUTPUT.search(said(advice) + stdout)
    assert advice["findings"][0]["rule"] == "verdict" and "step" in advice["findings"][0]["title"]
    for f in advice["findings"]:
        assert not f["op"].startswith("Tensor.add_"), f


def test_a_step_alone_compares_that_steps_ranks(tmp_path):
    """--step without --rank on a tree of two steps of two ranks: the step's two ranks, rank by rank (it
    stopped on "holds 2 step/rank folders" and listed all four); a path that must be one folder names only
    the folders the step picks."""
    out = accuscope("compare", "--npu", TRAIN / "cand", "--golden", TRAIN / "bench", "--step", "0", "--out",
                    tmp_path / "t", "--json")
    assert out.returncode == 0, out.stderr
    ranks = json.loads(out.stdout)["ranks"]
    assert sorted(r["rel"] for r in ranks.values()) == ["step0/rank0", "step0/rank1"]
    out = accuscope("inspect", TRAIN / "cand", "--step", "1")
    assert out.returncode == 2 and "holds 2 step/rank folders (step1/rank0, step1/rank1)" in out.stderr
