"""compare/chain.py's rules on chains run by tasks/chainrun.py (today's comparisons into sub-tasks): a
fault that enters at one stage and is carried on, a drift no stage's own step shows, and the precision's
noise by dtype. The CLI's tests on the real tools' chains: tests/cli/test_chain_cli.py."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare.chain import noise_of
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.chainrun import Stage, entered_column, parse_stages, run_chain
from accuscope.engine.tasks.task import load_task
from support.narrow import present


def write_stages(root, errors: list[dict[int, float]], n: int = 6, size: int = 4096) -> tuple[str, list[Stage]]:
    """A reference npy folder of n tensors t0..t{n-1} (run in that order) and one folder per stage, whose
    tensor i is the reference's plus noise of relative size errors[k].get(i, 0) (the same noise draw
    growing from stage to stage: a stage carries the error of the one before)."""
    rng = np.random.default_rng(0)
    ref = root / "ref"
    ref.mkdir()
    base = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    noise = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    for i, x in enumerate(base):
        np.save(ref / f"t{i}.npy", x)
    stages = []
    for k, err in enumerate(errors):
        d = root / f"s{k}"
        d.mkdir()
        for i, x in enumerate(base):
            np.save(d / f"t{i}.npy", x + noise[i] * np.float32(err.get(i, 0.0)))
        stages.append(Stage(f"s{k}", str(d)))
    return str(ref), stages


def test_a_fault_enters_at_the_stage_that_makes_it_not_at_those_that_carry_it(tmp_path):
    # s1 breaks t3 (red 0.3) and what follows; s2 carries it unchanged, adding a little of its own
    ref, stages = write_stages(tmp_path, [{}, {3: 0.3, 4: 0.3, 5: 0.3}, {3: 0.31, 4: 0.31, 5: 0.31}])
    run = run_chain(CompareSpec(stages[-1].path, ref), stages, tmp_path / "task", workers=1)
    j = run.judgement
    # npy folders name no network output: the stages' verdicts are unknown, the entry is named all the same
    assert j is not None and j.entered is not None
    assert j.outcome == "unknown" and (j.entered.stage, j.entered.op) == ("s1", "t3")
    assert j.entered.previous == "s0" and j.entered.own
    assert [s.own for s in j.stages][2] == ()  # s2's step against s1 holds: carried, not its own
    assert set(run.steps) == {"s1", "s2"}  # the failing stages' steps, over their failing ops only
    assert len(present(run.steps["s1"].table)) == 3
    # per row of the chain folder's own table (s2): where each row's error entered, read back from the task
    task = load_task(tmp_path / "task")
    assert task.table is not None
    entered = dict(zip(task.table.columns["npu_op"], present(entered_column(task))))
    assert entered == {"t0": "", "t1": "", "t2": "", "t3": "s1", "t4": "s1", "t5": "s1"}


def test_a_drift_no_step_shows_names_the_first_failing_stage_as_grown(tmp_path):
    # red 0.03 -> 0.045 -> 0.0675 on the last tensor: under twice at each stage, past 0.05 at the last
    ref, stages = write_stages(tmp_path, [{5: 0.03}, {5: 0.045}, {5: 0.0675}])
    j = run_chain(CompareSpec(stages[-1].path, ref), stages, tmp_path / "task", workers=1).judgement
    assert j is not None and j.entered is not None
    assert (j.entered.stage, j.entered.op, j.entered.own) == ("s2", "t5", False)
    assert "the error grew over the stages" in j.line()


def test_a_chain_without_a_failing_row_names_no_stage_and_runs_no_step(tmp_path):
    ref, stages = write_stages(tmp_path, [{5: 1e-4}, {5: 2e-4}])
    run = run_chain(CompareSpec(stages[-1].path, ref), stages, tmp_path / "task", workers=1)
    assert run.judgement is not None
    assert run.judgement.entered is None and run.steps == {}


def test_the_noise_a_precision_allows():
    assert noise_of("float16") == 2.0 ** -11 and noise_of("bfloat16") == 2.0 ** -8
    assert noise_of("float32") == noise_of("") == 1e-6


def test_labels_from_file_names_are_numbered_and_given_ones_checked(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        np.save(tmp_path / d / "t.npy", np.zeros(2, np.float32))
    assert [s.label for s in parse_stages([str(tmp_path / "a"), str(tmp_path / "b" / "t.npy"),
                                           str(tmp_path / "a" / "t.npy")])] == ["a", "t", "t-2"]
    with pytest.raises(SourceError, match="names another stage"):
        parse_stages([f"x={tmp_path / 'a'}", f"x={tmp_path / 'b'}"])
    with pytest.raises(SourceError, match="the reference's"):
        parse_stages([f"reference={tmp_path / 'a'}"])


def test_the_chain_seen_op_by_op_each_stage_against_the_reference_and_its_step(tmp_path):
    """compare/chainview.py (the app's per-stage views): each stage's cos per row of the chain folder's own
    table, an op at every stage with its step and the stage it entered at, the curves along the merged ops."""
    from pathlib import Path

    from accuscope.engine.tasks.chainrun import chain_view
    ref, stages = write_stages(tmp_path, [{}, {3: 0.3, 4: 0.3, 5: 0.3}, {3: 0.31, 4: 0.31, 5: 0.31}])
    (Path(stages[0].path) / "t2.npy").unlink()  # s0 has no t2 (as a stage that fused it away)
    run_chain(CompareSpec(stages[-1].path, ref), stages, tmp_path / "task", workers=1)
    view = chain_view(load_task(tmp_path / "task"))
    assert view is not None and view.labels == ["s0", "s1", "s2"] and view.own == 2
    ops = list(view.table.columns["npu_op"])
    t2, t3 = ops.index("t2"), ops.index("t3")
    cos = view.columns("cos")
    assert np.isnan(cos["s0"][t2]) and cos["s1"][t2] == pytest.approx(1.0)
    assert cos["s0"][t3] == pytest.approx(1.0) and cos["s1"][t3] < 0.99 and cos["s2"][t3] < 0.99
    assert view.entered()[t3] == "s1" and view.entered()[t2] == ""
    s0, s1, s2 = view.at(t3)
    assert (s0.found, s0.failing, s0.entered, s0.before) == (True, False, False, "")
    assert s0.step_cos == s0.cos  # the first stage's step is its comparison with the reference
    assert (s1.failing, s1.entered, s1.before) == (True, True, "s0") and s1.step_cos < 0.99
    assert (s2.failing, s2.entered, s2.before) == (True, False, "s1") and s2.step_cos > 0.999  # carried on
    assert not view.at(t2)[0].found
    curves = view.curves("cos")
    # t2, which s0 lacks, sits where s1 runs it: after t1, before t3
    assert [k.partition(":")[0] for k in curves.keys] == ["t0", "t1", "t2", "t3", "t4", "t5"]
    assert np.isnan(curves.series["s0"][2]) and curves.series["s1"][3] == pytest.approx(cos["s1"][t3])
