"""The advisor on a chain task (docs/chain.md, "The advisor"), through the real entry point: it reasons
from the stage where the error enters (that stage's own step, against the stage before), names the stage
and the op first, re-runs the op from the stage before's model on the entering stage's own inputs, and
the op it names is the one to fix: the fault taken out of that node of that stage's model, the chain
passes. A chain where no error enters is advised on with no stage named."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.tasks.task import load_task
from support.chains import optimised_fp16_chain, repaired_chain
from support.cli import accuscope


def run_chain(model: Path, stages: dict[str, Path], x: Path, out: Path, *more: str):
    return accuscope("run", model, *(f"{k}={v}" for k, v in stages.items()), "--input", f"x={x}", "--out", out,
                     "--fail-on-error", *more)


@pytest.fixture()
def x(tmp_path) -> Path:
    np.save(tmp_path / "x.npy", np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32))
    return tmp_path / "x.npy"


@pytest.mark.parametrize("plant_in", ["opt", "fp16"])
def test_the_advisor_names_the_stage_and_node_of_a_planted_fault_and_fixing_it_passes(cls_model, tmp_path, x,
                                                                                     plant_in):
    """fp32 -> ORT-optimised -> fp16, a quarter of a Conv's channels negated in one stage: the advisor's
    headline is that stage and that Conv (the chain folder's own comparison, fp16 against the reference,
    headed by the failing output before), and the model fixed where it says passes."""
    stages, planted = optimised_fp16_chain(cls_model, tmp_path / "models", plant_in)
    task = tmp_path / "task"
    r = run_chain(cls_model, stages, x, task, "--json", "--advisor")
    assert r.returncode == 1, r.stderr
    head = json.loads(r.stdout)["verdict"]  # --advisor's headline in compare/run --json
    assert (head["rule"], head["op"], head["evidence"]["stage"]) == ("chain", planted, plant_in)
    assert head["title"].startswith(f"the error enters at {plant_in}: {planted}, ")

    a = accuscope("advise", task, "--json")
    assert a.returncode == 0, a.stderr
    advice = json.loads(a.stdout)
    step = "stages/opt" if plant_in == "opt" else "steps/fp16"  # the first stage's step: the reference
    assert advice["chain"] == {"stage": plant_in, "advised": step}
    assert (advice["verdict"]["op"], advice["verdict"]["evidence"]["advised"]) == (planted, step)
    # the headline's row is the chain folder's own table's row of that op (fp16's), as the app jumps to it
    assert load_task(task).table.columns["npu_op"][advice["verdict"]["row"]] == planted
    assert (task / step / "advice.json").exists() and (task / "advice.json").exists()
    if plant_in == "fp16":  # the op re-run from opt's model on fp16's own inputs: it made the error
        assert advice["method"] == "rerun" and advice["framework_model"].endswith("/stages/opt/model.onnx")
        (origin,) = [o for o in advice["ops"] if o["op"] == planted]
        assert (origin["origin"], origin["method"]) == ("introduced", "rerun") and origin["isolated_cos"] < 0.9
        assert advice["verdict"]["evidence"]["isolated_cos"] < 0.9

    text = accuscope("advise", task)
    assert f"from the stage where the error enters, {plant_in} ({step}/)" in text.stdout
    assert f"the error enters at {plant_in}: {planted}" in text.stdout

    # judged by outcome: the fault taken out of the node named, in the stage named, the chain passes
    fixed = repaired_chain(cls_model, stages, advice["chain"]["stage"], advice["verdict"]["op"], tmp_path / "fixed")
    r = run_chain(cls_model, fixed, x, tmp_path / "fixed-task")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no error enters" in r.stdout


def test_the_advisor_on_a_passing_chain_names_no_stage(cls_model, tmp_path, x):
    stages, _ = optimised_fp16_chain(cls_model, tmp_path / "models", "")
    task = tmp_path / "task"
    assert run_chain(cls_model, stages, x, task).returncode == 0
    a = accuscope("advise", task, "--json")
    assert a.returncode == 0, a.stderr
    advice = json.loads(a.stdout)
    assert advice["chain"] == {"stage": None, "advised": "."}
    head = advice["verdict"]
    assert (head["rule"], head["severity"], head["op"], head["row"]) == ("chain", "info", "", None)
    assert "no error enters" in head["title"]
    assert "enters at" not in a.stdout


def test_a_chain_whose_step_is_gone_is_advised_on_its_own_comparison_with_a_note(tmp_path):
    """tpu-mlir's tiny transformer at INT8 (top -> tpu -> bmodel, the error entering at tpu), its step
    tpu against top deleted: the advice is the chain folder's own (bmodel against ONNX), saying why."""
    import shutil

    task = tfm_int8_chain(tmp_path / "task")
    shutil.rmtree(task / "steps" / "tpu")
    a = accuscope("advise", task, "--json")
    assert a.returncode == 0, a.stderr
    advice = json.loads(a.stdout)
    assert "chain" not in advice and advice["verdict"]["rule"] == "verdict"
    assert any("the chain's stages could not be read" in n and "steps/tpu" in n for n in advice["notes"])


def test_a_chains_advice_saved_as_one_comparisons_is_made_again_from_the_stage_of_entry(tmp_path):
    """An advice.json of a chain task made as one comparison's (as before the advisor knew chains; current
    by its result and thresholds) is not shown as the chain's: the app's advice is made again."""
    from accuscope.engine.diagnose.advisor import current_advice
    task = tfm_int8_chain(tmp_path / "task", "--advisor")
    saved = json.loads((task / "advice.json").read_text())
    assert saved["chain"] == {"stage": "tpu", "advised": "steps/tpu"}
    del saved["chain"]
    saved["findings"] = saved["findings"][1:]
    (task / "advice.json").write_text(json.dumps(saved, indent=1))
    advice = current_advice(load_task(task))
    assert advice.stage == "tpu" and advice.cause is not None and advice.cause.op == "blocks.1.attn.proj/Add_Add"


def tfm_int8_chain(task, *extra):
    """tpu-mlir's tiny transformer at INT8 from the conformance corpus, top -> tpu -> bmodel against the ONNX
    run, compared into `task` (the error enters at tpu)."""
    from support.data import FIXTURES
    tpumlir = FIXTURES / "conformance" / "tpumlir"
    int8 = tpumlir / "tfm-int8"
    r = accuscope("compare", "--golden", tpumlir / "tfm" / "tfm_onnx_all.npz",
                  "--npu", f"top={tpumlir / 'tfm' / 'tfm_top_outputs.npz'}",
                  "--npu", f"tpu={int8 / 'tfm_bm1684x_int8_sym_tpu_outputs.npz'}",
                  "--npu", f"bmodel={int8 / 'tfm_bm1684x_int8_sym_model_outputs.npz'}", "--out", task, *extra)
    assert r.returncode == 0, r.stderr
    return task
