"""The hostile corpus (tests/fuzz/hostile.py) through the real `accuscope` command: every payload
class ends with exit 0, 1 or 2, no traceback, no hang, a bounded peak RSS, and what the case itself
must hold (no planted code ran, nothing written through a symlink, the good rows of a rank kept)."""
from __future__ import annotations

import pytest

from fuzz.hostile import CLASSES, cases, run_hostile


def test_every_class_has_cases():
    assert {c.cls for c in cases()} == set(CLASSES)


@pytest.mark.parametrize("cls", CLASSES)
def test_hostile_inputs_end_cleanly(tmp_path, cls):
    results = run_hostile(tmp_path, (cls,))
    bad = [f"{r.case.label}: {'; '.join(r.failures)}" for r in results if r.failures]
    assert not bad, "\n".join(bad)
