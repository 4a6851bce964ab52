"""Multi-rank trees (ROOT/[step*/]rank*[/proc*]) compared rank by rank into one task, on the local
process pool: discovery, the rank and step columns, per-rank files, resume, columnar tasks, the app."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo.ranktree import write_rank_tree
from accuscope.engine.sources.ranks import Rank, local_path, pair_ranks, pick, ranks
from accuscope.engine.tasks import rankrun, storage
from accuscope.engine.tasks.columnstore import PagedText, read_columns, write_columns
from accuscope.engine.tasks.rankfiles import load_ranks
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.tasklist import list_tasks
from support.narrow import present


def accuscope(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def test_ranks_finds_steps_ranks_and_procs(tmp_path):
    for rel in ("step0/rank0", "step0/rank10", "step0/rank2/proc0", "step0/rank2/proc1", "step1/rank0",
                "step1/other"):
        (tmp_path / rel).mkdir(parents=True)
    found = ranks(tmp_path)
    assert [r.rel for r in found] == ["step0/rank0", "step0/rank2/proc0", "step0/rank2/proc1", "step0/rank10",
                                      "step1/rank0"]
    assert found[1] == Rank(0, 2, 0, "step0/rank2/proc0") and found[1].key == "step0_rank2_proc0"
    assert [r.rel for r in pick(found, rank=[0], step=[1])] == ["step1/rank0"]
    (tmp_path / "single" / "rank").mkdir(parents=True)  # msprobe's single-card folder
    assert [(r.rank, r.rel) for r in ranks(tmp_path / "single")] == [(0, "rank")]
    assert ranks(tmp_path / "step0" / "rank0") == [] and ranks(tmp_path / "missing") == []


def test_root_map_reads_a_shared_path_where_this_host_mounts_it(monkeypatch):
    monkeypatch.setenv("ACCUSCOPE_ROOT_MAP", "/shared/dump=/local/disk;/x=/y")
    assert local_path("/shared/dump/step0/rank1") == "/local/disk/step0/rank1"
    assert local_path("/shared/dumpling") == "/shared/dumpling" and local_path("/x") == "/y"


def test_a_rank_on_one_side_only_is_a_problem_the_rest_pairs(tmp_path):
    npu, golden = write_rank_tree(tmp_path, ranks=3, tensors=2)
    shutil.rmtree(golden / "step0" / "rank1")
    both, problems = pair_ranks(str(npu), str(golden))
    assert [r.rank for r in both] == [0, 2]
    assert len(problems) == 1 and "rank1" in problems[0] and "no folder on the golden side" in problems[0]


def test_compare_a_tree_gives_one_task_with_rank_and_step_columns_and_resumes(tree, tmp_path):
    npu, golden = tree
    out = tmp_path / "task"
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", out, "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "8 ranks of" in r.stdout and "step 1 rank 2: 6 rows, 3 failing" in r.stdout
    assert "ranks 8 · compared 8 · not compared 0 · rows 48 · failing 6" in r.stdout
    task = load_task(out)
    assert task.table is not None
    cols = task.table.columns
    assert len(task.table) == 48 and sorted(set(cols["rank"].tolist())) == [0, 1, 2, 3]
    assert set(cols["rank"][cols["fail"]].tolist()) == {2}
    assert int(task.table.filter_mask("rank == 3").sum()) == 12
    assert int(task.table.filter_mask("Rank == 2 and step == 1 and cos < 0.99").sum()) == 3
    doc = json.loads((out / "task.json").read_text())
    assert doc["multirank"] and {r["state"] for r in doc["ranks"].values()} == {"done"}
    csv = next(out.glob("result_*.csv")).read_text().splitlines()
    assert csv[0].endswith("Step,Rank") and csv[1].endswith(",0,0")
    files = {p.name: p.stat().st_mtime_ns for p in (out / "ranks").iterdir()}
    assert len(files) == 8
    again = accuscope("compare", "--npu", npu, "--golden", golden, "--out", out)
    assert again.returncode == 0 and "8 already compared (resumed)" in again.stdout
    assert {p.name: p.stat().st_mtime_ns for p in (out / "ranks").iterdir()} == files
    assert len(present(load_task(out).table)) == 48
    [entry] = list_tasks(tmp_path)
    assert entry.ranks == 8 and entry.ranks_lost == 0 and entry.rows == 48


def test_rank_and_step_pick_and_bad_picks_are_one_line(tree, tmp_path):
    npu, golden = tree
    run = rankrun.run_ranks(CompareSpec(str(npu), str(golden)), tmp_path / "t", workers=1, rank=[2, 3],
                            step=[1])
    assert run.rows == 12 and run.failing == 3 and sorted(run.results) == ["step1_rank2", "step1_rank3"]
    bad = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "u", "--rank", "7",
                    "--cluster", "local:1")
    assert bad.returncode == 2 and "no rank folder matches --rank/--step (found: step 0 rank 0" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "u").exists()

def test_a_rank_that_cannot_be_compared_is_a_row_of_the_report_the_rest_land(tmp_path):
    npu, golden = write_rank_tree(tmp_path, ranks=3, tensors=3)
    for f in (golden / "step0" / "rank1").iterdir():
        f.rename(f.with_name("other." + f.name))  # nothing pairs in rank 1
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "✗ step 0 rank 1: failed: nothing was paired" in r.stdout
    assert "ranks 3 · compared 2 · not compared 1 · rows 6" in r.stdout
    assert "1 ranks not compared: re-run" in " ".join(r.stdout.split())


def test_above_the_row_limit_a_task_stays_columnar_and_show_exports_the_csv(tree, tmp_path, monkeypatch):
    npu, golden = tree
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 20)
    run = rankrun.run_ranks(CompareSpec(str(npu), str(golden)), tmp_path / "t", workers=1, step=[0])
    assert run.rows == 24 and run.table is None
    folder = tmp_path / "t"
    assert not list(folder.glob("result*")) and len(list((folder / "ranks").iterdir())) == 4
    task = load_task(folder)
    assert task.table is not None
    assert len(task.table) == 24 and task.doc.columnar is True
    assert isinstance(task.table.columns["tensor"], PagedText) and task.table.row(7)["rank"] == 1
    assert task.table.columns["rank"].tolist() == [r for r in range(4) for _ in range(6)]
    shown = accuscope("show", folder, "--format", "csv", "--failing")
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.strip().splitlines()) == 1 + 3


def test_new_thresholds_on_a_columnar_task_are_recorded_not_written_as_a_csv(tree, tmp_path, monkeypatch):
    npu, golden = tree
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 20)
    folder = tmp_path / "t"
    rankrun.run_ranks(CompareSpec(str(npu), str(golden)), folder, workers=1, step=[0])
    task = load_task(folder)
    thresholds = task.thresholds
    assert thresholds is not None
    thresholds.edit("cos=1.5 red=off")  # every compared row fails the cosine now
    task.set_thresholds(thresholds)
    assert not list(folder.glob("result*"))  # no CSV, no result.npz: the column files stay the result
    again = load_task(folder)
    assert again.thresholds is not None
    assert again.doc.columnar is True and present(again.thresholds.get("cos")).value == 1.5
    assert again.table is not None
    assert task.table is not None
    assert again.doc.failing == int(again.table.columns["fail"].sum()) == int(task.table.columns["fail"].sum()) > 3


def test_rank_files_merge_in_rank_order_and_a_broken_one_is_a_warning(tree, tmp_path):
    npu, golden = tree
    folder = tmp_path / "t"
    rankrun.run_ranks(CompareSpec(str(npu), str(golden)), folder, workers=1, step=[0])
    (folder / "ranks" / "step0_rank1.npz").write_bytes(b"not a zip")
    doc = json.loads((folder / "task.json").read_text())
    table, warnings = load_ranks(folder, doc["ranks"])
    assert len(table) == 18 and np.array_equal(np.unique(table.columns["rank"]), [0, 2, 3])
    assert len(warnings) == 1 and "step0_rank1.npz: unreadable" in warnings[0]


def test_column_store_reads_back_what_the_ranks_held_page_by_page(tmp_path):
    from accuscope.engine.compare.results import ResultTable
    a = ResultTable.from_rows([{"npu_op": "conv", "tensor": "conv:output:0", "cos": 0.5, "rank": 0},
                               {"npu_op": "", "tensor": "x:input:1", "cos": 0.9, "rank": 0, "reason": "näme\x00nul"}])
    b = ResultTable.from_rows([{"npu_op": "卷积", "tensor": "y:output:0", "cos": 0.1, "rank": 1}])
    assert write_columns(tmp_path, [a, b]) == 3
    paged, merged = read_columns(tmp_path), ResultTable.concat([a, b])
    for key, col in merged.columns.items():
        if key == "reason":
            assert paged.columns[key].tolist() == ["", "näme?nul", ""]
        else:
            np.testing.assert_array_equal(np.asarray(paged.columns[key]), col, err_msg=key)
    ops = paged.columns["npu_op"]
    assert ops[2] == ops[-1] == "卷积" and ops[1] == "" and len(ops[1:]) == 2 and ops[1:].tolist() == ["", "卷积"]
    assert ops[np.array([2, 0])].tolist() == ["卷积", "conv"] and ops[np.array([True, False, True])].tolist() == ["conv", "卷积"]
    assert (ops == "conv").tolist() == [True, False, False] and int(paged.filter_mask("rank == 1 and cos < 0.2").sum()) == 1
    with pytest.raises(IndexError):
        ops[3]


def test_a_plugin_column_only_some_ranks_have_is_in_the_column_store_empty_where_missing(tmp_path, monkeypatch):
    """Rank 1 fails on the first run (rank 0 gets the plugin's MaxAbs column); the user fixes it and
    swaps the plugin for another (Peak); the resumed run keeps rank 0 as it was. The store holds both
    columns, "" where a rank did not compute one, and is read as such (no merging of rank files)."""
    npu, golden = write_rank_tree(tmp_path, ranks=2, tensors=6)
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 5)
    plugins = tmp_path / "plugins" / "algorithm"
    plugins.mkdir(parents=True)
    body = ("import numpy as np\n"
            "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
            "    return f'{float(np.abs(my_output_dump_data).max()):.3f}', ''\n")
    (plugins / "alg_MaxAbs.py").write_text(body)
    hidden = golden / "step0" / "rank1"
    for f in hidden.iterdir():
        f.rename(f.with_name("other." + f.name))  # nothing pairs in rank 1
    spec, folder = CompareSpec(str(npu), str(golden), custom_dir=str(plugins.parent)), tmp_path / "t"
    first = rankrun.run_ranks(spec, folder, workers=1)
    assert [r["state"] for r in first.results.values()] == ["done", "failed"]
    for f in hidden.iterdir():
        f.rename(f.with_name(f.name.removeprefix("other.")))
    (plugins / "alg_MaxAbs.py").rename(plugins / "alg_Peak.py")
    again = rankrun.run_ranks(spec, folder, workers=1)
    assert again.resumed == ["step0_rank0"] and again.rows == 12 and not again.problems
    table = read_columns(folder)  # the store itself, not a merge of the rank files
    assert table.custom == ["MaxAbs", "Peak"] and len(table) == 12
    max_abs, peak = table.columns["MaxAbs"].tolist(), table.columns["Peak"].tolist()
    assert all(float(v) > 0 for v in max_abs[:6]) and max_abs[6:] == [""] * 6
    assert peak[:6] == [""] * 6 and all(float(v) > 0 for v in peak[6:])
    assert np.isfinite(table.columns["cos"]).all() and table.columns["rank"].tolist() == [0] * 6 + [1] * 6
    task = load_task(folder)
    assert task.table is not None
    assert task.doc.columnar is True and isinstance(task.table.columns["Peak"], PagedText)


def test_a_rank_without_rows_adds_nothing_to_the_column_store(tmp_path):
    from accuscope.engine.compare.results import ResultTable
    a = ResultTable.from_rows([{"npu_op": "conv", "tensor": "conv:output:0", "cos": 0.5, "rank": 0}], ["X"])
    empty = ResultTable.empty(["X"])
    assert write_columns(tmp_path, [a, empty, a]) == 2
    assert read_columns(tmp_path).columns["npu_op"].tolist() == ["conv", "conv"]
