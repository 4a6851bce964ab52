"""Noise at the scale of the computation (compare/noisefloor.py) on msprobe 26.2's own dumps of a bf16
autocast training step against float32 (tests/fixtures/msprobe/noisefloor, cut from the conformance
corpus by make_noisefloor.py): the key projection's bias gradient, zero in exact arithmetic, and the
calls that carry it on (all_reduce, the division by the world size, the optimizer's update) are judged
against the noise floor of their computation, not against their own near-zero values; the planted bug
(the attention's scale dropped, float32) stays failing; float32 against itself fails nothing."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.noisefloor import roundoff
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.summary import summarize
from accuscope.engine.compare.thresholds import Thresholds

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "noisefloor"
CARRIERS = ("Module.attn.k.Linear.parameters_grad", "Functional.linear.2.backward", "Distributed.all_reduce.7",
            "Tensor.div_.7", "Tensor.add_.7")


def judged(npu: str):
    p = plan(CompareSpec(str(HERE / npu / "step0" / "rank1"), str(HERE / "ref" / "step0" / "rank1")))
    table = execute(p, workers=1)
    assert table is not None
    return table, judgement.evaluate(table, Thresholds()), p


def test_the_bias_gradient_and_its_carriers_are_noise_at_the_floor():
    table, state, p = judged("bf16")
    c = table.columns
    carried = [r for r in range(len(table)) if str(c["npu_op"][r]).startswith(CARRIERS) and state.floor[r]]
    assert len(carried) >= 7  # the gradient, its all_reduce, the division, the update: at the floor
    bias = next(r for r in range(len(table)) if c["npu_op"][r].startswith("Module.attn.k.Linear.parameters_grad")
                and c["param"][r] == "bias")
    assert state.floor[bias] and not state.fail[bias]
    assert c["cos"][bias] < 0.9 and c["red"][bias] > 1e3  # by its own values a total failure
    # no row fails on the bias gradient's chain; the verdict and the summary say why
    assert not any(state.fail[r] for r in range(len(table)) if str(c["npu_op"][r]).startswith(CARRIERS))
    s = summarize(table, Thresholds(), p.coverage.basis)
    assert "noise floor" in s.judged and f"{int(state.floor.sum())} rows" in s.judged
    assert roundoff(c["npu_dtype"]) == 2.0 ** -8


def test_the_planted_bug_is_not_hidden():
    table, state, _ = judged("noscale")
    c = table.columns
    attn = [r for r in range(len(table)) if c["npu_op"][r] == "Module.attn.Attention.forward.0" and c["io"][r] == "output"]
    assert attn and all(state.fail[r] for r in attn)
    # at the floor: only the bias gradient's chain (its values ~1e-9 whatever the bug), never the bug's rows
    assert all(str(c["npu_op"][r]).startswith(CARRIERS) for r in np.flatnonzero(state.floor))
    assert state.fail.sum() >= 10


def test_float32_against_itself_has_no_floor():
    table, state, _ = judged("ref")
    assert not state.fail.any() and not state.floor.any()
    assert np.isfinite(table.numbers("cos")).any()
