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
