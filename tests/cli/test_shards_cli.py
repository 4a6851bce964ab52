"""`accuscope compare --shards` through the real entry point, on msprobe's TP fixtures (tests/fixtures/msprobe/tp):
the merged side is said, every merged row of the CSV names its rule, task.json keeps the option for a re-run,
and a bad layout is one message naming the file (exit 2), never a traceback."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TP = Path(__file__).parents[1] / "fixtures" / "msprobe" / "tp"
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=300)


def test_compare_merges_a_parallel_run(tmp_path):
    out = accuscope("compare", "--npu", TP / "tp2pp2_stats", "--golden", TP / "tp1_stats", "--shards", "names",
                    "--out", tmp_path / "task", "--fail-on-error")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "NPU side: merged TP=2 x PP=2 of rank0..rank3 by Megatron's class names" in out.stdout
    task = json.loads((tmp_path / "task" / "task.json").read_text())
    assert task["shards"] == "names"
    with open(next((tmp_path / "task").glob("result_*.csv")), newline="") as fh:
        rows = list(csv.DictReader(fh))
    merged = [r for r in rows if r["Conversion"].startswith("TP merge: ")]
    assert len(merged) > 150 and all("PP stage" in r["Conversion"] for r in merged)
    assert any("not derivable from the shards' statistics" in r["Conversion"] for r in merged)


def test_bad_layout_is_exit_2_naming_the_file(tmp_path):
    layout = tmp_path / "layout.yaml"
    layout.write_text("modules:\n  fc1: sideways\n")
    out = accuscope("compare", "--npu", TP / "tp2", "--golden", TP / "tp1", "--shards", layout, "--out", tmp_path / "t")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert str(layout) in out.stderr and "'sideways' is not one of column, row, vocab, replicated" in out.stderr
    out = accuscope("compare", "--npu", TP / "tp2", "--golden", TP / "tp1", "--shards", tmp_path / "none.yaml",
                    "--out", tmp_path / "t")
    assert out.returncode == 2 and "none.yaml: no such layout file" in out.stderr


def test_inspect_shards_says_what_the_merge_does():
    out = accuscope("inspect", TP / "tp2pp2_stats", "--shards", "names")
    assert out.returncode == 1, out.stdout + out.stderr  # 1: some tensors cannot be merged (and it says which)
    text = " ".join(out.stdout.split())
    assert "4 ranks as TP=2 x PP=2, split by Megatron's class names" in text
    assert "column-parallel replicated 12 · concat 22 · sum 2" in text and "vocab-parallel replicated 14 · concat 4 · vocab 4" in text
    assert "PP-stitched 225 tensors of 2 stages in one order, 97 on renamed calls" in text
    assert "not merged 21" in text and "13 (vocab-parallel): per-rank vocabulary bookkeeping" in text
    assert "statistics not derivable from the shards': Max, Min, Norm of 6 tensors" in text

    out = accuscope("inspect", TP / "tp2pp2_stats", "--shards", "names", "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and (doc["tp"], doc["pp"], doc["ranks"], doc["tensors"]) == (2, 2, 4, 225)
    assert doc["merged"]["row"] == {"concat": 12, "sum": 4, "replicated": 30}
    assert doc["rules"] == {"replicated": 127, "concat": 67, "sum": 6, "vocab": 4}
    assert doc["stitched"] == {"stages": 2, "tensors": 225, "renamed": 97}
    assert [(e["count"], e["kind"]) for e in doc["not_merged"]] == [(13, "vocab"), (8, "outside")]
    assert doc["not_merged"][1]["reason"] == "a non-tensor value that differs across the TP group's ranks"
    assert doc["not_merged"][1]["tensors"][0] == "Distributed.send.0.forward.input.dst (stage 0)"  # p2p peers


def test_inspect_shards_of_a_pipeline_alone_and_with_a_layout(tmp_path):
    out = accuscope("inspect", TP / "tp1pp2", "--shards", "names", "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and (doc["tp"], doc["pp"]) == (1, 2) and doc["merged"] == {} and not doc["not_merged"]
    assert doc["stitched"] == {"stages": 2, "tensors": 53, "renamed": 20} and doc["found"].startswith("TP=1: rank1")
    layout = tmp_path / "layout.yaml"
    layout.write_text("tp: 2\nmodules:\n  \"*.fc1\": row\n")
    out = accuscope("inspect", TP / "tp2", "--shards", layout, "--json")
    doc = json.loads(out.stdout)
    assert doc["split_by"] == str(layout) and doc["found"] == f"tp: 2 from {layout}" and "column" not in doc["merged"]


def test_inspect_shards_unusable_input_is_exit_2_naming_the_file(tmp_path):
    out = accuscope("inspect", TP / "tp1", "--shards", "names")
    assert out.returncode == 2 and f"{TP / 'tp1' / 'step0' / 'rank0'}: the only rank of its step" in out.stderr
    broken = tmp_path / "run"
    shutil.copytree(TP / "tp2_stats", broken)
    doc = broken / "step0" / "rank1" / "dump.json"
    doc.write_bytes(doc.read_bytes()[:400])  # cut short: the rank's dump is unreadable
    out = accuscope("inspect", broken, "--shards", "names")
    assert out.returncode == 2 and str(doc) in out.stderr and "Traceback" not in out.stderr
    doc.write_text('{"task": ')  # not even recognisable as msprobe's: still named, not taken for a one-rank run
    out = accuscope("inspect", broken, "--shards", "names", "--json")
    assert out.returncode == 2 and f"{doc}: not a dump.json msprobe wrote" in out.stderr and not out.stdout
    out = accuscope("inspect", TP / "tp2", "--json")
    assert out.returncode == 2 and "--json goes with --shards" in out.stderr
    out = accuscope("inspect", TP / "tp2", "--shards", tmp_path / "none.yaml")
    assert out.returncode == 2 and "none.yaml: no such layout file" in out.stderr
