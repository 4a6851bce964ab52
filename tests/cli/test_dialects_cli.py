"""Platform dialects through the real entry point: each is found by `detect` from its content and
compared by `accuscope compare` like any other source (the writers are test_dialects')."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from accuscope.engine.sides.registry import detect
from accuscope.engine.tasks.task import load_task
from support.dialects import save_npz, write_atb, write_ms_step
from support.narrow import present


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_tpumlir_actual_desired_is_one_file_holding_both_sides(tmp_path, cls_run):
    both = {}
    for _, t, out, a in cls_run[:12]:
        both[f"{out}_{t}_actual"] = a.astype(np.float16).astype(np.float32)  # the device side, float16
        both[f"{out}_{t}_desired"] = a
    path = save_npz(tmp_path / "tdb_err.npz", both)
    assert detect(str(path)).kind == "tpu-mlir-npz"
    r = accuscope("compare", path, "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tpu-mlir-npz" in r.stdout and "paired 12 of 12" in r.stdout
    meta = json.loads((tmp_path / "t" / "task.json").read_text())
    assert (meta["npu_runner"], meta["golden_runner"]) == ("actual", "desired")
    cos = present(load_task(tmp_path / "t").table).numbers("cos")
    assert (cos > 0.9999).all() and (cos < 1).any()  # float16 rounding, nothing more


def test_mindspore_dump_against_another_step(tmp_path, cls_run):
    run = cls_run[:20]
    write_ms_step(tmp_path / "a" / "rank_0" / "Net" / "step_0", run)
    drifted = [(n, t, o, a * np.float32(1.5) if k == 7 else a) for k, (n, t, o, a) in enumerate(run)]
    write_ms_step(tmp_path / "b" / "rank_0" / "Net" / "step_0", drifted)
    assert detect(str(tmp_path / "a")).kind == "mindspore"
    r = accuscope("compare", "--npu", tmp_path / "b", "--golden", tmp_path / "a", "--out", tmp_path / "t",
                  "--threshold", "red=0.01")
    assert r.returncode == 0, r.stdout + r.stderr
    c = present(load_task(tmp_path / "t").table).columns
    assert len(c["fail"]) == 20 and c["how"].tolist() == ["name"] * 20
    first = int(np.flatnonzero(c["fail"])[0])
    assert first == 7 and c["npu_op"][first].endswith(run[7][0].replace("/", "--"))


def test_atb_rounds_compared_and_inspected(tmp_path, cls_run):
    for rnd, scale in (("0", 1.0), ("1", 1.001)):
        layer = tmp_path / rnd / "0_4242" / "0" / "0_ClsModel"
        for k, (_, op_type, _, a) in enumerate(cls_run[:6], 1):
            write_atb(layer / f"{k}_{op_type}Operation" / "after" / "outtensor0.bin", (a * scale).astype(np.float32))
    assert detect(str(tmp_path / "0")).kind == "atb"
    r = accuscope("compare", "--npu", tmp_path / "1", "--golden", tmp_path / "0", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "atb" in r.stdout and "paired 6 of 6" in r.stdout
    r = accuscope("inspect", tmp_path / "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dump (atb)" in r.stdout and "tensors 6" in r.stdout
    assert "tensors as each op ended (after/)" in r.stdout  # the dialect's own summary line
