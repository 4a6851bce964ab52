"""A chain of stages in one task, through the real entry point, on chains the real tools wrote: tpu-mlir's
top -> tpu -> bmodel of one model at F16 and INT8 (the conformance corpus), fp32 -> ORT-optimised -> fp16
with a fault planted in one stage's node, and two fp16 builds of onnxconverter-common (its default range
clamp against one keeping the clamped op in fp32). Each names the stage and the op; a passing chain
names none."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.chains import clamp_builds, optimised_fp16_chain
from support.cli import accuscope
from support.data import CACHE, FIXTURES
from support.narrow import present

TPUMLIR = FIXTURES / "conformance" / "tpumlir"
REFERENCE = TPUMLIR / "tfm" / "tfm_onnx_all.npz"
TOP = TPUMLIR / "tfm" / "tfm_top_outputs.npz"


def deployment(mode: str) -> tuple[Path, Path]:
    """The tpu MLIR and bmodel outputs of the tiny transformer deployed at `mode` (f16, int8_sym)."""
    folder = TPUMLIR / f"tfm-{mode.split('_')[0]}"
    return folder / f"tfm_bm1684x_{mode}_tpu_outputs.npz", folder / f"tfm_bm1684x_{mode}_model_outputs.npz"


def chain_json(proc) -> dict:
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_tpumlir_int8_chain_names_the_stage_and_op_where_the_error_enters(tmp_path):
    tpu, bmodel = deployment("int8_sym")
    out = tmp_path / "task"
    r = accuscope("compare", "--golden", REFERENCE, "--npu", f"top={TOP}", "--npu", f"tpu={tpu}",
                  "--npu", f"bmodel={bmodel}", "--out", out, "--json", "--fail-on-error", "--advisor")
    assert r.returncode == 1, r.stderr
    doc = chain_json(r)
    # top agrees with ONNX; tpu at INT8 breaks red 0.05 first at the second block's attention projection
    # (npz_tool's own tpu-vs-onnx log fails the same tensors), which its step against top shows too
    assert doc["entered"]["stage"] == "tpu"
    assert doc["entered"]["op"] == "blocks.1.attn.proj/Add_Add"
    assert doc["entered"]["previous"] == "top"
    assert doc["regressions"] == []
    assert [(s["label"], s["verdict"]["outcome"]) for s in doc["stages"]] == \
        [("top", "pass"), ("tpu", "fail"), ("bmodel", "fail")]
    assert [(s["task"], s["step"]) for s in doc["stages"]] == \
        [("stages/top", None), ("stages/tpu", {"task": "steps/tpu", "against": "top", "rows": 9}),
         (".", {"task": "steps/bmodel", "against": "tpu", "rows": 1})]
    assert doc["chain"]["verdict"] == "fail"
    assert doc["judgement"]["outcome"] == "fail"  # today's keys: the chain folder's own stage (bmodel)
    # --advisor: from the stage of entry, its step against top (the chain folder's own bmodel fails its output)
    assert (doc["verdict"]["rule"], doc["verdict"]["op"]) == ("chain", "blocks.1.attn.proj/Add_Add")
    assert doc["verdict"]["evidence"]["stage"] == "tpu" and doc["verdict"]["evidence"]["advised"] == "steps/tpu"
    assert (out / "advice.json").exists() and (out / "steps" / "tpu" / "advice.json").exists()
    assert "enters at tpu: blocks.1.attn.proj/Add_Add" in r.stderr
    # the sub-tasks: each other stage against the reference, each failing stage against the one before
    assert (out / "stages" / "top" / "task.json").exists() and (out / "stages" / "tpu" / "task.json").exists()
    assert (out / "steps" / "tpu" / "task.json").exists()
    chain = json.loads((out / "task.json").read_text())["chain"]
    assert [s["task"] for s in chain["stages"]] == ["stages/top", "stages/tpu", "."]
    assert chain["entered"]["op"] == "blocks.1.attn.proj/Add_Add"
    shown = accuscope("show", out, "--format", "json")  # the chain folder is an ordinary task too
    assert shown.returncode == 0, shown.stderr


def test_tpumlir_f16_chain_passes_and_names_no_stage(tmp_path):
    tpu, bmodel = deployment("f16")
    r = accuscope("compare", "--golden", REFERENCE, "--npu", f"top={TOP}", "--npu", f"tpu={tpu}",
                  "--npu", f"bmodel={bmodel}", "--out", tmp_path / "task", "--json", "--fail-on-error")
    assert r.returncode == 0, r.stderr
    doc = chain_json(r)
    assert doc["entered"] is None and doc["regressions"] == []
    assert doc["chain"]["verdict"] == "pass"
    assert not (tmp_path / "task" / "steps").exists() or not any((tmp_path / "task" / "steps").iterdir())
    assert "no error enters" in r.stderr


def test_a_tpumlir_work_folder_alone_is_its_stages(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    tpu, bmodel = deployment("int8_sym")
    for f in (TOP, tpu, bmodel):
        os.symlink(f, work / f.name)
    r = accuscope("compare", "--golden", REFERENCE, "--npu", work, "--out", tmp_path / "task", "--json")
    assert r.returncode == 0, r.stderr
    doc = chain_json(r)
    assert [s["label"] for s in doc["stages"]] == ["top", "tpu", "bmodel"]
    assert (doc["entered"]["stage"], doc["entered"]["op"]) == ("tpu", "blocks.1.attn.proj/Add_Add")
    # two deployments in one folder are two chains: say so, name one's stages
    f16 = deployment("f16")[0]
    os.symlink(f16, work / f16.name)
    r = accuscope("compare", "--golden", REFERENCE, "--npu", work, "--out", tmp_path / "other")
    assert r.returncode == 2
    assert "2 deployments" in r.stderr and "--npu top=" in r.stderr
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("args, said", [
    (["--npu", f"top={TOP}", "--npu", f"top={TOP}"], "the label 'top' names another stage"),
    (["--npu", f"top={TOP}", "--npu", "tpu=/nonexistent.npz"], "/nonexistent.npz: no such file"),
    (["--npu", f"old={TOP}", "--npu", f"new={TOP}", "--baseline", "older"], "--baseline older: names none"),
    (["--npu", f"top={TOP}", "--npu", f"json={TPUMLIR / 'cases.json'}"], "stage json against the reference: "),
    (["--npu", f"a={TOP}", "--npu", f"b={TOP}", "--tui"], "runs without --tui"),
])
def test_a_chain_that_cannot_be_is_refused_naming_why(tmp_path, args, said):
    r = accuscope("compare", "--golden", REFERENCE, *args, "--out", tmp_path / "task")
    assert r.returncode == 2
    assert said in r.stderr
    assert not (tmp_path / "task").exists()


@pytest.mark.parametrize("plant_in", ["opt", "fp16"])
def test_onnx_chain_names_the_stage_and_node_of_a_planted_fault(cls_model, tmp_path, plant_in):
    """fp32 -> ORT-optimised -> fp16, the fault in the optimised model (the fp16 model, converted from
    it, inherits it: its own step holds) or in the fp16 model alone."""
    import numpy as np
    stages, planted = optimised_fp16_chain(cls_model, tmp_path / "models", plant_in)
    np.save(tmp_path / "x.npy", np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32))
    r = accuscope("run", cls_model, *(f"{k}={v}" for k, v in stages.items()), "--input", f"x={tmp_path / 'x.npy'}",
                  "--out", tmp_path / "task", "--json", "--fail-on-error")
    assert r.returncode == 1, r.stderr
    doc = chain_json(r)
    assert (doc["entered"]["stage"], doc["entered"]["op"]) == (plant_in, planted)
    assert doc["entered"]["own"] is True
    if plant_in == "opt":  # the report and the overlay carry the stage of entry
        r = accuscope("report", tmp_path / "task", "--out", tmp_path / "report.md")
        assert r.returncode == 0, r.stderr
        report = (tmp_path / "report.md").read_text()
        assert "a chain of opt -&gt; fp16 (this report: fp16 against the reference)" in report
        assert f"fail: enters at opt: {planted}, " in report
        r = accuscope("overlay", tmp_path / "task", "--out", tmp_path / "nd.json")
        assert r.returncode == 0, r.stderr
        (data,) = json.loads((tmp_path / "nd.json").read_text()).values()
        assert data["name"] == f"accuscope cos · error enters at opt: {planted}"


def test_onnx_chain_without_a_fault_names_no_stage(cls_model, tmp_path):
    import numpy as np
    stages, _ = optimised_fp16_chain(cls_model, tmp_path / "models", "")
    np.save(tmp_path / "x.npy", np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32))
    r = accuscope("run", cls_model, *(f"{k}={v}" for k, v in stages.items()), "--input", f"x={tmp_path / 'x.npy'}",
                  "--out", tmp_path / "task", "--json", "--fail-on-error")
    assert r.returncode == 0, r.stderr
    doc = chain_json(r)
    assert doc["entered"] is None and doc["chain"]["verdict"] == "pass"


def test_two_builds_of_one_conversion_name_the_clamped_op_as_the_regression(tmp_path):
    ref, builds, clamped = clamp_builds(tmp_path / "models")
    r = accuscope("run", ref, f"keep={builds['keep']}", f"default={builds['default']}", "--baseline", "keep",
                  "--input", f"x={tmp_path / 'models' / 'x.npy'}", "--out", tmp_path / "task", "--json",
                  "--fail-on-error")
    assert r.returncode == 1, r.stderr
    doc = chain_json(r)
    assert doc["regressions"][0]["op"] == clamped
    assert doc["regressions"][0]["now"] > 100 * doc["regressions"][0]["baseline"]
    assert (doc["entered"]["stage"], doc["entered"]["op"]) == ("default", clamped)
    assert doc["chain"]["baseline"] == "keep" and doc["chain"]["now"] == "default"
    assert doc["improvements"] == []
    # the other way round, the kept op is the improvement and nothing regressed
    r = accuscope("run", ref, f"default={builds['default']}", f"keep={builds['keep']}", "--baseline", "default",
                  "--input", f"x={tmp_path / 'models' / 'x.npy'}", "--out", tmp_path / "back", "--json",
                  "--fail-on-error")
    assert r.returncode == 0, r.stderr
    doc = chain_json(r)
    assert doc["regressions"] == [] and doc["improvements"][0]["op"] == clamped


DOC = FIXTURES.parents[1] / "docs" / "chain.md"


def test_the_docs_compare_examples_run_as_written(tmp_path):
    """docs/chain.md's `accuscope compare` examples on the committed corpus, as written (their paths from
    the repository root, --out in a temporary folder); the chain line the page shows is the one printed."""
    import re
    import shlex
    text = DOC.read_text()
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```sh\n(.*?)```", text, re.S)]
    runs = [shlex.split(b) for b in blocks if "tests/fixtures/" in b]
    assert len(runs) == 2
    shown = present(re.search(r"^chain ✗ fail: enters at .*$", text, re.M)).group(0)
    for k, words in enumerate(runs):
        assert words[:2] == ["accuscope", "compare"]
        out = words.index("--out")
        words[out + 1] = str(tmp_path / f"t{k}")
        words = [w.replace("tests/fixtures/", f"{FIXTURES}/", 1) if w.startswith(("tests/", "top=", "tpu=", "bmodel="))
                 else w for w in words]  # the repository root's paths, from here
        r = accuscope(*words[1:])
        assert r.returncode == 0, r.stderr
        if k == 0:
            assert shown in r.stdout
        else:
            assert "no error enters" in r.stdout


CORPUS = CACHE / "conformance" / "tpumlir"
MODE_TOLERANCE = {"f16": "0.99,0.90", "int8": "0.90,0.80"}  # model_deploy's defaults for the mode


def npz_tool_first_failure(log: Path) -> str | None:
    """The first tensor npz_tool's own log fails (NOT_SIMLIAR, its spelling; NOT_EQUAL, NOT_MATCH), None
    when it printed `npz compare PASSED.`."""
    import re
    text = log.read_text()
    if "npz compare FAILED." not in text:
        return None
    return present(re.search(r"^\[(\S+)\s*\]\s+NOT_(?:SIMLIAR|EQUAL|MATCH)", text, re.M)).group(1)


@pytest.mark.parametrize("model, mode", [("cls", "f16"), ("cls", "int8"), ("det", "f16"), ("det", "int8"),
                                         ("rec", "f16"), ("rec", "int8")])
def test_tpumlir_chains_enter_where_npz_tool_first_fails(tmp_path, model, mode):
    """The truth from tpu-mlir's own checks, run as its tools run them (the corpus's npz_tool logs): the first
    stage whose check fails (top against ONNX, tpu against top, the bmodel against tpu) and the first tensor
    it fails; none where every check passed. The chain, at the mode's tolerance, names the same. (cls at
    INT8: its bmodel's one output, `..._Softmax__softmax_reshape_f32`, is the ONNX Softmax's result, lowered
    into a softmax and a reshape; it paired with no ONNX tensor, and the chain stopped there.)"""
    deploy = CORPUS / f"{model}-{mode}"
    if not deploy.is_dir():
        pytest.skip(f"{deploy}: the cached conformance corpus (tests/fixtures/conformance/tpumlir/make_corpus.py)")
    checks = [("top", CORPUS / model / f"npz_tool_{model}-top-vs-onnx.log"),
              ("tpu", deploy / f"npz_tool_{model}-{mode}-tpu-vs-top.log"),
              ("bmodel", deploy / f"npz_tool_{model}-{mode}-model-vs-tpu.log")]
    truth = next(((stage, op) for stage, log in checks if (op := npz_tool_first_failure(log))), None)
    r = accuscope("compare", "--golden", CORPUS / model / f"{model}_onnx_all.npz",
                  "--npu", f"top={CORPUS / model / f'{model}_top_outputs.npz'}",
                  "--npu", f"tpu={next(deploy.glob('*_tpu_outputs.npz'))}",
                  "--npu", f"bmodel={next(deploy.glob('*_model_outputs.npz'))}",
                  "--tolerance", MODE_TOLERANCE[mode], "--out", tmp_path / "task", "--json")
    assert r.returncode == 0, r.stderr
    entered = chain_json(r)["entered"]
    assert (None if entered is None else (entered["stage"], entered["op"])) == truth
