"""Filter expressions that used to raise past FilterError: constants joined to conditions, deep nesting."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare.results import MAX_DEPTH, FilterError, ResultTable


@pytest.fixture
def table():
    base = dict(type="Conv2D", io="output", tensor="t:output:0", reason="", npu_nonfinite=0,
                golden_nonfinite=0, is_npu_only=False)
    return ResultTable.from_rows([dict(base, index=i, npu_op=f"op{i}", cos=c)
                                  for i, c in enumerate([0.9, 0.999, 0.98])])


@pytest.mark.parametrize("expression, expected", [
    ("cos < 0.99 and True", [True, False, True]),
    ("cos < 0.99 or False", [True, False, True]),
    ("True and cos > 0.95", [False, True, True]),
    ("type in ('Conv2D', 'Add') and true", [True, True, True]),
    ("1 < cos < 2 and False", [False, False, False]),
    ("not " * (MAX_DEPTH - 2) + "True", [True, True, True]),
])
def test_constants_combine_with_conditions(table, expression, expected):
    assert np.array_equal(table.filter_mask(expression), expected)


@pytest.mark.parametrize("expression", ["not " * 100_000 + "True", "-" * 10_000 + "cos < 1",
                                        "(" * 250 + "cos < 1" + ")" * 250, "not " * (MAX_DEPTH + 1) + "True"])
def test_deep_nesting_is_refused_with_a_message(table, expression):
    with pytest.raises(FilterError, match="nest"):
        table.filter_mask(expression)


@pytest.fixture
def modules():
    base = dict(io="output", tensor="t:output:0", reason="", npu_nonfinite=0, golden_nonfinite=0,
                is_npu_only=False, cos=0.9)
    paths = ["layers.1", "layers.1.attn", "layers.1.attn.q", "layers.10.mlp", "layers.11", "Layers.1.MLP", "",
             "layers"]
    return ResultTable.from_rows([dict(base, index=i, npu_op=f"call{i}", type=p) for i, p in enumerate(paths)])


@pytest.mark.parametrize("expression, expected", [
    ('under(type, "layers.1")', [True, True, True, False, False, True, False, False]),
    ('under(type, "layers.1.attn")', [False, True, True, False, False, False, False, False]),
    ('under(type, "layers.1.")', [True, True, True, False, False, True, False, False]),  # a trailing dot
    ('UNDER(type, "layers") and not under(type, "layers.1")', [False, False, False, True, True, False, False, True]),
    ('under(type, "layers.1") and cos < 0.5', [False] * 8),
    ('type == "layers.1"', [True, False, False, False, False, False, False, False]),  # == stays exact
])
def test_under_selects_a_module_and_everything_under_it_at_a_dot_boundary(modules, expression, expected):
    assert modules.filter_mask(expression).tolist() == expected


@pytest.mark.parametrize("expression, message", [
    ('under(cos, "layers.1")', "under\\(\\) takes a text column"),
    ("under(type, 1)", "under\\(\\) takes a text column"),
    ('under("layers.1", type)', "under\\(\\) takes a text column"),
    ('under(type, ".")', "needs a module path"),
    ('under(type)', "functions: isnan"),
])
def test_under_misused_says_how_to_write_it(modules, expression, message):
    with pytest.raises(FilterError, match=message):
        modules.filter_mask(expression)
