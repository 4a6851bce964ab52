"""Operator range `start,end,step` (metrics.md section 4)."""
from __future__ import annotations

import pytest

from accuscope.engine.graphs.oprange import OpRange
from accuscope.engine.sources.tensor import SourceError


@pytest.mark.parametrize("text, last, kept", [
    ("1,-1,1", 7, [1, 2, 3, 4, 5, 6, 7]),
    ("2,-1,3", 9, [2, 5, 8, 9]),       # the end is always kept
    ("3,6,2", 9, [3, 5, 6]),
    ("4,4,1", 9, [4]),
])
def test_kept_ids(text, last, kept):
    rng = OpRange.parse(text, last)
    assert [i for i in range(1, last + 1) if rng.keeps(i, last)] == kept
    assert str(rng) == text


@pytest.mark.parametrize("text, message", [
    ("1,2", "three integers"),
    ("a,b,c", "three integers"),
    ("0,-1,1", "start must be 1 or more"),
    ("5,3,1", "end must be -1"),
    ("1,-1,0", "step must be at least 1"),
    ("1,-1,9", r"below the op count \(9\)"),
])
def test_bad_ranges_say_why(text, message):
    with pytest.raises(SourceError, match=message):
        OpRange.parse(text, 9)
