"""A format's own options (sides.registry: atb round/when, tpu-mlir mlir/bf16) through the real entry
point: `inspect --option`, `compare --npu-option/--golden-option`, kept in task.json; and detection
once per path in one compare."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from accuscope.cli import main
from accuscope.engine.sides import registry
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.dialects import write_atb

TPU = Path(__file__).resolve().parents[1] / "fixtures" / "tpumlir"


@pytest.fixture
def atb_pair(tmp_path) -> tuple[Path, Path]:
    """Two ATB dumps of two rounds each: round 0 agrees, round 1 of the NPU side is off by half;
    `before/` holds each op's input, the same on both sides."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]
    for side in ("npu", "gold"):
        for rnd in ("0", "1"):
            layer = tmp_path / side / "0_4242" / rnd / "0_ClsModel"
            for k, a in enumerate(arrays, 1):
                scale = 1.5 if (side, rnd) == ("npu", "1") else 1.0
                write_atb(layer / f"{k}_ConvOperation" / "after" / "outtensor0.bin", a * scale)
                write_atb(layer / f"{k}_ConvOperation" / "before" / "intensor0.bin", a)
    for root in tmp_path.rglob("*"):  # written a moment ago, as a dump is (registry.RACY_NS)
        os.utime(root, ns=(time.time_ns() - 10**9, time.time_ns() - 10**9))
    return tmp_path / "npu", tmp_path / "gold"


def test_atb_inspect_advice_works_as_written(atb_pair):
    npu, _ = atb_pair
    r = accuscope("inspect", npu)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "round 0_4242/0 of 2 (choose with --option round=NAME)" in " ".join(r.stdout.split())
    r = accuscope("inspect", npu, "--option", "round=0_4242/1", "--option", "when=before")
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert "round 0_4242/1 of 2" in text and "tensors as each op started (before/)" in text
    assert "inputs 3, outputs 0" in text


def test_atb_compare_per_side_rounds_and_task_json(atb_pair, tmp_path):
    npu, gold = atb_pair
    r = accuscope("compare", "--npu", npu, "--golden", gold, "--out", tmp_path / "t0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing 0" in r.stdout  # round 0 by default: equal
    r = accuscope("compare", "--npu", npu, "--golden", gold, "--out", tmp_path / "t1",
                  "--npu-option", "round=0_4242/1", "--golden-option", "round=0_4242/1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing 3" in r.stdout
    meta = json.loads((tmp_path / "t1" / "task.json").read_text())
    assert meta["npu_options"] == {"round": "0_4242/1"} and meta["golden_options"] == {"round": "0_4242/1"}
    assert load_task(tmp_path / "t1").spec().npu_options == {"round": "0_4242/1"}  # `R` re-runs it as it was
    r = accuscope("compare", "--npu", npu, "--golden", gold, "--out", tmp_path / "t2",
                  "--npu-option", "round=0_4242/1", "--npu-option", "when=before", "--golden-option", "when=before")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing 0" in r.stdout  # the inputs agree


@pytest.mark.parametrize("args, message", [
    (("--npu-option", "rund=1"), "atb has no option 'rund' (its options: round, when)"),
    (("--npu-option", "when=during"), "atb option when: 'during': use after or before"),
    (("--npu-option", "round"), "expected NAME=VALUE"),
])
def test_a_wrong_option_is_unusable_input_naming_it(atb_pair, tmp_path, args, message):
    npu, gold = atb_pair
    r = accuscope("compare", "--npu", npu, "--golden", gold, "--out", tmp_path / "t", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in " ".join(r.stderr.split())


def test_an_option_for_a_format_without_options_is_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(3, np.float32))
    r = accuscope("inspect", tmp_path, "--option", "round=1")
    assert r.returncode == 2 and "npy has no option 'round' (it takes none)" in " ".join(r.stderr.split())


def test_tpumlir_mlir_and_bf16_options(tmp_path):
    npz, mlir = TPU / "cls_bm1684x_f16_tpu_outputs.npz", TPU / "cls_bm1684x_f16_tpu.mlir"
    r = accuscope("inspect", npz, "--option", f"mlir={mlir}", "--limit", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(tpu.Conv2D)" in r.stdout  # op types from the .mlir's loc table
    r = accuscope("inspect", npz, "--limit", "3")
    assert r.returncode == 0 and "(tpu.Conv2D)" not in r.stdout
    r = accuscope("inspect", npz, "--option", "bf16=maybe")
    assert r.returncode == 2 and "tpu-mlir-npz option bf16: 'maybe': answer yes or no" in " ".join(r.stderr.split())
    r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "compare", "--npu", npz.name, "--golden",
                        "cls_top_outputs.npz", "--out", tmp_path / "t", "--npu-option", f"mlir={mlir.name}",
                        "--npu-option", "bf16=no"], capture_output=True, text=True, timeout=300, cwd=TPU)
    assert r.returncode == 0, r.stdout + r.stderr
    options = json.loads((tmp_path / "t" / "task.json").read_text())["npu_options"]
    assert options == {"mlir": str(mlir), "bf16": "no"}  # a file option kept absolute: `R` from elsewhere finds it
    r = accuscope("inspect", npz, "--option", f"mlir={tmp_path}")
    assert r.returncode == 2 and "not a regular file" in r.stderr


def test_one_compare_detects_each_path_once(atb_pair, tmp_path, monkeypatch):
    """The command, its checks and the comparison all ask `detect`; the content is sniffed once per path."""
    npu, gold = atb_pair
    seen: list[str] = []
    sniff = registry.sniff_format

    def counted(path: str):
        seen.append(path)
        return sniff(path)
    monkeypatch.setattr(registry, "sniff_format", counted)
    monkeypatch.setattr(registry, "_DETECTED", {})
    assert main(["compare", "--npu", str(npu), "--golden", str(gold), "--out", str(tmp_path / "t")]) == 0
    assert sorted(seen) == sorted([str(npu), str(gold)])


def test_one_compare_lists_each_npy_folder_a_few_times(tmp_path, monkeypatch):
    """The format sniffs before the npy folder's (Ascend, msprobe, MindSpore, ATB) share one listing of
    it (inputfile.shared_listings): a folder of 20,000 files took ~10 ms a listing. One compare lists
    each side's folder twice: the sniffs with the rank-tree check (step and rank folders from the same
    listing; asked once: the command hands its answer to run_comparison), then the reader."""
    for side in ("npu", "gold"):
        (tmp_path / side).mkdir()
        for k in range(3):
            np.save(tmp_path / side / f"op{k}.0.{1700000000000000 + k}.npy", np.arange(4, dtype=np.float32) + k)
        past = time.time_ns() - 10**9  # not modified within a clock tick of its sniff: detected once
        os.utime(tmp_path / side, ns=(past, past))
    listed: list[str] = []
    scandir, listdir = os.scandir, os.listdir

    def counted(real):
        def call(path="."):
            listed.append(os.path.basename(os.fspath(path)))
            return real(path)
        return call
    monkeypatch.setattr(os, "scandir", counted(scandir))
    monkeypatch.setattr(os, "listdir", counted(listdir))
    monkeypatch.setattr(registry, "_DETECTED", {})
    assert registry.sniff_format(str(tmp_path / "npu")).kind == "npy"
    assert listed == ["npu"]
    listed.clear()
    monkeypatch.setattr(registry, "_DETECTED", {})
    assert main(["compare", "--npu", str(tmp_path / "npu"), "--golden", str(tmp_path / "gold"),
                 "--out", str(tmp_path / "t")]) == 0
    assert listed.count("npu") == listed.count("gold") == 2


def test_detection_is_asked_again_when_the_path_changes(tmp_path, monkeypatch):
    seen: list[str] = []
    sniff = registry.sniff_format

    def recorded(p):
        seen.append(p)
        return sniff(p)
    monkeypatch.setattr(registry, "sniff_format", recorded)
    monkeypatch.setattr(registry, "_DETECTED", {})
    path = tmp_path / "a.npz"
    np.savez(path, x=np.zeros(3))
    past = time.time_ns() - 10**9
    os.utime(path, ns=(past, past))
    assert registry.detect(path).kind == "npz" and registry.detect(str(path)).kind == "npz"
    assert len(seen) == 1
    np.savez(path, x=np.zeros(3), y_Conv=np.zeros(4), z_Relu=np.zeros(2))  # another content, another mtime/size
    registry.detect(path)
    assert len(seen) == 2
    soon = time.time_ns() + 10**9  # modified as late as sniffed (one clock tick): racy, never trusted
    os.utime(path, ns=(soon, soon))
    registry.detect(path)
    registry.detect(path)
    assert len(seen) == 4


def test_the_form_checks_options_against_the_sides_format(atb_pair):
    from accuscope.engine.compare.inputs import BY_NAME, build_spec, check, texts_of
    npu, gold = atb_pair
    item = BY_NAME["npu_options"]
    message, ok = check(item, "", npu=str(npu))
    assert ok and message.startswith("atb takes: round=NAME") and "when=after|before" in message
    assert check(item, "", npu=str(gold / "nowhere")) == ("", True)
    assert check(item, "round=0_4242/1 when=before", npu=str(npu)) == ("✓ atb: round=0_4242/1 when=before", True)
    message, ok = check(item, "turn=1", npu=str(npu))
    assert not ok and "atb has no option 'turn'" in message
    message, ok = check(BY_NAME["golden_options"], "round=1", golden="")
    assert not ok and "give the dump first" in message
    spec = build_spec({"npu": str(npu), "golden": str(gold), "npu_options": "round=0_4242/1 when=before"})
    assert spec.npu_options == {"round": "0_4242/1", "when": "before"} and spec.golden_options is None
    assert texts_of(spec)["npu_options"] == "round=0_4242/1 when=before"  # `R` fills the field again
