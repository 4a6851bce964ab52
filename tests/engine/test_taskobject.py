"""The task object: a task folder opened once, its spec, plan, graph and framework model derived
once, state changes, delete and copy; CompareSpec keyword-only, kept in task.json by taskdoc.spec_fields."""
import json
import shutil
from pathlib import Path

import pytest

from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo import workspace as demo
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import Task, TaskFolder, load_task
from accuscope.engine.tasks.taskdoc import TaskDoc, migrate, spec_fields
from accuscope.engine.tasks.tasklist import list_tasks
from support.narrow import present

MAIN_DEMO_JSON = Path(__file__).parents[1] / "data" / "task-main-demo.json"  # written by accuscope 80ea362's demo


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory) -> Path:
    return demo.build_workspace(tmp_path_factory.mktemp("taskobject") / "ws")[0]


def test_a_task_json_an_older_accuscope_wrote_still_reads_and_replans(demo_task, tmp_path):
    """task.json of main's demo, its folder since moved (every absolute path in it is gone): the
    relative paths find the dumps and the model, and the comparison plans as it did."""
    folder = tmp_path / "moved"
    shutil.copytree(demo_task, folder)
    shutil.copy(MAIN_DEMO_JSON, folder / "task.json")
    task = TaskFolder.at(folder)
    assert not isinstance(task, Task) and task.doc.state == "done" and task.doc.names_dumps
    assert task.doc.coverage["npu_paired"] == 64 and task.doc.relative["model"] == "model/tinynet.json"
    spec = task.spec()
    assert (spec.npu, spec.golden, spec.model) == (str(folder / "npu"), str(folder / "golden"),
                                                   str(folder / "model" / "tinynet.json"))
    assert spec.algorithms is not None
    assert spec.pick == "newest" and spec.iteration == 0 and spec.algorithms[0] == "cos"
    assert task.plan.coverage.npu_paired == 64
    assert task.graph is not None
    assert task.graph.kind == "om"
    old = migrate(json.loads(MAIN_DEMO_JSON.read_text()))  # written by an older accuscope
    again = spec_fields(spec, folder)
    assert {k: again[k] for k in ("algorithms", "op_range", "ops", "pick", "iteration", "golden_shape")} == \
        {k: old[k] for k in ("algorithms", "op_range", "ops", "pick", "iteration", "golden_shape")}
    assert again["relative"] == old["relative"]
    assert len(present(load_task(folder).table)) == old["rows"]  # the result CSV read when result.npz is of another run


def test_spec_is_keyword_only_after_the_two_sides_and_round_trips(tmp_path):
    with pytest.raises(TypeError):
        CompareSpec("a", "b", "model.json")  # type: ignore[call-arg]  # positional on purpose: refused
    spec = CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"), model=str(tmp_path / "m.json"),
                       algorithms=["cos"], op_range="1,5", pick=2, golden_shape=(1, 3), iteration=4)
    fields = spec_fields(spec, tmp_path / "task")
    assert fields["relative"] == {"npu": "../npu", "golden": "../golden", "model": "../m.json"}
    back = TaskDoc(fields).spec()
    assert back == spec


def test_plan_graph_and_framework_model_are_found_once_per_opened_task(demo_task):
    task = load_task(demo_task)
    assert task.plan is task.plan and task.graph is task.graph
    path, source = task.framework_model
    assert path is not None
    assert path.name == "tinynet.onnx" and source == "task.json demo.framework_model"
    assert task.framework_model is task.framework_model
    assert load_task(demo_task).plan is not task.plan  # another opening plans afresh


def test_a_task_that_names_no_dumps_has_no_plan(tmp_path):
    (tmp_path / "task.json").write_text(json.dumps({"state": "failed", "error": "boom"}))
    task = TaskFolder.at(tmp_path)
    assert task.doc.error == "boom" and task.graph is None and task.framework_model == (None, "")
    with pytest.raises(SourceError, match="does not name its NPU and golden dumps"):
        _ = task.plan


def test_mark_delete_and_copy(demo_task, tmp_path):
    folder = tmp_path / "t"
    TaskFolder.at(demo_task).copy(folder)
    with pytest.raises(FileExistsError):
        TaskFolder.at(demo_task).copy(folder)
    task = load_task(folder)
    task.mark("done", error="checked")
    assert task.doc.error == "checked" and TaskFolder.at(folder).doc.error == "checked"
    csv = task.csv
    foreign = tmp_path / "other" / "result.csv"
    foreign.parent.mkdir()
    assert csv is not None
    shutil.copy(csv, foreign)
    as_task = TaskFolder.at(foreign)
    assert as_task.doc.foreign and as_task.copy(tmp_path / "copy.csv").read_bytes() == csv.read_bytes()
    as_task.delete()
    assert not foreign.exists() and foreign.parent.is_dir()  # only the CSV
    (folder / "task.json").write_text("{broken")
    with pytest.raises(SourceError):
        TaskFolder.at(folder)
    assert [e.problem != "" for e in list_tasks(tmp_path) if e.path == folder] == [True]
    TaskFolder.at(folder, strict=False).delete()  # a broken folder can still go
    assert not folder.exists()
