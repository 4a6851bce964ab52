"""Hostile and broken input: one bad file never stops the rest, every input class fails politely.

Each case is damage seen in the field (or found by the fuzz corpus, tests/fuzz/corpus.py), run
through the real entry point where the user's experience is the point (exit code, one line naming
the file, no traceback) and through the engine where the data are.
"""
from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys

import numpy as np
import pytest

from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources import ascend
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.convert import convert
from accuscope.engine.sources.npudump import open_npu_dump
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.csvio import read_result_csv
from fuzz.corpus import npy_bytes
from support.cli import accuscope
from support.narrow import present

GOOD = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"


def golden_folder(tmp_path, n=3):
    folder = tmp_path / "golden"
    folder.mkdir()
    for k in range(n):
        np.save(folder / f"good{k}.0.{k + 1}.npy", np.full((2, 3), k, dtype=np.float32))
    return folder


def assert_polite(r, code):
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


@pytest.mark.parametrize("label, header", [
    ("tokenizer", "{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }"),
    ("sigfpe", "{'descr': [], 'fortran_order': False, 'shape': (-1,), }"),
    ("dim 2**63", f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({2**63},), }}"),
    ("negative", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }"),
    ("structured", "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }"),
    ("code", "__import__('os').system('echo pwned')"),
])
def test_one_hostile_npy_header_never_stops_the_folder(tmp_path, label, header):
    folder = golden_folder(tmp_path)
    (folder / "broken.0.9.npy").write_bytes(npy_bytes(header, bytes(24)))
    r = accuscope("inspect", folder)
    assert_polite(r, 1)
    assert "tensors 4" in r.stdout and "1 problem" in r.stdout
    assert "broken.0.9.npy:" in r.stdout and "pwned" not in r.stdout


def test_npy_header_parser_agrees_with_numpy_on_real_files(tmp_path):
    for i, arr in enumerate([np.zeros((2, 3), np.float16), np.ones((0, 4), np.int64), np.array(3.5),
                             np.asfortranarray(np.arange(12.0).reshape(3, 4)), np.zeros(5, bool),
                             np.zeros((1, 2, 3), np.complex64)]):
        np.save(tmp_path / f"a{i}.0.{i}.npy", np.asarray(arr))
    dump = open_golden(tmp_path)
    assert not dump.problems
    for t in dump.tensors:
        ref = np.load(tmp_path / f"{t.op}.0.{t.timestamp}.npy")
        assert (t.shape, t.dtype) == (ref.shape, ref.dtype)
        np.testing.assert_array_equal(t.load(), ref)


@pytest.mark.parametrize("kind", ["symlink loop", "fifo", "directory"])
def test_special_files_named_npy_are_skipped_with_a_reason(tmp_path, kind):
    folder = golden_folder(tmp_path)
    target = folder / "odd.0.9.npy"
    {"symlink loop": lambda: os.symlink(target.name, target), "fifo": lambda: os.mkfifo(target),
     "directory": target.mkdir}[kind]()
    dump = open_golden(folder)
    assert len([t for t in dump.tensors if not t.problem]) == 3
    assert [p.path for p in dump.problems] == [str(target)]


def test_fifo_given_as_the_input_is_refused_not_waited_on(tmp_path):
    for name in ("m.onnx", "m.json", "g.npz", "r.csv"):
        os.mkfifo(tmp_path / name)
    for call in (lambda: load_graph(tmp_path / "m.onnx"), lambda: load_graph(tmp_path / "m.json"),
                 lambda: open_golden(tmp_path / "g.npz"), lambda: read_result_csv(tmp_path / "r.csv")):
        with pytest.raises(SourceError, match="named pipe"):
            call()


@pytest.mark.parametrize("content", [
    b"1.npy," + b"x" * 200_000 + b"\n2.npy,b.0.1.npy\n", b"1.npy,a\x00b.0.1.npy\n", b"1.npy,\xff\xfe.0.1.npy\n"])
def test_damaged_mapping_csv_keeps_every_tensor(tmp_path, content):
    folder = golden_folder(tmp_path)
    np.save(folder / "1.npy", np.zeros(3, np.float32))
    (folder / "mapping.csv").write_bytes(content)
    dump = open_golden(folder)
    assert len([t for t in dump.tensors if not t.problem]) == 4


def test_unreadable_mapping_csv_is_a_problem_not_an_abort(tmp_path):
    folder = golden_folder(tmp_path)
    os.symlink("mapping.csv", folder / "mapping.csv")
    dump = open_golden(folder)
    assert len(dump.tensors) == 3
    assert "mapping.csv" in str(dump.problems[0]) and "not read" in str(dump.problems[0])


def _npz_with_patched_member(tmp_path, local_at: int, central_at: int, value: bytes, compressed=False):
    path = tmp_path / "g.npz"
    (np.savez_compressed if compressed else np.savez)(path, bad=np.zeros(4, np.float32), good=np.ones(4, np.float32))
    data = bytearray(path.read_bytes())
    data[local_at:local_at + len(value)] = value  # the first member's local header starts at 0
    cd = data.find(b"PK\x01\x02")
    data[cd + central_at:cd + central_at + len(value)] = value
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("what, local_at, central_at, value", [
    ("encrypted", 6, 8, struct.pack("<H", 1)),
    ("unknown compression method", 8, 10, struct.pack("<H", 99)),
    ("bzip2 claimed on deflate data", 8, 10, struct.pack("<H", 12)),
])
def test_npz_member_damage_is_that_member_s_problem(tmp_path, what, local_at, central_at, value):
    path = _npz_with_patched_member(tmp_path, local_at, central_at, value, compressed=True)
    dump = open_golden(path)
    good = dump.find_tensor("good")
    assert good is not None
    np.testing.assert_array_equal(good.load(), np.ones(4, np.float32))
    assert present(dump.find_tensor("bad")).problem and "bad" in str(dump.problems[0])


def _dump_with(tmp_path, name, fmt, storage, original):
    """A one-output dump whose output has the given storage format and shapes (payload zeros)."""
    msg, payloads = ascend.build_header("op", [], [DumpTensor(np.zeros((1, 16, 2, 2), np.float16), "NC1HWC0")])
    item = msg.output[0]
    item.format = ascend.FORMAT_NAMES.index(fmt)
    del item.shape.dim[:], item.original_shape.dim[:]
    item.shape.dim.extend(storage)
    item.original_shape.dim.extend(original)
    item.size = int(np.prod(storage)) * 2
    ascend.write_raw(tmp_path / name, msg, [bytes(item.size)])


@pytest.mark.parametrize("fmt, storage, original", [
    ("NC1HWC0", (1, 1, 2, 2, 0), (1, 3, 2, 2)),
    ("FRACTAL_Z", (0, 1, 16, 16), (16, 3, 0, 0)),
    ("FRACTAL_NZ", (1, 1, 1, 16, 0), (1, 16, 0)),
    ("ND", (0, 2**63), (0, 2**63)),
])
def test_degenerate_storage_shapes_are_reported_or_load_empty(tmp_path, fmt, storage, original):
    _dump_with(tmp_path, "Op.op.1.1700000000000001", fmt, storage, original)
    write_dump_file(tmp_path / "Relu.good.2.1700000000000002", "good", [], [DumpTensor(np.ones(3, np.float32))])
    dump = open_npu_dump(tmp_path)
    good = dump.find_op("good")
    assert good is not None
    np.testing.assert_array_equal(good.outputs[0].load(), np.ones(3, np.float32))
    t = present(dump.find_op("op")).outputs[0]
    assert t.problem or t.load().size == 0


def test_dump_header_claiming_3_gib_is_refused_within_bounded_memory(tmp_path):
    header = ascend.build_header("op", [], [DumpTensor(np.ones(3, np.float32))])[0].SerializeToString()
    path = tmp_path / "Relu.op.1.1700000000000001"
    path.write_bytes(struct.pack("<Q", 3 << 30) + header)
    with open(path, "r+b") as fh:
        fh.truncate((3 << 30) + 8)  # sparse: the claim fits in the file
    limit = 1 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    r = subprocess.run([sys.executable, "-m", "accuscope", "inspect", str(path)], capture_output=True, text=True,
                       preexec_fn=cap, env={**os.environ, "COLUMNS": "200"}, timeout=120)
    assert_polite(r, 2)
    assert "exceeds 64 MiB" in r.stdout + r.stderr


@pytest.mark.parametrize("doc", [
    {"graph": [{"op": [{"name": "a", "type": "Relu", "input": 5}]}]},
    {"graph": [{"op": [{"name": "a", "type": "Relu", "output_desc": ["x"]}]}]},
    {"graph": [{"op": [{"name": ["a"], "type": {"t": 1}, "attr": [{"key": "k", "value": {"f": "x"}}]}]}]},
    {"graph": [{"op": [{"name": "a", "type": "Relu", "id": float("inf")}]}]},
    {"graph": [{"op": [{"name": "a"}, {"name": "b", "input": ["a:1000000000000"]}]}]},
])
def test_om_json_of_wrong_types_loads_what_it_can(tmp_path, doc):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    g = load_graph(path)
    assert all(len(n.outputs) < 1000 for n in g.nodes)


@pytest.mark.parametrize("name, text", [
    ("digits.json", '{"graph": [{"op": [{"id": ' + "9" * 5000 + "}]}]}"),
    ("deep.prototxt", "layer " + "{ a " * 20_000 + "}" * 20_000),
    ("escape.prototxt", 'layer { name: "\\x" }'),
])
def test_deeply_nested_or_hostile_model_text_is_one_line(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    r = accuscope("inspect", tmp_path / name)
    assert_polite(r, 2)
    assert str(tmp_path / name) in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"graph": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_deeply_nested_om_json_is_a_source_error(tmp_path, text):
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(SourceError, match="m.json"):
        load_graph(tmp_path / "m.json")


def test_onnx_node_name_that_is_not_utf8_is_shown_not_fatal(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    raw = helper.make_model(graph).SerializeToString().replace(b"relu", b"r\xffl\xfe")
    (tmp_path / "m.onnx").write_bytes(raw)
    g = load_graph(tmp_path / "m.onnx")
    assert g.nodes[0].name == "r\ufffdl\ufffd"
    assert onnx  # imported for the proto helpers


def test_convert_keeps_every_tensor_whose_names_collide(tmp_path):
    np.savez(tmp_path / "g.npz", **{"a/b": np.zeros(2, np.float32), "a.b": np.ones(2, np.float32),  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
                                    "a b": np.full(2, 2, np.float32), "a_b_1": np.full(2, 3, np.float32)})
    r = accuscope("convert", tmp_path / "g.npz", "--out", tmp_path / "out")
    assert_polite(r, 0)
    assert "wrote 4 files" in r.stdout and "renamed" in r.stdout
    back = open_golden(tmp_path / "out")
    assert sorted(t.op for t in back.tensors) == ["a b", "a.b", "a/b", "a_b_1"]
    for op, value in (("a/b", 0), ("a.b", 1), ("a b", 2), ("a_b_1", 3)):
        t = next(t for t in back.tensors if t.op == op)
        np.testing.assert_array_equal(t.load(), np.full(2, value, np.float32))


def test_convert_gives_over_long_op_names_a_file_name_that_fits(tmp_path):
    np.savez(tmp_path / "g.npz", **{"x" * 400: np.zeros(2, np.float32)})  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
    report = convert(open_golden(tmp_path / "g.npz"), str(tmp_path / "out"))
    assert len(report.written) == 1 and not report.failed
    assert len(report.written[0]) <= 255
    assert open_golden(tmp_path / "out").tensors[0].op == "x" * 400


def test_escape_sequences_in_names_never_reach_the_terminal(tmp_path):
    write_dump_file(tmp_path / "Relu.op.1.1700000000000001", "\x1b[2J\x1b]0;pwned\x07op", [],
                    [DumpTensor(np.ones(3, np.float32))])
    r = accuscope("inspect", tmp_path)
    assert_polite(r, 0)
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "?[2J?]0;pwned?op" in r.stdout


def test_unusable_sources_raise_source_error_only(tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(SourceError):
        open_golden(tmp_path / "empty.npz")


def test_inspect_of_a_real_model_through_the_cli(cls_model):
    """The source registry hands every reader the dump options (pick ...); a model ignores them."""
    r = accuscope("inspect", cls_model)
    assert_polite(r, 0)
    assert "ONNX model" in r.stdout and "nodes " in r.stdout


def test_precision_from_a_task_without_a_reference_dump_reads_nothing_from_the_working_directory(tmp_path, monkeypatch):
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.thresholds import Thresholds
    from accuscope.engine.precision.fromtask import spec_from_task
    from accuscope.engine.tasks.task import load_task, save_task
    save_task(tmp_path / "task", {"model": None}, ResultTable.from_rows([]), Thresholds())
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "dump.json").write_text('{"inputs": {"x": [1]}, "timestamp": 1}')
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(SourceError, match="names no reference dump"):
        spec_from_task(load_task(tmp_path / "task"), tmp_path / "model.onnx")
