"""Deep structures through the real entry point: exit 2 (or a problem) with a message naming the file,
never exit 3 with a RecursionError (JSON a few thousand deep is a few KB of brackets)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
NESTED = "[" * 3000 + "]" * 3000
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
          "Norm": 1.0}


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          env=ENV, timeout=300)


def rank_folder(root: Path, dump: str | None = None, construct: str | None = None) -> Path:
    folder = root / "step0" / "rank0"
    folder.mkdir(parents=True)
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
           "data": {"Functional.relu.0.forward": {"input_args": [TENSOR], "output": [TENSOR]}}}
    (folder / "dump.json").write_text(dump if dump is not None else json.dumps(doc))
    if construct is not None:
        (folder / "construct.json").write_text(construct)
    return folder


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stdout + r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_task_json_nested_3000_deep(tmp_path):
    (tmp_path / "task.json").write_text(NESTED)
    r = accuscope("show", tmp_path)
    no_traceback(r)
    assert r.returncode == 2 and f"{tmp_path / 'task.json'}: unreadable: nested too deeply" in r.stderr


def test_a_dump_json_nested_3000_deep(tmp_path):
    folder = rank_folder(tmp_path / "npu", dump='{"task": "statistics", "level": "L1", "data": ' + NESTED + "}")
    rank_folder(tmp_path / "golden")
    r = accuscope("inspect", tmp_path / "npu")
    no_traceback(r)
    assert r.returncode == 2 and f"{folder / 'dump.json'}: nested too deeply" in r.stderr
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--stats-only", "--out",
                  tmp_path / "t")
    no_traceback(r)
    assert r.returncode == 2 and f"{folder / 'dump.json'}: nested too deeply" in r.stderr


def test_a_construct_json_nested_3000_deep_is_a_problem_naming_it(tmp_path):
    """As a construct.json that is not JSON: the hierarchy is lost, the calls are still read."""
    folder = rank_folder(tmp_path / "npu", construct=NESTED)
    r = accuscope("inspect", tmp_path / "npu")
    no_traceback(r)
    assert r.returncode == 1 and f"{folder / 'construct.json'}: unreadable, no module hierarchy (nested too deeply" \
        in r.stdout + r.stderr
    rank_folder(tmp_path / "golden")
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--stats-only", "--out",
                  tmp_path / "t")
    no_traceback(r)
    assert r.returncode == 0


def test_a_folder_tree_1100_deep(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1100):  # os.makedirs and shutil.rmtree recurse per level: built and removed by hand
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    try:
        r = accuscope("inspect", root)
        no_traceback(r)
        assert r.returncode == 2 and f"{root}: not a dump" in r.stderr
    finally:
        path = root.joinpath(*["d"] * 1100)
        while path != tmp_path:
            os.rmdir(path)
            path = path.parent
