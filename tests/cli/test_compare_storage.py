"""`compare` through the real entry point (`python -P -m accuscope`'s main) writes the task files its
size calls for: one comparison small and above storage.CSV_ROWS, two rank trees below and above
storage.COLUMNAR_ROWS (the limits lowered in the process, as tasks/storage.py holds them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuscope.engine.demo.ranktree import write_rank_tree

RUN = ("import sys; from accuscope.engine.tasks import storage; storage.CSV_ROWS = int(sys.argv[1]); "
       "storage.COLUMNAR_ROWS = int(sys.argv[2]); from accuscope.cli import main; sys.exit(main(sys.argv[3:]))")


def compare(npu: Path, golden: Path, out: Path, csv_rows: int = 200_000, columnar_rows: int = 1_000_000) -> dict:
    r = subprocess.run([sys.executable, "-P", "-c", RUN, str(csv_rows), str(columnar_rows), "compare", "--npu",
                        str(npu), "--golden", str(golden), "--out", str(out), "--workers", "1", "--json"],
                       capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def files(folder: Path) -> set[str]:
    return {"result_*.csv" if p.name.startswith("result_") else p.name for p in folder.iterdir()
            if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return write_rank_tree(tmp_path_factory.mktemp("trees"), ranks=2, tensors=4, size=64)


@pytest.mark.parametrize(("csv_rows", "expected"), [
    (200_000, {"task.json", "result.npz", "result_*.csv"}), (2, {"task.json", "result.npz"})])
def test_one_comparison_writes_the_csv_up_to_the_limit(trees, tmp_path, csv_rows, expected):
    npu, golden = trees
    result = compare(npu / "step0" / "rank0", golden / "step0" / "rank0", tmp_path / "t", csv_rows)
    assert result["rows"] == 4 and files(tmp_path / "t") == expected


@pytest.mark.parametrize(("columnar_rows", "expected"), [
    (1_000_000, {"task.json", "result.npz", "result_*.csv", "ranks"}), (5, {"task.json", "ranks", "columns"})])
def test_two_rank_trees_write_the_ranks_and_the_storage_by_size(trees, tmp_path, columnar_rows, expected):
    npu, golden = trees
    result = compare(npu, golden, tmp_path / "t", columnar_rows=columnar_rows)
    assert result["rows"] == 8 and len(result["ranks"]) == 2 and files(tmp_path / "t") == expected
    assert json.loads((tmp_path / "t" / "task.json").read_text())["columnar"] is (columnar_rows == 5)


def test_a_columnar_task_has_the_verdict_and_exit_code_of_the_merged_one(trees, tmp_path):
    """Too large for one table, the task is judged rank by rank (judgement.combined): the verdict and the
    exit code under --fail-on-error are the merged task's. These ranks hold no network output, so the
    merged verdict is unknown (exit 1); judged on its failing count (0), the columnar one exited 0."""
    npu, golden = trees
    said = {}
    for columnar_rows in (1_000_000, 5):
        out = tmp_path / str(columnar_rows)
        r = subprocess.run([sys.executable, "-P", "-c", RUN, "200000", str(columnar_rows), "compare", "--npu", str(npu),
                            "--golden", str(golden), "--out", str(out), "--workers", "1", "--fail-on-error"],
                           capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=120)
        doc = json.loads((out / "task.json").read_text())
        said[columnar_rows] = (r.returncode, doc["verdict"], "verdict ? unknown" in r.stdout)
        assert doc["columnar"] is (columnar_rows == 5)
    assert said[5] == said[1_000_000] == (1, "unknown", True)
