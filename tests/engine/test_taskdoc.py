"""task.json owned by engine/tasks/taskdoc.py: every key declared (type, default, meaning), the schema
round-trips, files older accuscopes wrote open and migrate, keys of newer ones survive a rewrite,
every key real tasks write is declared, and no other module parses task.json."""
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.demo import workspace as demo
from accuscope.engine.demo.ranktree import write_rank_tree
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import rankrun, storage, taskdoc
from accuscope.engine.tasks.task import load_task, save_task
from accuscope.engine.tasks.taskdoc import KEYS, SCHEMA, TASK_JSON, VERSION, TaskDoc, mark_state
from accuscope.engine.tasks.tasklist import list_tasks
from accuscope.engine.tasks.taskrun import run_task

ENGINE = Path(taskdoc.__file__).parents[1]
OLD_JSON = Path(__file__).parents[1] / "data" / "task-main-demo.json"  # written by accuscope 80ea362, no version
SAMPLE = {str: "text", int: 3, list: ["a", "b"], dict: {"k": [1, 2]}, bool: True, float: 0.5}
# declared keys no task built below writes: the re-test's (export/retest.py, tests/engine/test_export.py),
# one set by hand, and one that only lives in memory
WRITTEN_ELSEWHERE = {"parent", "export", "kind", "retest", "framework_model", "foreign"}


def _sample(key) -> object:
    return {"state": "done", "check_error_stat": "max"}.get(key.name, SAMPLE[key.types[0]])


def test_every_key_is_declared_with_a_type_a_default_and_a_meaning():
    assert len(KEYS) == len(SCHEMA) > 50 and SCHEMA["version"].default == 1 and VERSION >= 2
    for key in KEYS:
        assert key.meaning and key.fits(key.default) and getattr(TaskDoc(), key.name) == key.default, key.name


def test_the_schema_round_trips_through_a_file(tmp_path):
    raw = {k.name: _sample(k) for k in KEYS if k.name not in ("version", "foreign")}
    taskdoc.write(tmp_path, TaskDoc(raw))
    back = taskdoc.read(tmp_path)
    assert dict(back.raw) == {**raw, "version": VERSION} and back.problem() == ""
    for key in KEYS:
        if key.name not in ("version", "foreign"):
            assert getattr(back, key.name) == raw[key.name], key.name
    assert back.version == VERSION and "foreign" not in json.loads((tmp_path / TASK_JSON).read_text())


def test_absent_null_or_mistyped_values_read_as_their_defaults():
    doc = TaskDoc({"rows": "5", "multirank": None, "coverage": [1], "pick": 2, "stats_only": 1})
    assert doc.rows is None and doc.multirank is False and doc.coverage == {} and doc.pick == 2  # type: ignore[attr-defined]  # spec keys: TaskDoc's attributes made from CompareSpec's fields at import
    assert doc.stats_only is False and doc.coverage_warnings == [] and not doc.names_dumps  # type: ignore[attr-defined]  # spec keys: TaskDoc's attributes made from CompareSpec's fields at import
    assert doc.problem() == "field 'stats_only' should be true/false, not a number"  # the first, in schema order
    assert TaskDoc({"rows": "5"}).problem() == "field 'rows' should be a whole number, not text"
    doc.coverage["x"] = 1  # a default is the document's own copy, never the schema's
    assert TaskDoc().coverage == {}


@pytest.mark.parametrize("field, value, message", [
    ("multirank", "yes", "field 'multirank' should be true/false, not text"),
    ("ranks", [], "field 'ranks' should be an object, not a list"),
    ("version", "2", "field 'version' should be a whole number, not text"),
    ("workers", 1.5, "field 'workers' should be a whole number, not a number"),
])
def test_a_damaged_task_json_is_one_line_naming_it(tmp_path, field, value, message):
    (tmp_path / TASK_JSON).write_text(json.dumps({"state": "done", field: value}))
    with pytest.raises(SourceError) as info:
        taskdoc.read(tmp_path)
    assert str(info.value) == f"{tmp_path / TASK_JSON}: {message}"
    assert list_tasks(tmp_path)[0].problem == f"{TASK_JSON}: {message}"


def test_a_task_json_without_version_opens_and_migrates_when_rewritten(tmp_path):
    old = json.loads(OLD_JSON.read_text())
    assert "version" not in old
    (tmp_path / TASK_JSON).write_text(json.dumps({**old, "shards": "auto"}))  # --shards auto: now "names"
    doc = taskdoc.read(tmp_path)
    assert doc.version == 1 and doc.shards == "names" and doc.rows == old["rows"] and doc.demo == old["demo"]  # type: ignore[attr-defined]  # spec keys: TaskDoc's attributes made from CompareSpec's fields at import
    assert doc.spec().shards == "names" and doc.spec().algorithms == old["algorithms"]
    mark_state(tmp_path, "done", error="")
    written = json.loads((tmp_path / TASK_JSON).read_text())
    assert written["version"] == VERSION and written["shards"] == "names"
    renamed = {"range": "op_range", "custom_algorithms": "custom_dir"}  # version 2 -> 3: one name an option
    assert {k: v for k, v in written.items() if k not in ("version", "shards", "error", "updated")} == \
        {renamed.get(k, k): v for k, v in old.items() if k != "error"}


def test_a_version_2_task_json_keeps_its_op_range_and_plugin_folder_under_their_one_names(tmp_path):
    """Version 2 kept --range and --custom-algorithms as `range` and `custom_algorithms`: read, they are
    the spec's `op_range` and `custom_dir` (its field names, task.json's keys now), and a rewrite keeps them so."""
    (tmp_path / TASK_JSON).write_text(json.dumps({"version": 2, "state": "done", "npu": "/n", "golden": "/g",
                                                  "range": "1,-1,1", "custom_algorithms": "/plugins"}))
    doc = taskdoc.read(tmp_path)
    assert (doc.op_range, doc.custom_dir) == ("1,-1,1", "/plugins") and "range" not in doc.raw  # type: ignore[attr-defined]  # spec keys: TaskDoc's attributes made from CompareSpec's fields at import
    assert doc.spec(custom_dir="/plugins").op_range == "1,-1,1"
    mark_state(tmp_path, "done")
    written = json.loads((tmp_path / TASK_JSON).read_text())
    assert written["op_range"] == "1,-1,1" and written["custom_dir"] == "/plugins" and "range" not in written


def test_a_version_3_task_of_two_msprobe_dumps_pairs_calls(tmp_path):
    """task.json records whether the sides pair call by call (`pairs_calls`, the app's pair keys: it reads no
    registry before its first frame); version 3 did not, its two msprobe sides said it."""
    for sides, pairs in (({"npu": "msprobe", "golden": "msprobe"}, True), ({"npu": "msprobe", "golden": "npy"}, False),
                         ({"npu": "npy", "golden": "npy"}, False)):
        (tmp_path / TASK_JSON).write_text(json.dumps({"version": 3, "state": "done", "sides": sides}))
        assert taskdoc.read(tmp_path).pairs_calls is pairs, sides
    (tmp_path / TASK_JSON).write_text(json.dumps({"version": 4, "state": "done", "pairs_calls": False,
                                                  "sides": {"npu": "msprobe", "golden": "msprobe"}}))
    assert taskdoc.read(tmp_path).pairs_calls is False  # what this version wrote stands


def test_keys_a_newer_accuscope_wrote_survive_a_mark_and_a_save(tmp_path):
    future = {"state": "done", "version": VERSION + 1, "from_the_future": {"a": [1, None]}, "npu": "/n"}
    (tmp_path / TASK_JSON).write_text(json.dumps(future))
    assert taskdoc.read(tmp_path).raw["from_the_future"] == {"a": [1, None]}  # a newer version reads as it is
    mark_state(tmp_path, "running")
    assert json.loads((tmp_path / TASK_JSON).read_text())["from_the_future"] == {"a": [1, None]}
    save_task(tmp_path, {"state": "done"}, ResultTable.empty([]), Thresholds())
    written = json.loads((tmp_path / TASK_JSON).read_text())
    assert written["from_the_future"] == {"a": [1, None]} and written["npu"] == "/n"
    assert written["version"] == VERSION and written["rows"] == 0  # rewritten in this version's form


def test_writers_refuse_keys_the_schema_does_not_declare_and_values_of_the_wrong_type(tmp_path):
    with pytest.raises(ValueError, match="declares no key 'note'"):
        mark_state(tmp_path, "done", note="x")
    with pytest.raises(ValueError, match="field 'rows' should be a whole number, not text"):
        mark_state(tmp_path, "done", rows="many")
    with pytest.raises(ValueError, match="state must be one of"):
        TaskDoc().with_fields(state="finished")
    assert not (tmp_path / TASK_JSON).exists()
    assert TaskDoc().with_fields(npu=tmp_path).npu == str(tmp_path)  # a path is kept as text


def test_no_module_but_the_owner_parses_task_json():
    """Reading task.json's text or JSON anywhere else would be a second owner (taskdoc's docstring)."""
    parsing = re.compile(r"json_loads|json\.load|read_json_object|_read_json|read_text|read_bytes|open\(")
    offenders = []
    for path in sorted(ENGINE.parent.rglob("*.py")):
        if path == Path(taskdoc.__file__):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if ("TASK_JSON" in code or "task.json\"" in code or "task.json'" in code) and parsing.search(code):
                offenders.append(f"{path.relative_to(ENGINE.parent)}:{n}: {line.strip()}")
    assert offenders == []


# ---- the keys real tasks write --------------------------------------------------------------------
def _keys_of(folder: Path, seen: set[str]) -> None:
    raw = json.loads((folder / TASK_JSON).read_text())
    assert set(raw) <= set(SCHEMA), f"{folder}: undeclared {sorted(set(raw) - set(SCHEMA))}"
    assert TaskDoc(raw).problem() == "" and raw["version"] == VERSION, folder
    seen |= set(raw)


def test_every_key_real_tasks_write_is_declared(tmp_path, monkeypatch):
    seen: set[str] = set()
    for task in demo.TASKS:  # the demo: accuscope's own comparisons, an msprobe rank among them
        demo.build_task(task, tmp_path / task.name)
        _keys_of(tmp_path / task.name, seen)
    main = tmp_path / demo.MAIN.name
    model = main / "model" / "tinynet.onnx"
    r = subprocess.run([sys.executable, "-m", "accuscope", "run", model, model, "--random-inputs", "--workers", "1",
                        "--out", tmp_path / "run"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    _keys_of(tmp_path / "run", seen)
    r = subprocess.run([sys.executable, "-m", "accuscope", "run", model, model, model, "--random-inputs", "--workers",
                        "1", "--out", tmp_path / "chain"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # a chain of stages: its `chain`
    _keys_of(tmp_path / "chain", seen)
    _keys_of(tmp_path / "chain" / "stages" / "tinynet", seen)
    cancel = threading.Event()
    cancel.set()  # a re-run cancelled at once: task.json keeps what it tried under `attempt`
    run_task(load_task(main).spec(), main, cancel=cancel, workers=1)
    assert load_task(main).doc.state == "cancelled" and "attempt" in load_task(main).doc
    _keys_of(main, seen)
    npu, golden = write_rank_tree(tmp_path / "tree", ranks=2, steps=1, tensors=3, size=64)
    rankrun.run_ranks(taskdoc.TaskDoc({"npu": str(npu), "golden": str(golden)}).spec(), tmp_path / "ranks", workers=1)
    _keys_of(tmp_path / "ranks", seen)
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 2)
    rankrun.run_ranks(taskdoc.TaskDoc({"npu": str(npu), "golden": str(golden)}).spec(), tmp_path / "cols", workers=1)
    _keys_of(tmp_path / "cols", seen)
    assert set(SCHEMA) - seen == WRITTEN_ELSEWHERE  # nothing declared that nobody writes
