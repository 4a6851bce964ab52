"""`accuscope compare --shards` through the real entry point, on msprobe's TP fixtures (tests/fixtures/msprobe/tp):
the merged side is said, every merged row of the CSV names its rule, task.json keeps the option for a re-run,
and a bad layout is one message naming the file (exit 2), never a traceback."""
from __future__ import annotations

import csv
import json
import os
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
