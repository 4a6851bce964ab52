"""The CLI tells the truth about what it could not do: missing paths, failed tasks, inputs cast on
the way in, an app that cannot start, names from data that carry terminal escape sequences."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest


def accuscope(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300, **kw)


def test_open_a_missing_path_says_it_is_missing(tmp_path):
    r = accuscope("open", tmp_path / "nope")
    assert r.returncode == 2 and "nope: no such file or folder" in r.stderr


def test_op_on_a_failed_task_says_the_task_failed(tmp_path):
    (tmp_path / "task.json").write_text(json.dumps({"state": "failed", "error": "the NPU folder vanished",
                                                    "npu": str(tmp_path / "x"), "golden": str(tmp_path / "y")}))
    r = accuscope("op", tmp_path, "conv1")
    assert r.returncode == 2
    assert "the task failed: the NPU folder vanished" in r.stderr and "Traceback" not in r.stderr


def test_compare_tui_that_cannot_start_exits_2_before_any_screen(tmp_path):
    r = accuscope("compare", "--npu", tmp_path / "typo", "--golden", tmp_path, "--out", tmp_path / "t", "--tui",
                  stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "typo: no such file or folder" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "t").exists()


def test_dump_names_its_flags_and_announces_casts(cls_model, tmp_path):
    r = accuscope("dump", cls_model, "--out", tmp_path / "a")
    assert r.returncode == 2 and "--input NAME=FILE.npy" in r.stderr and "--random-inputs" in r.stderr
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 48, 192), np.float64))
    r = accuscope("dump", cls_model, "--out", tmp_path / "b", "--input", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 0, r.stderr
    assert "input x given as float64, cast to float32" in r.stderr


def test_global_workspace_is_not_dropped_by_a_subcommand(tmp_path):
    r = accuscope("--workspace", tmp_path / "ws", "demo", "--no-tui")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ws" / "tinynet-fp16-int4" / "task.json").is_file()


@pytest.mark.parametrize("evil", ["\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m"])
def test_escape_sequences_in_names_never_reach_the_terminal(tmp_path, evil):
    for side, sign in (("npu", -1), ("golden", 1)):
        (tmp_path / side).mkdir()
        for k, op in enumerate(["conv", f"relu{evil}x"]):
            values = np.arange(1, 7, dtype=np.float32) * (sign if k else 1)  # relu's sides disagree
            np.save(tmp_path / side / f"{op}.0.{1700000000000000 + k}.npy", values)
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    assert "first failing: relu?" in r.stdout  # the name is shown, its control characters are not
    for stream in (r.stdout, r.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream and "\x07" not in stream


def test_special_files_never_block_detection(tmp_path):
    import os
    os.mkfifo(tmp_path / "model.onnx")  # a FIFO named like a model: reading it would block forever
    r = accuscope("inspect", tmp_path / "model.onnx")
    assert r.returncode == 2 and "named pipe (FIFO), not a regular file" in r.stderr
    folder = tmp_path / "golden"
    folder.mkdir()
    (folder / "a.npy").symlink_to(folder / "a.npy")  # a symlink loop scanned before the good file
    np.save(folder / "b.npy", np.ones(3, np.float32))
    r = accuscope("inspect", folder)
    assert r.returncode == 1 and "a.npy: cannot read" in r.stdout and "tensors 1" in r.stdout


def test_cli_tables_fold_names_where_their_parts_join(ws):
    """At 80 columns an op name is wrapped after `/`, not in the middle of a word."""
    import os

    from accuscope.engine.demo.workspace import MAIN
    r = subprocess.run([sys.executable, "-m", "accuscope", "inspect", str(ws / MAIN.name / "npu"), "--limit", "12"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    cells = [line[:17].rstrip() for line in r.stdout.splitlines()]
    assert "Conv/stem/relu/" in cells and "/stem/conv/" in cells  # broken where the parts join
    assert not any(c.endswith(("/Re", "/Co", "relu1/R")) for c in cells)
