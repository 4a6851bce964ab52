"""`accuscope demo`: a reproducible workspace of finished tasks whose planted faults the comparison finds."""
from __future__ import annotations

import argparse
import importlib.machinery
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from accuscope.commands import demo as demo_cmd
from accuscope.engine.demo import workspace as demo
from accuscope.engine.sides.registry import open_golden
from accuscope.engine.sources.npudump import open_npu_dump
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.tasklist import list_tasks
from support.cli import accuscope
from support.narrow import present

pytest.importorskip("onnxruntime")

QUANTIZED_OP = "/block1/conv1/Conv/block1/relu1/Relu"  # the fused device op holding the int4 conv
POW_OP = "/attn/norm/Pow"
DATA_FOLDERS = ("model", "golden", "npu")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("demo") / "workspace"
    return root, demo.build_workspace(root)


def _data_files(task: Path) -> dict[str, bytes]:
    files = {str(p.relative_to(task)): p.read_bytes() for sub in DATA_FOLDERS for p in (task / sub).rglob("*")
             if p.is_file()}
    files["README.md"] = (task / "README.md").read_bytes()
    return files


def _rows(table, op: str, io: str | None = None) -> list[int]:
    c = table.columns
    return [i for i in range(len(table)) if c["npu_op"][i] == op and (io is None or c["io"][i] == io)]


def test_workspace_holds_finished_openable_tasks(workspace):
    root, folders = workspace
    names = [demo.MAIN.name, demo.BGR.name, demo.ONNX_FP16.name, demo.MSPROBE.name]
    assert [f.name for f in folders] == names
    listed = list_tasks(root)
    assert [s.name for s in listed] == names  # main task newest
    for s in listed:
        assert s.state == "done" and not s.problem and s.rows and s.failing
    for folder in folders:
        task = load_task(folder)
        assert task.doc.demo is not None
        assert not task.warnings and task.doc.demo["story"]
        assert len(list(folder.glob("result_*.csv"))) == 1 and (folder / "result.npz").is_file()
        coverage = task.doc.coverage
        # a model's outputs are compared; an msprobe step has none (it is judged on every call)
        assert not coverage["warnings"] and (coverage["outputs_paired"] == 1 or coverage.get("step") is True)
        if folder.name == demo.ONNX_FP16.name:
            assert task.doc.sides == {"npu": "npy", "golden": "npy"}
            continue
        if folder.name == demo.MSPROBE.name:  # no model: msprobe dumps of a numpy network
            assert task.doc.sides == {"npu": "msprobe", "golden": "msprobe"} and task.doc.spec().rank == "2"
            continue
        om = json.loads(next((folder / "model").glob("*.json")).read_text())
        assert any(a["key"] == "_datadump_original_op_names" for op in om["graph"][0]["op"] for a in op["attr"])


def test_onnx_only_task_finds_the_float16_overflow(workspace):
    """Two ONNX models, no accelerator format: the Pow of the LayerNorm overflows in float16, and
    the re-run of the reference op on the candidate's own inputs says it introduced the NaN/inf."""
    from accuscope.engine.diagnose.advisor import advise
    root, folders = workspace
    folder = root / demo.ONNX_FP16.name
    c = present(load_task(folder).table).columns
    first = int(np.flatnonzero(c["fail"])[0])
    assert c["npu_op"][first] == POW_OP and c["npu_nonfinite"][first] > 0 and c["how"][first] == "tensor"
    # the input Cast's output is the converter's own; the output Cast's input is the Gemm's output in
    # float16, paired with the golden Gemm through the candidate's own model
    only = np.flatnonzero(c["is_npu_only"])
    assert [c["tensor"][i] for i in only] == ["graph_input_cast_0:output:0"]
    cast_in = list(c["tensor"]).index("graph_output_cast_0:input:0")
    assert c["golden_op"][cast_in] == "/head/fc/Gemm" and c["how"][cast_in] == "tensor"
    a = advise(folder, write=False)
    assert a is not None
    assert a.method == "rerun"
    assert a.primary is not None
    assert a.primary.rule == "verdict" and "the model passes" in a.primary.title  # the overflow stays local
    assert any(f.rule == "nonfinite_origin" and f.op == POW_OP for f in a.findings)
    assert {o.op: o.origin for o in a.ops}[POW_OP] == "introduced"
    # a local deviation on a passing model is information, never an error headline
    assert all(f.severity == "info" for f in a.findings)
    assert a.by_rule("introduced")[0].title == f"{POW_OP} deviates locally; the network output passes"


def test_build_is_reproducible_byte_for_byte(workspace, tmp_path):
    root, folders = workspace
    other = demo.build_workspace(tmp_path / "elsewhere")
    first = {f.name: _data_files(f) for f in folders}
    second = {f.name: _data_files(f) for f in other}
    assert first.keys() == second.keys()
    for name in first:
        assert sorted(first[name]) == sorted(second[name])
        different = [f for f in first[name] if first[name][f] != second[name][f]]
        assert not different, (name, different[:5])
        assert len(first[name]) > 20
    a, b = present(load_task(folders[0]).table).columns, present(load_task(other[0]).table).columns
    for key in ("cos", "red", "kl", "max_abs", "npu_nonfinite"):
        np.testing.assert_array_equal(a[key], b[key])
    # Rebuilding in place replaces the demo's folders: same bytes, still one result each.
    again = demo.build_workspace(tmp_path / "elsewhere")
    assert {f.name: _data_files(f) for f in again} == second
    assert all(len(list(f.glob("result_*.csv"))) == 1 for f in again)


def test_main_task_network_looks_like_an_ascend_deployment(workspace):
    _, folders = workspace
    table = load_task(folders[0]).table
    assert table is not None
    c = table.columns
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(folders[0] / "model" / f"{demo.MAIN.model_name}.onnx"))
    types_ = [n.op_type for n in model.graph.node]
    assert 30 <= len(types_) <= 60
    assert {"Conv", "BatchNormalization", "Relu", "Add", "ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "MatMul",
            "Softmax"} <= set(types_)
    fused = {tuple(g.split(",")) for g in c["golden_op"] if g.count(",") == 2}
    assert ("/block1/conv1/Conv", "/block1/bn1/BatchNormalization", "/block1/relu1/Relu") in fused
    only = set(c["npu_op"][c["is_npu_only"]])
    assert only == {"trans_TransData_0", "trans_Cast_0"}  # the layout op and the output Cast ATC adds
    assert set(c["golden_op"][c["is_npu_only"]]) == {"*"}
    compared = ~c["is_npu_only"]
    assert set(c["npu_dtype"][compared]) == {"float16"}
    four_d = np.array([s.count(",") == 3 for s in c["shape"]])
    assert set(c["conversion"][four_d & compared]) == {"NC1HWC0->NCHW"}
    cast_out = _rows(table, "trans_Cast_0", "output")
    assert c["npu_dtype"][cast_out[0]] == "float32"


def test_main_task_first_failure_is_the_quantized_conv_and_followers_only_inherit(workspace):
    _, folders = workspace
    table = load_task(folders[0]).table
    assert table is not None
    c = table.columns
    first = int(np.argmax(c["fail"]))
    assert c["npu_op"][first] == QUANTIZED_OP and c["io"][first] == "output"
    assert load_task(folders[0]).doc.first_failing_op == QUANTIZED_OP
    (inp,) = _rows(table, QUANTIZED_OP, "input")
    assert c["cos"][inp] > 0.9999 and c["red"][inp] < 0.005  # fp16 rounding only
    assert c["red"][first] > 100 * c["red"][inp] and c["cos"][first] < 0.99  # its own error
    before = [i for i in range(first) if not c["is_npu_only"][i]]
    assert before and all(c["cos"][i] > 0.9999 for i in before)
    # The ops between the conv and the LayerNorm's Pow read wrong data and add (almost) nothing.
    pow_in = _rows(table, POW_OP, "input")[0]
    ops = list(dict.fromkeys(c["npu_op"][first + 1:pow_in]))
    assert len(ops) >= 6
    for op in ops:
        ins, outs = _rows(table, op, "input"), _rows(table, op, "output")
        assert any(c["fail"][i] for i in ins), op  # it already reads a wrong tensor
        assert c["red"][outs[0]] <= 1.05 * max(c["red"][i] for i in ins) + 1e-3, op


def test_main_task_layernorm_variance_overflows_float16(workspace):
    _, folders = workspace
    table = load_task(folders[0]).table
    assert table is not None
    c = table.columns
    (pow_out,) = _rows(table, POW_OP, "output")
    (pow_in,) = _rows(table, POW_OP, "input")
    assert c["npu_nonfinite"][pow_in] == 0  # the overflow starts in Pow: x^2 > 65504
    assert c["npu_nonfinite"][pow_out] > 0 and c["golden_nonfinite"][pow_out] == 0
    assert c["fail"][pow_out] and "inf" in c["reason"][pow_out]
    (var_out,) = _rows(table, "/attn/norm/ReduceMean_1", "output")
    assert c["npu_nonfinite"][var_out] > 0
    golden = open_golden(folders[0] / "golden")
    d = np.asarray(present(golden.find("/attn/norm/Sub")).load())
    assert np.abs(d).max() ** 2 > np.finfo(np.float16).max  # a genuine float16 overflow, not a planted inf
    assert np.isfinite(np.asarray(present(golden.find(POW_OP)).load())).all()
    (norm_out,) = _rows(table, "/attn/norm/Div", "output")
    assert c["npu_nonfinite"][norm_out] == 0 and c["cos"][norm_out] < 0.9  # d / inf = 0: finite, wrong
    out = np.flatnonzero(c["is_output"])
    assert len(out) == 1 and c["fail"][out[0]]  # the network output disagrees too


def test_bgr_task_fails_from_its_input(workspace):
    _, folders = workspace
    table = load_task(folders[1]).table
    assert table is not None
    c = table.columns
    first = int(np.argmax(c["fail"]))
    assert c["io"][first] == "input" and c["type"][first] == "Conv2D"
    assert c["golden_file"][first].endswith(f"{demo.INPUT}.0.{demo.TIMESTAMP_US}.npy")
    assert c["cos"][first] < 0.9
    npu = np.asarray(present(open_npu_dump(folders[1] / "npu").find_op("trans_TransData_0")).inputs[0].load(), np.float64)
    gold = np.asarray(present(open_golden(folders[1] / "golden").find(demo.INPUT)).load(), np.float64)
    for ch in range(3):  # the same picture with channels reversed: perfect correlation of 0<->2
        assert np.corrcoef(npu[0, ch].ravel(), gold[0, 2 - ch].ravel())[0, 1] > 0.999
    assert np.corrcoef(npu[0, 0].ravel(), gold[0, 0].ravel())[0, 1] < 0.9


def test_a_foreign_folder_is_never_replaced(tmp_path):
    mine = tmp_path / demo.MAIN.name
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(SourceError, match="not made by `accuscope demo`"):
        demo.build_workspace(tmp_path)
    assert (mine / "notes.txt").read_text() == "mine" and not (tmp_path / demo.BGR.name).exists()


def test_cli_builds_and_prints_the_workspace(tmp_path):
    ws = tmp_path / "ws"
    r = accuscope("demo", "--no-tui", "--workspace", ws)
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(ws) in r.stdout and f"accuscope open {ws / demo.MAIN.name}" in r.stdout
    assert f"first failing op: {QUANTIZED_OP}" in r.stdout
    assert all((ws / t.name / "task.json").is_file() for t in demo.TASKS)
    (tmp_path / "file").write_text("x")
    r = accuscope("demo", "--no-tui", "--workspace", tmp_path / "file")
    assert r.returncode == 2 and "not a folder" in r.stderr


def test_the_command_opens_the_tui_on_the_main_task_when_there_is_one(workspace, monkeypatch, capsys):
    root, folders = workspace
    monkeypatch.setattr(demo_cmd, "build_workspace", lambda ws, progress=None: folders)
    monkeypatch.setattr(demo_cmd, "interactive", lambda: True)
    args = argparse.Namespace(workspace=root, no_tui=False)
    with monkeypatch.context() as m:  # a version without accuscope.app.main: nothing to launch
        m.setattr(demo_cmd.importlib.util, "find_spec", lambda name: None)
        assert not demo_cmd.launch_tui(root, folders[0])
    opened = []  # never the real app here: a stand-in records how it would be called
    app_main = types.ModuleType("accuscope.app.main")
    app_main.__spec__ = importlib.machinery.ModuleSpec("accuscope.app.main", None)
    app_main.run = lambda workspace, task=None: opened.append((workspace, task))  # type: ignore[attr-defined]  # a stand-in module's function
    monkeypatch.setitem(sys.modules, "accuscope.app.main", app_main)
    assert demo_cmd.run(args) == 0
    assert opened == [(str(root), str(folders[0]))]
    assert "accuscope open" not in capsys.readouterr().out
    assert demo_cmd.run(argparse.Namespace(workspace=root, no_tui=True)) == 0
    assert len(opened) == 1 and "accuscope open" in capsys.readouterr().out


def test_a_copied_workspace_reads_its_own_files_with_the_original_there_and_gone(tmp_path):
    """task.json names the demo's dumps and models relative to the task folder too, read first: a copy of the
    workspace reads its own model and dumps (never the original's, there or deleted)."""
    import shutil
    original, copy = tmp_path / "ws", tmp_path / "copy"
    r = accuscope("demo", "--no-tui", "--workspace", original)
    assert r.returncode == 0, r.stdout + r.stderr
    shutil.copytree(original, copy)
    task = copy / demo.MAIN.name
    for gone in (False, True):
        if gone:
            shutil.rmtree(original)
        r = accuscope("overlay", task, "--out", tmp_path / "node_data.json")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"in {task / 'model' / 'tinynet.onnx'}" in " ".join(r.stdout.split()), r.stdout
        assert str(original) not in r.stdout
        r = accuscope("show", task, "--failing")
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["first_failing"]["op"] == QUANTIZED_OP
        loaded = load_task(task)
        assert all(str(loaded.path(side)).startswith(str(copy)) for side in ("npu", "golden", "model"))
        assert loaded.table is not None and loaded.framework_model[0] == task / "model" / "tinynet.onnx"
        assert {s.npu for s in list_tasks(copy)} == {str(copy / t.name / "npu") for t in demo.TASKS}
