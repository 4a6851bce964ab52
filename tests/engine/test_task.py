"""Task folders: atomic save, loading from result.npz or the CSV, states, and the task list."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import accuscope
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import npztable, storage
from accuscope.engine.tasks import task as task_module
from accuscope.engine.tasks.task import load_task, save_task
from accuscope.engine.tasks.taskdoc import TaskDoc, mark_state
from accuscope.engine.tasks.tasklist import list_tasks
from support.narrow import present

META = {"npu": "/data/npu_dump", "golden": "/data/golden_npy", "model": "/data/resnet50.om",
        "algorithms": ["cos", "max_abs", "kl"], "op_range": "1,-1,1", "ops": [], "custom_dir": ""}


def _table(n=200, seed=0, custom=("Plug",)) -> ResultTable:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        name = f"/model/layer{i}/Conv"
        rows.append(dict(op_seq=i + 1, type="Conv2D" if i % 3 else "Relu", npu_op=name,
                         golden_op="*" if i % 50 == 7 else name, npu_dtype="float16", golden_dtype="float32",
                         tensor=f"{name}:output:0", shape="[1,8,4,4]", cos=float(1 - rng.random() * 0.03),
                         max_abs=float(rng.random()) if i % 9 else math.nan, kl=float(rng.random() * 0.01),
                         std="(0.1;0.2),(0.1;0.2)", npu_file=f"/data/npu_dump/Conv2D.layer{i}.{i}.1700000000000000",
                         golden_file=f"/data/golden_npy/layer{i}.0.1.npy", how="name", Plug=f"{rng.random():.3f}",
                         **{"rel_0.1%": float(rng.random())}))
    return ResultTable.from_rows(rows, custom=list(custom))


def _same(a: ResultTable, b: ResultTable, skip=()):
    assert len(a) == len(b) and a.custom == b.custom
    for key, col in a.columns.items():
        if key not in skip:
            assert np.array_equal(col, b.columns[key], equal_nan=col.dtype.kind == "f"), key


def test_save_then_load_from_npz(tmp_path):
    table, th = _table(), Thresholds()
    th.set("cos", 0.985)
    csv_path = save_task(tmp_path / "t1", META, table, th, {"with_op_sequence": True, "golden_is_npy": True})
    files = sorted(p.name for p in (tmp_path / "t1").iterdir())
    assert csv_path is not None
    assert files == sorted(["task.json", "result.npz", csv_path.name])
    assert csv_path.name.startswith("result_") and len(csv_path.stem) == len("result_20250101120000")
    task = load_task(tmp_path / "t1")
    assert task.table is not None
    _same(table, task.table)
    assert task.table.present == table.present and task.warnings == [] and task.csv == csv_path
    assert task.thresholds is not None
    assert present(task.thresholds.get("cos")).value == 0.985
    doc = task.doc.raw
    assert doc["state"] == "done" and doc["tool_version"] == accuscope.__version__
    assert doc["npu"] == META["npu"] and doc["algorithms"] == ["cos", "max_abs", "kl"]
    fail = table.columns["fail"]
    assert doc["rows"] == 200 and doc["failing"] == int(fail.sum()) > 0
    assert doc["first_failing_op"] == table.columns["npu_op"][np.argmax(fail)]
    header = csv_path.read_text().splitlines()[0]
    assert header.startswith("Index,OpSequence,") and "GroundTruth,DataType,TensorIndex" in header


def test_load_falls_back_to_the_csv(tmp_path):
    table = _table()
    save_task(tmp_path / "t", META, table, Thresholds(), {"with_op_sequence": True})
    (tmp_path / "t" / "result.npz").unlink()
    task = load_task(tmp_path / "t")
    assert task.warnings == []
    assert task.table is not None
    assert task.table.columns["cos"].tolist() == np.round(table.columns["cos"], 6).tolist()
    _same(table, task.table, skip={"cos", "max_abs", "rel_0.1%", "kl", "op_seq"} | {
        "conversion", "npu_address", "golden_address"})
    assert task.table.columns["op_seq"].tolist() == table.columns["op_seq"].tolist()


def test_a_one_row_task_with_an_empty_text_cell_reads_back_from_its_npz(tmp_path):
    """One row whose text cell is empty packs to no byte at all: read back, it is that row's "", not a
    column of 0 values and an unreadable result.npz (a chain's one-output bmodel stage hit it)."""
    table = _table(n=1, custom=())
    table.columns["param"][:] = ""
    npztable.write_npz(table, tmp_path / "r.npz", {})
    back, _ = npztable.read_npz(tmp_path / "r.npz")
    _same(table, back)
    head, _ = npztable.read_npz(tmp_path / "r.npz", head=1)
    assert head.columns["param"].tolist() == [""]


def test_corrupt_npz_is_reported_and_the_csv_used(tmp_path):
    save_task(tmp_path / "t", META, _table(), Thresholds(), {})
    (tmp_path / "t" / "result.npz").write_bytes(b"PK\x03\x04 truncated")
    task = load_task(tmp_path / "t")
    assert task.table is not None
    assert len(task.table) == 200 and "result.npz unreadable" in task.warnings[0]


def test_npz_never_unpickles(tmp_path, monkeypatch):
    save_task(tmp_path / "t", META, _table(20), Thresholds(), {})
    seen = []
    real_load = np.load

    def load(*a, **kw):
        seen.append(kw)
        return real_load(*a, **kw)
    monkeypatch.setattr(npztable.np, "load", load)
    load_task(tmp_path / "t")
    assert seen == [{"allow_pickle": False}]


def test_a_save_that_fails_midway_keeps_the_previous_result(tmp_path, monkeypatch):
    folder = tmp_path / "t"
    first = _table(seed=1)
    first_csv = save_task(folder, META, first, Thresholds(), {})
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def write_half_then_fail(table, path, **options):
        path.write_text("Index,OpType,NPUDump\n0,Conv2D,/model/lay")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(task_module, "write_result_csv", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save_task(folder, {**META, "state": "done"}, _table(seed=2), Thresholds(), {})
    monkeypatch.undo()

    def npz_fails(table, path, csv_name):
        path.write_bytes(b"PK partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(task_module, "write_npz", npz_fails)
    with pytest.raises(KeyboardInterrupt):
        save_task(folder, META, _table(seed=3), Thresholds(), {})
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert after == before  # no partial files, nothing replaced
    task = load_task(folder)
    assert task.table is not None
    _same(first, task.table)
    assert task.csv == first_csv and task.doc.state == "done"


def test_mark_state_creates_and_updates_task_json(tmp_path):
    folder = tmp_path / "new"
    mark_state(folder, "running", npu="/a", golden="/b")
    doc = json.loads((folder / "task.json").read_text())
    assert doc["state"] == "running" and doc["npu"] == "/a" and "created" in doc
    task = load_task(folder)  # running, no result yet: opens empty
    assert task.table is not None
    assert len(task.table) == 0
    mark_state(folder, "failed", error="golden dump folder /b is empty")
    doc = json.loads((folder / "task.json").read_text())
    assert doc["state"] == "failed" and doc["error"].startswith("golden") and doc["npu"] == "/a"
    with pytest.raises(ValueError, match="state must be one of"):
        mark_state(folder, "finished")


def test_save_keeps_earlier_fields_and_created_time(tmp_path):
    folder = tmp_path / "t"
    mark_state(folder, "running", **META, created="2025-01-01T08:00:00")
    save_task(folder, {"state": "cancelled"}, _table(30), Thresholds(), {})
    doc = load_task(folder).doc.raw
    assert doc["state"] == "cancelled" and doc["created"] == "2025-01-01T08:00:00"
    assert doc["model"] == META["model"] and doc["rows"] == 30


@pytest.mark.parametrize("setup, message", [
    (lambda f: None, "not a task folder (no task.json)"),
    (lambda f: (f / "task.json").write_text("{broken"), "task.json: unreadable"),
    (lambda f: (f / "task.json").write_text("[1, 2]"), "expected a JSON object"),
    (lambda f: (f / "task.json").write_text('{"state": "done"}'), "the task has no result"),
])
def test_load_task_errors_name_the_folder(tmp_path, setup, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    setup(folder)
    with pytest.raises(SourceError, match="bad") as info:
        load_task(folder)
    assert message in str(info.value)


def test_list_tasks_newest_first_with_foreign_csvs_and_problems(tmp_path):
    root = tmp_path / "workspace"
    save_task(root / "old", {**META, "created": "2025-01-01T10:00:00"}, _table(10), Thresholds(), {})
    save_task(root / "new", {**META, "created": "2025-03-01T10:00:00"}, _table(20, seed=5), Thresholds(), {})
    mark_state(root / "running", "running", created="2025-02-01T10:00:00")
    (root / "broken").mkdir()
    (root / "broken" / "task.json").write_text("{not json")
    os.utime(root / "broken" / "task.json", (1.7e9, 1.7e9))  # 2023-11: its time is its mtime
    (root / "empty").mkdir()
    (root / "empty" / "task.json").write_text('{"state": "done", "created": "2024-06-01T00:00:00"}')
    msit = root / "msit_out" / "20250215093000"
    msit.mkdir(parents=True)
    save_csv = list((root / "old").glob("result_*.csv"))[0]
    (msit / "result_20250215093012.csv").write_bytes(save_csv.read_bytes())
    (root / "msit_out" / "notes.csv").write_text("a,b\n1,2\n")
    retest = root / "new" / "exports" / "conv1--relu1" / "retest"  # the re-test of an export of "new"
    save_task(retest, {**META, "created": "2025-03-02T10:00:00"}, _table(3), Thresholds(), {})
    deep = root / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    (deep / "result_20250301000000.csv").write_bytes(save_csv.read_bytes())  # too deep to scan

    entries = list_tasks(root)
    names = [e.name for e in entries]
    assert names == [os.path.join("new", "exports", "conv1--relu1", "retest"), "new", os.path.join("msit_out", "20250215093000", "result_20250215093012.csv"),
                     "running", "old", "empty", "broken"]
    by = {e.name: e for e in entries}
    assert by["new"].state == "done" and by["new"].rows == 20 and by["new"].problem == ""
    assert by["new"].failing == int(present(load_task(root / "new").table).columns["fail"].sum())
    assert by["new"].npu == META["npu"]
    assert by["running"].state == "running" and by["running"].problem == ""
    assert by["broken"].problem.startswith("task.json: unreadable")
    assert by["empty"].problem == "no result file (result.npz or result_*.csv)"
    csv_entry = entries[2]
    assert csv_entry.kind == "csv" and csv_entry.path.is_file()
    foreign = load_task(csv_entry.path)  # opens with the default thresholds
    assert foreign.table is not None
    assert len(foreign.table) == 10 and foreign.csv == csv_entry.path and foreign.doc.foreign
    assert foreign.doc.failing == int(foreign.table.columns["fail"].sum())


def test_list_tasks_on_a_missing_root(tmp_path):
    with pytest.raises(SourceError, match="no such folder"):
        list_tasks(tmp_path / "nowhere")


# ---- generations, true states, files that lie ----------------------------------------------------
def test_a_rerun_replaces_the_csv_and_makes_earlier_advice_and_exports_stale(tmp_path):
    from accuscope.engine.diagnose.advice import fingerprint
    folder = tmp_path / "t"
    first_csv = save_task(folder, META, _table(seed=1), Thresholds(), {})
    meta = load_task(folder).doc
    (folder / "advice.json").write_text(json.dumps({"format": 1, "task": fingerprint(meta)}))
    (folder / "exports" / "conv1--relu1").mkdir(parents=True)
    (folder / "exports" / "conv1--relu1" / "manifest.json").write_text(json.dumps({"created": meta.saved}))
    assert load_task(folder).stale == []
    (folder / "exports" / "conv1--relu1" / "manifest.json").write_text(json.dumps({"created": "2025-01-01T00:00:00"}))
    second_csv = save_task(folder, META, _table(seed=2), Thresholds(), {})
    assert second_csv is not None
    assert first_csv is not None
    assert sorted(p.name for p in folder.glob("result_*.csv")) == [second_csv.name] != [first_csv.name]
    task = load_task(folder)
    assert task.doc.generation != meta.generation and task.csv == second_csv
    assert task.stale == ["advice.json", "exports/conv1--relu1"]
    assert [e.stale for e in list_tasks(tmp_path)] == [["advice.json", "exports/conv1--relu1"]]


def test_a_result_npz_of_another_generation_gives_way_to_the_csv_task_json_names(tmp_path):
    folder = tmp_path / "t"
    first_csv = save_task(folder, META, _table(seed=1), Thresholds(), {})
    kept = {p: present(p).read_bytes() for p in (folder / "task.json", first_csv)}
    save_task(folder, META, _table(seed=2), Thresholds(), {})
    for path, data in kept.items():  # as if killed after result.npz was renamed, task.json not yet
        assert path is not None
        path.write_bytes(data)
    task = load_task(folder)
    assert len(task.warnings) == 1 and "result.npz is from another run than task.json" in task.warnings[0]
    assert task.csv == first_csv
    assert task.table is not None
    np.testing.assert_allclose(task.table.columns["cos"], _table(seed=1).columns["cos"], atol=1e-6)


def test_running_is_interrupted_once_its_process_is_gone(tmp_path):
    folder = tmp_path / "t"
    mark_state(folder, "running")
    assert load_task(folder).doc.state == "running"  # this process
    doc = json.loads((folder / "task.json").read_text())
    assert doc["pid"] == os.getpid() and doc["host"]
    import subprocess
    import sys
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    mark_state(folder, "running", pid=int(gone.stdout))
    assert load_task(folder).doc.state == "interrupted"
    assert list_tasks(tmp_path)[0].state == "interrupted"
    mark_state(folder, "running", host="another-host")  # cannot tell from here
    assert load_task(folder).doc.state == "running"


@pytest.mark.parametrize("field, value, message", [
    ("npu", ["/a", "/b"], "field 'npu' should be text, not a list"),
    ("rows", "200", "field 'rows' should be a whole number, not text"),
    ("rows", True, "field 'rows' should be a whole number, not true/false"),
    ("thresholds", [1], "field 'thresholds' should be an object, not a list"),
    ("state", "exploded\x1b[2J", "field 'state' is 'exploded?[2J', not one of running, done"),
    ("custom_columns", [1, 2], "field 'custom_columns' should be a list of names"),
])
def test_task_json_fields_of_the_wrong_type_are_one_line(tmp_path, field, value, message):
    folder = tmp_path / "t"
    save_task(folder, META, _table(10), Thresholds(), {})
    doc = json.loads((folder / "task.json").read_text())
    doc[field] = value
    (folder / "task.json").write_text(json.dumps(doc))
    with pytest.raises(SourceError) as info:
        load_task(folder)
    assert str(info.value).startswith(f"{folder / 'task.json'}: {message}")
    [entry] = list_tasks(tmp_path)
    assert entry.problem.startswith(f"task.json: {message}") and entry.state == ""


def test_a_result_npz_claiming_a_billion_rows_is_refused_before_allocating(tmp_path):
    folder = tmp_path / "t"
    save_task(folder, META, _table(10), Thresholds(), {})
    with np.load(folder / "result.npz") as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta["rows"] = 10 ** 9
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(folder / "result.npz", **arrays)
    task = load_task(folder)  # the CSV serves instead
    assert task.table is not None
    assert len(task.table) == 10
    assert task.warnings[0].startswith("result.npz unreadable (column ") and "not the 1,000,000,000 rows it claims" \
        in task.warnings[0]


def test_result_files_get_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        save_task(tmp_path / "t", META, _table(10), Thresholds(), {})
        mark_state(tmp_path / "t", "done", error="x")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "t").iterdir()}
    assert set(modes.values()) == {0o640}, modes


def test_a_rerun_from_task_json_runs_no_custom_algorithms_unless_asked(tmp_path):
    doc = TaskDoc({**META, "algorithms": ["cos", "Plug"], "custom_dir": str(tmp_path / "evil")})
    spec = doc.spec()
    assert spec.custom_dir is None and spec.algorithms == ["cos"]
    spec = doc.spec(custom_dir=str(tmp_path / "mine"))
    assert spec.custom_dir == str(tmp_path / "mine") and spec.algorithms == ["cos", "Plug"]


def test_above_csv_rows_a_save_keeps_result_npz_and_the_csv_is_an_export(tmp_path, monkeypatch):
    folder = tmp_path / "t"
    first_csv = save_task(folder, META, _table(50), Thresholds(), {})
    monkeypatch.setattr(storage, "CSV_ROWS", 100)
    table = _table(150, seed=4)
    assert save_task(folder, META, table, Thresholds(), {}) is None
    assert sorted(p.name for p in folder.iterdir()) == ["result.npz", "task.json"]  # the smaller result's CSV gone
    assert first_csv is not None
    assert not first_csv.exists()
    task = load_task(folder)
    assert task.table is not None
    _same(table, task.table)
    assert task.csv is None and task.warnings == [] and task.doc.csv is None and task.doc.rows == 150
    exported = tmp_path / "export.csv"
    task_module.write_result_csv(task.table, exported)
    assert len(exported.read_text().splitlines()) == 151


def test_listing_skips_named_pipes_instead_of_blocking_on_them(tmp_path):
    save_task(tmp_path / "real", META, _table(10), Thresholds(), {})
    os.mkfifo(tmp_path / "result_20250101120000.csv")  # a pipe with a result CSV's name
    (tmp_path / "piped").mkdir()
    os.mkfifo(tmp_path / "piped" / "task.json")
    code = ("import sys; from accuscope.engine.tasks.tasklist import list_tasks\n"
            "for s in list_tasks(sys.argv[1]): print(s.name, '|', s.problem)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert lines[0] == "piped | task.json: is a named pipe (FIFO), not a regular file (the JSON file)"
    assert lines[1] == "real | " and len(lines) == 2
