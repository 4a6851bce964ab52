"""NPU dump folders: the dump tree, file names, repeated ops, long names, broken files."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.names import parse_dump_name
from accuscope.engine.sources.npudump import open_npu_dump
from accuscope.engine.sources.tensor import SourceError
from support.data import ASCEND_FIXTURES
from support.narrow import present


@pytest.mark.parametrize("name, expected", [
    ("Conv2D.conv1.17.1763812800000123", ("Conv2D", "conv1", 17, None, (), 1763812800000123)),
    ("Conv2D.conv1.17.3.1763812800000123", ("Conv2D", "conv1", 17, 3, (), 1763812800000123)),
    ("Conv2D.conv1.17.1.2.3.1763812800000123", ("Conv2D", "conv1", 17, None, (1, 2, 3), 1763812800000123)),
    ("Conv2D.conv1.17.5.1.2.3.1763812800000123", ("Conv2D", "conv1", 17, 5, (1, 2, 3), 1763812800000123)),
])
def test_dump_names_with_and_without_stream_id_and_thread_suffix(name, expected):
    p = parse_dump_name(name)
    assert p is not None
    assert (p.op_type, p.op_name, p.task_id, p.stream_id, p.thread, p.timestamp) == expected


@pytest.mark.parametrize("name", ["mapping.csv", "acl.json", "Conv2D.conv1.x.1763812800000123",
                                  "Conv2D.conv1.17.123", "a.b", ".conv1.1.1763812800000123"])
def test_other_files_are_not_taken_for_dumps(name):
    assert parse_dump_name(name) is None


def _op(folder, op_type, name, task, ts, value=1.0, header_name=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{op_type}.{name}.{task}.{ts}"
    write_dump_file(path, header_name or name, outputs=[DumpTensor(np.full((2, 3), value, np.float32))])
    return path


def test_tree_from_the_top_picks_newest_time_and_lowest_data_index(tmp_path):
    base = tmp_path / "dump"
    old = base / "20250101000000" / "0" / "resnet" / "1"
    new = base / "20250102000000" / "0" / "resnet" / "1"
    _op(old / "0", "Relu", "r", 1, 1700000000000001, 1.0)
    _op(new / "0", "Relu", "r", 1, 1700000000000002, 2.0)
    _op(new / "1", "Relu", "r", 1, 1700000000000003, 3.0)
    dump = open_npu_dump(base)
    assert dump.run_dir == str(new / "0") and len(dump.runs) == 3
    assert dump.files[0].outputs[0].load()[0, 0] == 2.0
    other = open_npu_dump(base, run="20250102000000/0/resnet/1/1")
    assert other.files[0].outputs[0].load()[0, 0] == 3.0
    with pytest.raises(SourceError, match="run folder 'nope' not found; runs: 20250102000000"):
        open_npu_dump(base, run="nope")


def test_repeated_op_newest_by_default_others_selectable(tmp_path):
    run = tmp_path / "run"
    for ts in (1700000000000005, 1700000000000001, 1700000000000009):
        _op(run, "MatMul", "loop_mm", 4, ts, float(ts % 10))
    _op(run, "Add", "after", 5, 1700000000000010)
    dump = open_npu_dump(run)
    assert [f.op_name for f in dump.files] == ["loop_mm", "after"]
    assert len(dump.versions["loop_mm"]) == 3
    assert present(dump.find_op("loop_mm")).outputs[0].load()[0, 0] == 9.0
    assert present(open_npu_dump(run, pick="oldest").find_op("loop_mm")).outputs[0].load()[0, 0] == 1.0
    assert present(open_npu_dump(run, pick=1).find_op("loop_mm")).outputs[0].load()[0, 0] == 5.0


def test_execution_order_follows_timestamps_not_names(tmp_path):
    run = tmp_path / "run"
    _op(run, "Relu", "zz_first", 1, 1700000000000001)
    _op(run, "Add", "aa_second", 2, 1700000000000002)
    _op(run, "Mul", "mm_third", 3, 1700000000000003)
    assert [f.op_name for f in open_npu_dump(run).files] == ["zz_first", "aa_second", "mm_third"]


def test_opdebug_records_are_skipped_and_long_names_resolved(tmp_path):
    run = tmp_path / "run"
    _op(run, "Opdebug", "Node_OpDebug", 9, 1700000000000009)
    long_op = "encoder_" + "x" * 300
    path = _op(run, "Conv2D", "short", 1, 1700000000000001, header_name="encoder/" + "x" * 300)
    path.rename(run / "12345678")
    (run / "mapping.csv").write_text(f"12345678,Conv2D.{long_op}.1.1700000000000001\n")
    dump = open_npu_dump(run)
    assert dump.skipped_opdebug == 1 and len(dump.files) == 1
    f = dump.files[0]
    assert f.name is not None
    assert f.op_type == "Conv2D" and f.name.op_name == long_op and f.op_name == "encoder/" + "x" * 300
    assert dump.find_op("encoder/" + "x" * 300) is f


def test_broken_files_are_listed_and_the_rest_loads(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(ASCEND_FIXTURES, run, ignore=shutil.ignore_patterns("expected.*", "*.md"))
    dump = open_npu_dump(run)
    assert len(dump.files) == 6 and len(dump.problems) == 3
    assert {p.path.split("/")[-1].split(".")[1] for p in dump.problems} == {
        "truncated_payload", "header_too_long", "garbage"}
    ok = [f for f in dump.files if not f.problem]
    assert sum(len(f.tensors) for f in ok) == 9
    assert all(t.load() is not None for f in ok for t in f.tensors)


def test_single_file_and_unusable_paths(tmp_path):
    dump = open_npu_dump(ASCEND_FIXTURES / "Mul.mask_mul.19.1763812800000789")
    assert [f.op_name for f in dump.files] == ["mask_mul"]
    with pytest.raises(SourceError, match="no such file or folder"):
        open_npu_dump(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no Ascend dump files found"):
        open_npu_dump(tmp_path / "empty")
    (tmp_path / "x.npy").write_bytes(b"nope")
    with pytest.raises(SourceError, match="not an Ascend dump file"):
        open_npu_dump(tmp_path / "x.npy")
