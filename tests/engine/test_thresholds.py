"""Thresholds edited by name and the summary's account of the first failing row (engine only)."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.summary import summarize
from accuscope.engine.compare.thresholds import MSIT_DEFAULTS, Thresholds
from support.narrow import present


def test_edit_changes_only_the_named_thresholds():
    t = Thresholds()
    assert t.edit("cos=0.98 kl=off") == [("cos", 0.98), ("kl", None)]
    assert {x.key: x.value for x in t.items} == {"cos": 0.98, "red": 0.05, "rmse": 1.0, "mean_rel": 1.0}
    t.edit("max_abs=2, CosineSimilarity=0.9")  # commas, CSV names, a new threshold
    assert present(t.get("max_abs")).value == 2 and present(t.get("cos")).value == 0.9 and present(t.get("red")).value == 0.05


def test_edited_is_a_new_value_and_leaves_the_old_one_alone():
    """The app's edits: a worker holding the old thresholds (or one of their items) never sees them change."""
    old = Thresholds()
    cos, items = old.get("cos"), list(old.items)
    new = old.edited("cos=0.5 kl=off max_abs=2")
    assert cos is not None
    assert old.items == items and old.get("cos") is cos and cos.value == 0.99 and old == Thresholds()
    assert present(new.get("cos")).value == 0.5 and new.get("kl") is None and present(new.get("max_abs")).value == 2
    with pytest.raises(ValueError, match="cos=x"):
        old.edited("cos=x")
    with pytest.raises(AttributeError):
        cos.value = 0.1  # type: ignore[misc]  # frozen: `set` makes a new item (the test: assigning raises)
    old.set("cos", 0.9)
    assert cos.value == 0.99 and present(old.get("cos")).value == 0.9


def test_a_bad_part_changes_nothing():
    t = Thresholds()
    with pytest.raises(ValueError, match="cos=x"):
        t.edit("red=0.1 cos=x")
    assert {x.key: x.value for x in t.items} == MSIT_DEFAULTS


def rows():
    base = dict(type="Conv2D", io="output", tensor="t:output:0", reason="", npu_nonfinite=0,
                golden_nonfinite=0, is_npu_only=False)
    return ResultTable.from_rows([
        dict(base, index=0, npu_op="a", cos=0.999, kl=0.0001, red=0.01),
        dict(base, index=1, npu_op="b", cos=0.95, kl=0.5, red=0.01),
        dict(base, index=2, npu_op="c", cos=0.90, kl=0.0001, red=0.01),
    ])


def test_summary_names_the_broken_metrics_and_not_those_turned_off():
    table = rows()
    s = summarize(table, Thresholds())
    assert (s.failing, s.first_failing) == (2, 1)
    assert s.first_text.startswith("#1 Conv2D: cos 0.95 < 0.99, kl 0.5 > 0.005") and s.first_text.endswith("· b")
    assert s.counts_text() == "2/3 rows fail"
    off = Thresholds()
    off.edit("kl=off")
    judgement.apply(table, Thresholds())  # a fail column from other thresholds does not mislead the summary
    s = summarize(table, off)
    assert "kl" not in s.first_text and s.broken == ["cos 0.95 < 0.99"]
    off.edit("cos=off")
    s = summarize(table, off)
    assert s.first_failing is None and s.counts_text() == "none of 3 rows breaks a threshold"
    assert np.array_equal(table.columns["fail"], [False, True, True])  # summarize leaves the table alone
