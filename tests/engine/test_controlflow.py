"""Control flow made plain: the branch an `If` takes is inlined, so its ops are dumped, paired,
re-run and ranked like any other (silero VAD computes everything inside one `If`)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from accuscope.engine.compare.inputs import build_spec  # noqa: E402
from accuscope.engine.diagnose.advisor import advise  # noqa: E402
from accuscope.engine.runs.controlflow import expand_ifs  # noqa: E402
from accuscope.engine.runs.ortdump import dump_onnx  # noqa: E402
from accuscope.engine.sides.registry import load_graph  # noqa: E402
from accuscope.engine.tasks.taskrun import run_task  # noqa: E402

TS = 1700000000000000
RNG = np.random.default_rng(11)
W_IN = RNG.standard_normal((16, 16)).astype(np.float32) / 4
W_DEEP = RNG.standard_normal((16, 16)).astype(np.float32) / 4
W_OUT = RNG.standard_normal((16, 8)).astype(np.float32) / 4


def _vi(name, elem=T.FLOAT, shape=(1, 16)):
    return h.make_tensor_value_info(name, elem, list(shape) if shape is not None else None)


def _nested_if_model(w_deep: np.ndarray = W_DEEP):
    """x -> MatMul -> If(sum > 0): then [Relu, If(same condition, computed inside): then [MatMul
    by a weight of the branch, Tanh] else [Neg]] else [Sigmoid] -> MatMul -> y. The inner branch
    reads `h` from the outer graph and names a value `mid`, as the main graph does (a clash)."""
    inner_then = h.make_graph(
        [h.make_node("MatMul", ["h", "w_deep"], ["deep"], name="deep/MatMul"),
         h.make_node("Tanh", ["deep"], ["inner_out"], name="deep/Tanh")],
        "inner_then", [], [_vi("inner_out")], [nh.from_array(w_deep, "w_deep")])
    inner_else = h.make_graph([h.make_node("Neg", ["h"], ["neg_out"])], "inner_else", [], [_vi("neg_out")])
    then_g = h.make_graph(
        [h.make_node("Relu", ["h"], ["mid"]),  # `mid` is a main-graph name too
         h.make_node("ReduceSum", ["mid"], ["s2"], keepdims=0, name="then/ReduceSum"),
         h.make_node("Greater", ["s2", "zero"], ["c2"], name="then/Greater"),
         h.make_node("If", ["c2"], ["inner"], name="then/If", then_branch=inner_then, else_branch=inner_else),
         h.make_node("Add", ["inner", "mid"], ["then_out"], name="then/Add")],
        "then", [], [_vi("then_out")])
    else_g = h.make_graph([h.make_node("Sigmoid", ["h"], ["else_out"], name="else/Sigmoid")], "else", [],
                          [_vi("else_out")])
    nodes = [h.make_node("MatMul", ["x", "w_in"], ["h"], name="in/MatMul"),
             h.make_node("ReduceSum", ["h"], ["s"], keepdims=0, name="sum"),
             h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
             h.make_node("If", ["c"], ["branch_out"], name="branch", then_branch=then_g, else_branch=else_g),
             h.make_node("Identity", ["branch_out"], ["mid"], name="mid"),
             h.make_node("MatMul", ["mid", "w_out"], ["y"], name="out/MatMul")]
    g = h.make_graph(nodes, "nested", [_vi("x")], [_vi("y", shape=(1, 8))],
                     [nh.from_array(W_IN, "w_in"), nh.from_array(W_OUT, "w_out"),
                      nh.from_array(np.array(0.0, np.float32), "zero")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _feeds(sign: float = 1.0) -> dict[str, np.ndarray]:
    x = np.abs(np.random.default_rng(3).standard_normal((1, 16))).astype(np.float32)
    x = x @ np.linalg.pinv(W_IN).astype(np.float32)  # h = x @ W_IN is then positive: both Ifs take then
    return {"x": (sign * x).astype(np.float32)}


def _ort(model_or_path, feeds) -> list[np.ndarray]:
    src = model_or_path if isinstance(model_or_path, (str, Path)) else model_or_path.SerializeToString()
    return ort.InferenceSession(str(src) if isinstance(src, Path) else src,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def _values_by_run(model, feeds):
    def values(names):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.output[:]
        m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
        return dict(zip(names, _ort(m, feeds)))
    return values


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_expanded_model_computes_what_onnxruntime_computes_with_the_ifs(sign):
    model, feeds = _nested_if_model(), _feeds(sign)
    expected = _ort(model, feeds)
    done = expand_ifs(model, _values_by_run(model, feeds))
    assert not any(n.op_type == "If" for n in model.graph.node)
    onnx.checker.check_model(model)
    assert np.array_equal(_ort(model, feeds)[0], expected[0])
    if sign > 0:  # both Ifs decided, the nested one in a second round
        assert done.taken == {"branch": "then_branch", "then/If": "then_branch"}
        names = [n.name for n in model.graph.node]
        assert {"deep/MatMul", "deep/Tanh", "then/Add"} <= set(names)
        assert "branch/Relu_0" in names  # an unnamed branch node named after its If
        assert any(o.startswith("mid__branch") for n in model.graph.node for o in n.output)  # the clash
    else:
        assert done.taken == {"branch": "else_branch"}


def test_an_if_whose_condition_is_unknown_stays_and_says_why():
    model = _nested_if_model()
    done = expand_ifs(model, lambda names: {})
    assert [n.op_type for n in model.graph.node].count("If") == 1
    assert "could not be evaluated" in done.kept["branch"]


def test_dump_writes_every_op_of_the_taken_branches_and_the_expanded_model(tmp_path):
    path = tmp_path / "nested.onnx"
    onnx.save(_nested_if_model(), str(path))
    feeds = _feeds()
    report = dump_onnx(path, tmp_path / "d", feeds, timestamp=TS)
    assert not report.skipped
    written = set(report.written)
    for op in ("deep_MatMul", "deep_Tanh", "then_Add", "branch_Relu_0", "out_MatMul"):
        assert f"{op}.0.{TS}.npy" in written
    y = np.load(tmp_path / "d" / f"out_MatMul.0.{TS}.npy")
    assert np.array_equal(y, _ort(path, feeds)[0])  # the dumped output is onnxruntime's own
    meta = json.loads((tmp_path / "d" / "dump.json").read_text())
    assert meta["control_flow"]["expanded"] == {"branch": "then_branch", "then/If": "then_branch"}
    graph = load_graph(str(tmp_path / "d" / "model.onnx"))  # the graph names what was dumped
    assert {"deep/MatMul", "then/Add"} <= {n.name for n in graph.nodes}
    assert not any(n.type == "If" for n in graph.nodes)
    kept = dump_onnx(path, tmp_path / "k", feeds, timestamp=TS, expand_if=False)
    assert {t for t, _ in kept.skipped} >= {"deep", "inner_out", "then_out"}


def test_a_loop_body_is_left_as_it_is_with_a_note(tmp_path):
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body/Add")], "body",
                        [_vi("i", T.INT64, ()), _vi("cond_in", T.BOOL, ()), _vi("acc_in")],
                        [_vi("cond_out", T.BOOL, ()), _vi("acc_out")])
    nodes = [h.make_node("Loop", ["n", "", "x"], ["acc"], name="loop", body=body)]
    g = h.make_graph(nodes, "loop", [_vi("x")], [_vi("acc")], [nh.from_array(np.array(3, np.int64), "n")])
    path = tmp_path / "loop.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    report = dump_onnx(path, tmp_path / "d", {"x": np.ones((1, 16), np.float32)}, timestamp=TS)
    why = dict(report.skipped)
    assert set(why) == {"cond_out", "acc_out"}
    assert all("Loop node 'loop'" in r and "not expanded" in r for r in why.values())
    assert np.array_equal(np.load(tmp_path / "d" / f"loop.0.{TS}.npy"), np.full((1, 16), 4, np.float32))


def test_a_fault_inside_a_branch_is_named_by_the_advisor(tmp_path):
    ref, cand = tmp_path / "ref.onnx", tmp_path / "cand.onnx"
    onnx.save(_nested_if_model(), str(ref))
    wrong = W_DEEP.copy()
    wrong[:, 3] *= -4.0  # one output column of the nested branch's MatMul broken
    onnx.save(_nested_if_model(wrong), str(cand))
    feeds = _feeds()
    dump_onnx(ref, tmp_path / "golden", feeds, timestamp=TS)
    dump_onnx(cand, tmp_path / "npu", feeds, timestamp=TS)
    run_task(build_spec({"npu": str(tmp_path / "npu"), "golden": str(tmp_path / "golden")}), tmp_path / "task",
             workers=1)
    advice = advise(tmp_path / "task", workers=1)
    assert advice is not None
    assert advice.method == "rerun"
    headline = next(f for f in advice.findings if f.rule == "introduced")
    assert headline.severity == "error" and headline.op == "deep/MatMul"
    # the reference model itself, Ifs and all, as the framework model: expanded as the golden dump ran it
    given = advise(tmp_path / "task", framework_model=ref, workers=1, write=False)
    assert given is not None
    assert any("expanded as the golden dump took them" in n for n in given.notes)
    headline = next(f for f in given.findings if f.rule == "introduced")
    assert headline.severity == "error" and headline.op == "deep/MatMul"
