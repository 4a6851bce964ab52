"""Golden dumps made with onnxruntime: every node output lands on disk under its node's name."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from accuscope.engine.runs.onnxmodel import make_random_inputs, node_names  # noqa: E402
from accuscope.engine.runs.ortdump import DumpFolder, DumpReport, Writes, dump_onnx  # noqa: E402
from accuscope.engine.sources.names import parse_golden_name, read_mapping_csv  # noqa: E402
from accuscope.engine.sources.tensor import SourceError, sanitize  # noqa: E402

TS = 1700000000000000
CLS_SHAPE = (1, 3, 48, 192)


def _plain_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _npys(folder: Path) -> dict[str, np.ndarray]:
    mapping = read_mapping_csv(str(folder))
    return {mapping.get(p.name, p.name): np.load(p, allow_pickle=False) for p in folder.glob("*.npy")}


def _save(model, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _vi(name, elem=T.FLOAT, shape=(2, 3)):
    return h.make_tensor_value_info(name, elem, list(shape) if shape is not None else None)


@pytest.fixture(scope="module")
def cls_input():
    return np.random.default_rng(7).standard_normal(CLS_SHAPE).astype(np.float32)


@pytest.fixture(scope="module")
def cls_dump(cls_model, cls_input, tmp_path_factory) -> tuple[Path, DumpReport]:
    out = tmp_path_factory.mktemp("cls") / "dump"
    return out, dump_onnx(cls_model, out, {"x": cls_input}, timestamp=TS)


def test_cls_final_output_equals_plain_onnxruntime_run(cls_model, cls_input, cls_dump):
    out, report = cls_dump
    model = onnx.load(str(cls_model))
    final = model.graph.output[0].name
    names = node_names(model.graph.node)
    producer = next(names[i] for i, n in enumerate(model.graph.node) if final in n.output)
    expected = _plain_run(cls_model, {"x": cls_input})[0]
    got = np.load(out / f"{sanitize(producer)}.0.{TS}.npy")
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert np.array_equal(np.load(out / f"x.0.{TS}.npy"), cls_input)
    assert report.inputs == {"x": CLS_SHAPE}


def test_cls_every_non_constant_node_output_is_written(cls_model, cls_dump):
    out, report = cls_dump
    model = onnx.load(str(cls_model))
    nodes = model.graph.node
    expected = {f"{sanitize(name)}.{i}.{TS}.npy" for n, name in zip(nodes, node_names(nodes))
                if n.op_type != "Constant" for i, t in enumerate(n.output) if t}
    expected.add(f"x.0.{TS}.npy")
    on_disk = {p.name for p in out.glob("*.npy")}
    assert on_disk == expected and set(report.written) == expected
    constants = sum(len(n.output) for n in nodes if n.op_type == "Constant")
    assert len(report.skipped) == constants
    assert all("Constant" in reason for _, reason in report.skipped)
    assert (out / "model.onnx").read_bytes() == Path(cls_model).read_bytes()
    meta = json.loads((out / "dump.json").read_text())
    assert meta["inputs"]["x"] == {"shape": list(CLS_SHAPE), "dtype": "float32", "origin": "given"}
    assert meta["optimization"] == "off" and meta["timestamp"] == TS
    assert meta["onnxruntime"] == ort.__version__ and len(meta["skipped"]) == constants


def test_cls_file_names_parse_back_to_node_names(cls_model, cls_dump):
    out, _ = cls_dump
    nodes = onnx.load(str(cls_model)).graph.node
    sanitized = {sanitize(n) for n in node_names(nodes)} | {"x"}
    parsed = [parse_golden_name(p.name) for p in out.glob("*.npy")]
    assert all(g.op_name in sanitized and g.io == "output" and g.timestamp == TS for g in parsed)
    assert {g.op_name for g in parsed} >= {"Conv@0", "BatchNormalization@0", "x"}


def test_node_names_follow_the_graph_loader_convention():
    nodes = [h.make_node("Relu", ["a"], ["b"]), h.make_node("Relu", ["b"], ["c"], name="Relu_0"),
             h.make_node("Neg", ["c"], ["d"], name="n"), h.make_node("Neg", ["d"], ["e"], name="n"),
             h.make_node("Abs", ["e"], ["f"])]
    assert node_names(nodes) == ["Relu_0_1", "Relu_0", "n", "n_1", "Abs_4"]
    # Constant nodes are weights to the graph loader: they never take a name from a real node
    k = nh.from_array(np.ones(1, np.float32))
    nodes = [h.make_node("Constant", [], ["k"], value=k), h.make_node("Add", ["x", "k"], ["y"], name="Constant_0")]
    assert node_names(nodes) == ["Constant_0_1", "Constant_0"]


def test_node_names_agree_with_the_onnx_graph_loader(cls_model, det_model, tmp_path):
    onnxgraph = pytest.importorskip("accuscope.engine.graphs.onnxgraph")
    k = nh.from_array(np.ones((2, 3), np.float32))
    nodes = [h.make_node("Constant", [], ["k"], value=k), h.make_node("Add", ["x", "k"], ["a"]),
             h.make_node("Relu", ["a"], ["b"], name="Add_1"), h.make_node("Relu", ["b"], ["c"]),
             h.make_node("Neg", ["c"], ["y"], name="Add_1")]
    tiny = _save(_model(nodes, [_vi("x")], [_vi("y")]), tmp_path / "tiny.onnx")
    for path in (tiny, cls_model, det_model):
        nodes = onnx.load(str(path)).graph.node
        ours = [name for n, name in zip(nodes, node_names(nodes)) if n.op_type != "Constant"]
        assert sorted(ours) == sorted(n.name for n in onnxgraph.load_onnx(path).nodes)


def test_slash_and_dot_node_names_round_trip(tmp_path):
    nodes = [h.make_node("Relu", ["x"], ["a"], name="block/conv.1/relu"),
             h.make_node("Neg", ["a"], ["y"], name="head.out/neg"),
             h.make_node("Abs", ["y"], ["z"])]
    path = _save(_model(nodes, [_vi("x")], [_vi("z")]), tmp_path / "m.onnx")
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    dump_onnx(path, tmp_path / "d", {"x": x}, timestamp=TS)
    got = {parse_golden_name(p.name).op_name: np.load(p) for p in (tmp_path / "d").glob("*.npy")}
    assert set(got) == {"block_conv_1_relu", "head_out_neg", "Abs_2", "x"}
    assert np.array_equal(got["head_out_neg"], -np.maximum(x, 0))
    assert np.array_equal(got["Abs_2"], np.maximum(x, 0))


def test_stale_declared_types_do_not_break_the_dump(tmp_path):
    """Graph output declared float16 and a float16 value_info left behind; the data is float32."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"), h.make_node("Neg", ["a"], ["y"], name="neg")]
    model = _model(nodes, [_vi("x")], [_vi("y", T.FLOAT16, (7,))])
    model.graph.value_info.append(_vi("a", T.FLOAT16, (9, 9)))
    path = _save(model, tmp_path / "stale.onnx")
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime alone refuses this model (its own error types)
        _plain_run(path, {"x": np.zeros((2, 3), np.float32)})
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    report = dump_onnx(path, tmp_path / "d", {"x": x}, timestamp=TS)
    assert report.skipped == []
    y = np.load(tmp_path / "d" / f"neg.0.{TS}.npy")
    assert y.dtype == np.float32 and np.array_equal(y, -np.maximum(x, 0))


def test_if_body_tensors_are_reported_skipped_unless_the_if_is_expanded(tmp_path):
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["t_out"], name="then_relu")], "then", [],
                          [_vi("t_out")])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e_mid"]), h.make_node("Abs", ["e_mid"], ["e_out"])],
                          "else", [], [_vi("e_out")])
    nodes = [h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
             h.make_node("Neg", ["y"], ["z"], name="after")]
    path = _save(_model(nodes, [_vi("x"), _vi("c", T.BOOL, ())], [_vi("z")]), tmp_path / "if.onnx")
    feeds = {"x": np.ones((2, 3), np.float32), "c": np.array(True)}
    report = dump_onnx(path, tmp_path / "d", feeds, timestamp=TS, expand_if=False)
    skipped = dict(report.skipped)
    assert set(skipped) == {"t_out", "e_mid", "e_out"}
    assert all("If node 'branch'" in r and "subgraph" in r for r in skipped.values())
    assert np.array_equal(np.load(tmp_path / "d" / f"branch.0.{TS}.npy"), np.ones((2, 3), np.float32))
    meta = json.loads((tmp_path / "d" / "dump.json").read_text())
    assert {s["tensor"] for s in meta["skipped"]} == {"t_out", "e_mid", "e_out"}
    # expanded (the default): the taken branch's op writes the If's output under its own name
    report = dump_onnx(path, tmp_path / "e", feeds, timestamp=TS)
    assert not report.skipped
    assert np.array_equal(np.load(tmp_path / "e" / f"then_relu.0.{TS}.npy"), np.ones((2, 3), np.float32))
    assert json.loads((tmp_path / "e" / "dump.json").read_text())["control_flow"]["expanded"] == \
        {"branch": "then_branch"}


def test_op_names_sharing_a_file_name_each_keep_their_own(tmp_path):
    """PP-OCRv6 rec holds `Mul.21` and `Mul_21`: both clean to `Mul_21`; each file says its op."""
    nodes = [h.make_node("Relu", ["x"], ["a"], name="Mul_21"), h.make_node("Neg", ["a"], ["b"], name="Mul.21")]
    path = _save(_model(nodes, [_vi("x")], [_vi("b")]), tmp_path / "m.onnx")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    report = dump_onnx(path, tmp_path / "d", {"x": x}, timestamp=TS)
    assert not report.skipped
    files = _npys(tmp_path / "d")
    assert np.array_equal(files[f"Mul_21.0.{TS}.npy"], np.maximum(x, 0))
    assert np.array_equal(files[f"Mul.21.0.{TS}.npy"], -np.maximum(x, 0))
    assert parse_golden_name(f"Mul.21.0.{TS}.npy").op_name == "Mul.21"


def test_random_inputs_with_fixed_timestamp_and_seed_are_byte_reproducible(cls_model, tmp_path):
    dims = {"?": 32}
    a = dump_onnx(cls_model, tmp_path / "a", random_inputs=True, seed=3, timestamp=TS, dims=dims)
    b = dump_onnx(cls_model, tmp_path / "b", random_inputs=True, seed=3, timestamp=TS, dims=dims)
    assert a.inputs == b.inputs == {"x": (1, 3, 32, 32)}
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert len(files_a) == len(a.written) + 2 and files_a == files_b
    assert json.loads(files_a["dump.json"])["seed"] == 3


def test_small_memory_budget_gives_the_same_files_as_one_batch(cls_model, cls_input, cls_dump, tmp_path):
    ref, _ = cls_dump
    done = []
    report = dump_onnx(cls_model, tmp_path / "d", {"x": cls_input}, timestamp=TS, memory_budget=1_500_000,
                       progress=lambda p: done.append((p.done, p.total)))
    batches = json.loads((tmp_path / "d" / "dump.json").read_text())["batches"]
    assert batches >= 4
    assert json.loads((ref / "dump.json").read_text())["batches"] == 1
    got, want = _files(tmp_path / "d"), _files(ref)
    got.pop("dump.json"), want.pop("dump.json")
    assert got == want
    assert done == [(i + 1, len(report.written)) for i in range(len(report.written))]


def test_long_node_names_go_to_mapping_csv(tmp_path):
    long = "stage/" + "very_long_block_name." * 12 + "relu"
    path = _save(_model([h.make_node("Relu", ["x"], ["y"], name=long)], [_vi("x")], [_vi("y")]),
                 tmp_path / "m.onnx")
    dump_onnx(path, tmp_path / "d", {"x": np.ones((2, 3), np.float32)}, timestamp=TS)
    mapping = read_mapping_csv(str(tmp_path / "d"))
    assert list(mapping.values()) == [f"{sanitize(long)}.0.{TS}.npy"]
    (numeric,) = mapping
    assert (tmp_path / "d" / numeric).is_file() and len(numeric) < 20
    assert parse_golden_name(mapping[numeric]).op_name == sanitize(long)


def test_include_constants_writes_constant_outputs(tmp_path):
    nodes = [h.make_node("Constant", [], ["k"], value=nh.from_array(np.full((2, 3), 2, np.float32))),
             h.make_node("Mul", ["x", "k"], ["y"], name="mul")]
    path = _save(_model(nodes, [_vi("x")], [_vi("y")]), tmp_path / "m.onnx")
    report = dump_onnx(path, tmp_path / "d", {"x": np.ones((2, 3), np.float32)}, include_constants=True,
                       timestamp=TS)
    assert report.skipped == []
    assert np.array_equal(np.load(tmp_path / "d" / f"Constant_0.0.{TS}.npy"), np.full((2, 3), 2, np.float32))


def test_make_random_inputs_shapes_dtypes_and_determinism(tmp_path):
    nodes = [h.make_node("Cast", ["ids"], ["f"], to=T.FLOAT16), h.make_node("Cast", ["mask"], ["g"], to=T.FLOAT16),
             h.make_node("Add", ["x", "f"], ["s"]), h.make_node("Add", ["s", "g"], ["y"])]
    inputs = [_vi("x", T.FLOAT16, ("N", 3, "H", "W")), _vi("ids", T.INT64, ("N", 3, "H", "W")),
              _vi("mask", T.BOOL, ("N", 3, "H", "W"))]
    path = _save(_model(nodes, inputs, [_vi("y", T.FLOAT16, None)]), tmp_path / "m.onnx")
    a = make_random_inputs(path, seed=1)
    assert {k: (v.shape, v.dtype) for k, v in a.items()} == {
        "x": ((1, 3, 64, 64), np.float16), "ids": ((1, 3, 64, 64), np.int64), "mask": ((1, 3, 64, 64), np.bool_)}
    assert a["ids"].min() >= 0 and a["ids"].max() < 16 and a["mask"].any() and not a["mask"].all()
    b = make_random_inputs(path, seed=1, dims={"H": 96})
    assert b["x"].shape == (1, 3, 96, 64)
    assert all(np.array_equal(a[k], make_random_inputs(path, seed=1)[k]) for k in a)
    assert not np.array_equal(a["x"], make_random_inputs(path, seed=2)["x"])
    # a given input is kept and the others are the same random data as without it
    report = dump_onnx(path, tmp_path / "d", {"x": np.zeros((1, 3, 64, 64), np.float32)}, random_inputs=True,
                       seed=1, timestamp=TS)
    assert report.inputs["x"] == (1, 3, 64, 64)
    ids = np.load(tmp_path / "d" / f"ids.0.{TS}.npy")
    assert np.array_equal(ids, a["ids"])
    x = np.load(tmp_path / "d" / f"x.0.{TS}.npy")
    assert x.dtype == np.float16 and not x.any()  # given float32 was cast to the model's float16


def test_int8_quantized_model_dumps_integer_tensors_in_their_dtype(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    w = nh.from_array(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32), "w")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Relu", ["m"], ["y"], name="relu")]
    fp32 = _save(_model(nodes, [_vi("x", shape=("N", 16))], [_vi("y", shape=("N", 8))], [w], opset=13),
                 tmp_path / "fp32.onnx")
    int8 = tmp_path / "int8.onnx"
    quantization.quantize_dynamic(str(fp32), str(int8), weight_type=quantization.QuantType.QInt8)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    report = dump_onnx(int8, tmp_path / "d", {"x": x}, timestamp=TS)
    arrays = _npys(tmp_path / "d")
    assert {a.dtype.name for a in arrays.values()} >= {"uint8", "int32", "float32"}
    expected = _plain_run(int8, {"x": x})[0]
    assert np.array_equal(arrays[f"relu.0.{TS}.npy"], expected)
    assert not [s for s in report.skipped if "Constant" not in s[1]]


def test_fp16_converted_cls_model_dumps(cls_model, cls_input, tmp_path):
    float16 = pytest.importorskip("onnxconverter_common.float16")
    model = float16.convert_float_to_float16(onnx.load(str(cls_model)), keep_io_types=True)
    path = _save(model, tmp_path / "fp16.onnx")
    report = dump_onnx(path, tmp_path / "d", {"x": cls_input}, timestamp=TS)
    arrays = _npys(tmp_path / "d")
    assert sum(a.dtype == np.float16 for a in arrays.values()) > 200
    expected = _plain_run(path, {"x": cls_input})[0]
    assert any(a.dtype == np.float32 and np.array_equal(a, expected) for a in arrays.values())
    non_constant = sum(len(n.output) for n in model.graph.node if n.op_type != "Constant")
    assert len(report.written) == non_constant + 1


def test_sequence_tensors_and_unfetchable_tensors_are_skipped(tmp_path, monkeypatch):
    from accuscope.engine.runs import ortdump

    nodes = [h.make_node("SplitToSequence", ["x"], ["seq"], name="split", keepdims=0),
             h.make_node("ConcatFromSequence", ["seq"], ["c"], name="cat", axis=0),
             h.make_node("Relu", ["c"], ["r"], name="relu"), h.make_node("Neg", ["r"], ["y"], name="neg")]
    path = _save(_model(nodes, [_vi("x")], [_vi("y", shape=None)]), tmp_path / "seq.onnx")
    real_run = ortdump._Runner._run

    def run(self, names):  # onnxruntime refusing to return one tensor
        if "r" in names:
            raise RuntimeError("cannot fetch r")
        return real_run(self, names)

    monkeypatch.setattr(ortdump._Runner, "_run", run)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    report = dump_onnx(path, tmp_path / "d", {"x": x}, timestamp=TS)
    assert dict(report.skipped) == {"seq": "not a tensor (list): only tensors are dumped",
                                    "r": "onnxruntime could not fetch it: cannot fetch r"}
    assert sorted(report.written) == sorted(f"{n}.0.{TS}.npy" for n in ("x", "cat", "neg"))
    assert np.array_equal(np.load(tmp_path / "d" / f"neg.0.{TS}.npy"), -x.reshape(6))


def test_external_data_model_dumps(tmp_path):
    w = nh.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w")
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    model = _model(nodes, [_vi("x")], [_vi("y", shape=(2, 2))], [w])
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, size_threshold=0, location="m.data")
    x = np.ones((2, 3), np.float32)
    dump_onnx(tmp_path / "m.onnx", tmp_path / "d", {"x": x}, timestamp=TS)
    assert np.array_equal(np.load(tmp_path / "d" / f"mm.0.{TS}.npy"), x @ nh.to_array(w))


def test_optimization_levels(cls_model, cls_input, cls_dump, tmp_path):
    ref, _ = cls_dump
    report = dump_onnx(cls_model, tmp_path / "d", {"x": cls_input}, optimization="all", timestamp=TS)
    assert json.loads((tmp_path / "d" / "dump.json").read_text())["optimization"] == "all"
    final = [n for n in report.written if n.startswith("Softmax")]
    assert final and np.allclose(np.load(tmp_path / "d" / final[0]), np.load(ref / final[0]), atol=1e-5)
    with pytest.raises(SourceError, match="optimization"):
        dump_onnx(cls_model, tmp_path / "e", {"x": cls_input}, optimization="max")


def test_bad_model_files_give_source_errors(tmp_path):
    with pytest.raises(SourceError, match="no such model file"):
        dump_onnx(tmp_path / "missing.onnx", tmp_path / "d", random_inputs=True)
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    with pytest.raises(SourceError, match="not an ONNX model") as err:
        dump_onnx(text, tmp_path / "d", random_inputs=True)
    assert str(text) in str(err.value)
    bad_op = _save(_model([h.make_node("NoSuchOp", ["x"], ["y"], name="n")], [_vi("x")], [_vi("y")]),
                   tmp_path / "bad.onnx")
    with pytest.raises(SourceError, match="onnxruntime cannot run the model.*NoSuchOp") as err:
        dump_onnx(bad_op, tmp_path / "d", random_inputs=True)
    assert str(bad_op) in str(err.value)
    assert not list((tmp_path / "d").glob("*.npy"))  # no half dump left behind


def test_a_dump_folder_stopped_before_its_block_ends_leaves_nothing_and_the_exception_goes_on(tmp_path):
    """DumpFolder as every runtime's runner holds it (`with DumpFolder(...) as folder:`): an error or a ^C
    inside the block takes the dump's files away (npy files, the model copy, mapping.csv) and goes on."""
    out = tmp_path / "d"
    out.mkdir()
    ops = ["x:0", "relu", "long" * 80]
    for stop in (KeyboardInterrupt, SourceError):
        with pytest.raises(stop):
            with DumpFolder(str(out), TS, ops, DumpReport(str(out)), None, None, 3) as folder:
                for op in ops:
                    folder.write(op, 0, op, np.ones(3, np.float32))
                (out / "model.onnx").write_bytes(b"the model that ran")
                folder.made.append("model.onnx")
                raise stop("stopped")
        assert sorted(os.listdir(out)) == []
    with DumpFolder(str(out), TS, ops, DumpReport(str(out)), None, None, 3) as folder:
        for op in ops:
            folder.write(op, 0, op, np.ones(3, np.float32))
        folder.finish({"timestamp": TS})
    assert sorted(os.listdir(out)) == ["2.npy", "dump.json", "mapping.csv", f"relu.0.{TS}.npy", f"x_0.0.{TS}.npy"]


def test_bad_inputs_give_source_errors(cls_model, tmp_path):
    ok = np.zeros(CLS_SHAPE, np.float32)
    with pytest.raises(SourceError, match=r"missing model inputs: x \(\?, 3, \?, \?\) float32"):
        dump_onnx(cls_model, tmp_path / "d")
    with pytest.raises(SourceError, match="no input named 'y'"):
        dump_onnx(cls_model, tmp_path / "d", {"x": ok, "y": ok})
    with pytest.raises(SourceError, match=r"input 'x' has shape \(1, 4, 48, 192\) but the model expects "
                                          r"\(\?, 3, \?, \?\)"):
        dump_onnx(cls_model, tmp_path / "d", {"x": np.zeros((1, 4, 48, 192), np.float32)})
    with pytest.raises(SourceError, match=r"input 'x' has shape \(3, 48, 192\)"):
        dump_onnx(cls_model, tmp_path / "d", {"x": np.zeros((3, 48, 192), np.float32)})
    # dims that pass the declared shape but fail at run time: onnxruntime's message comes through
    broadcast = _save(_model([h.make_node("Add", ["x", "k"], ["y"], name="add")],
                             [_vi("x", shape=("N",)), _vi("k", shape=(3,))], [_vi("y", shape=("N",))]),
                      tmp_path / "add.onnx")
    with pytest.raises(SourceError, match="onnxruntime cannot run the model"):
        dump_onnx(broadcast, tmp_path / "d", {"x": np.zeros(4, np.float32), "k": np.zeros(3, np.float32)})
    assert not os.path.exists(tmp_path / "d") or not list((tmp_path / "d").glob("*.npy"))


def test_a_network_input_named_input_something_reads_back_as_that_input(tmp_path):
    """MiniLM's `input_ids`: its file `input_ids.0.{ts}.npy` is the network input, not the input of
    an op `ids` (the `input_` prefix of MindStudio's golden names)."""
    from accuscope.engine.sides.registry import open_golden
    nodes = [h.make_node("Relu", ["input_ids"], ["y"], name="relu")]
    path = _save(_model(nodes, [_vi("input_ids")], [_vi("y")]), tmp_path / "m.onnx")
    dump_onnx(path, tmp_path / "d", {"input_ids": np.ones((2, 3), np.float32)}, timestamp=TS)
    found = {(t.op, t.io) for t in open_golden(tmp_path / "d").tensors}
    assert ("input_ids", "output") in found and ("ids", "input") not in found


def test_two_dumps_sharing_background_writes_land_whole_when_finished(cls_model, cls_input, cls_dump, tmp_path):
    """`accuscope run`'s way: the reference's files are written while the candidate runs; with room for
    one array at a time in the queue (save() waits) both folders are the plain dump's, byte for byte."""
    ref, _ = cls_dump
    files = Writes(limit=1)
    for side in ("a", "b"):
        dump_onnx(cls_model, tmp_path / side, {"x": cls_input}, timestamp=TS, files=files)
    files.finish()
    want = _files(ref)
    want.pop("dump.json")
    for side in ("a", "b"):
        got = _files(tmp_path / side)
        got.pop("dump.json")
        assert got == want


WRITE_LIMITED = """
import resource, signal, sys
import numpy as np
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sources.tensor import SourceError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # a disk that fills up at `limit` bytes a file
try:
    dump_onnx(sys.argv[1], sys.argv[2], {"x": np.ones((1, 3, 48, 192), np.float32)})
except SourceError as exc:
    print(exc)
"""


@pytest.mark.parametrize("limit, what", [(100_000, "x.0.*.npy"), (300_000, "model.onnx")],
                         ids=["a tensor (written in the background)", "the model's copy"])
def test_a_file_that_cannot_be_written_fails_the_dump_naming_it_and_leaves_no_half_dump(cls_model, tmp_path, limit,
                                                                                       what):
    """A real write failure (the file size limit: EFBIG, as a full disk gives ENOSPC): one SourceError
    naming the file, and the folder as it was (a retry into it would be refused)."""
    import fnmatch
    import subprocess
    import sys
    assert os.path.getsize(cls_model) > 300_000
    out = tmp_path / "d"
    r = subprocess.run([sys.executable, "-c", WRITE_LIMITED, str(cls_model), str(out), str(limit)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "tui")}, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    path, _, why = r.stdout.strip().partition(": ")
    assert fnmatch.fnmatch(path, str(out / what)) and why.startswith("cannot write ("), r.stdout  # EFBIG or a short write
    assert list(out.iterdir()) == []


def test_an_input_file_in_the_other_layout_is_fed_transposed(tmp_path):
    """A 4-D input given NHWC to a model that takes NCHW is fed moved to NCHW, and dump.json says so."""
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 5])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 3, 4, 5])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 5)).astype(np.float32)
    report = dump_onnx(tmp_path / "m.onnx", tmp_path / "d", {"x": x.transpose(0, 2, 3, 1)})
    assert np.array_equal(report.fed["x"][0], x) and report.fed["x"][1] == "given, NHWC->NCHW"
    doc = json.loads((tmp_path / "d" / "dump.json").read_text())
    assert doc["inputs"]["x"] == {"shape": [1, 3, 4, 5], "dtype": "float32", "origin": "given, NHWC->NCHW"}
