"""accuscope concludes what the real tool concludes, on the committed part of the conformance corpus
(tests/fixtures/conformance: files tpu-mlir, msprobe, Polygraphy ... wrote, with their own verdicts; the
rules in tests/support/conformance.py, the whole account in benchmarks/conformance.py): each case's
verdict is the tool's, or differs only by departures the rows explain; the exit code under
--fail-on-error follows accuscope's verdict; no row disagrees unexplained."""
from __future__ import annotations

import pytest

from support import conformance

CASES = conformance.load_cases(committed_only=True)


@pytest.mark.skipif(not CASES, reason="no committed conformance case")
@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_the_tools_verdict_is_accuscopes(case, tmp_path):
    o = conformance.run(case, tmp_path / "t")
    assert o.verdict_agrees or o.verdict_explained, (o.verdict, case.verdict, o.disagreements)
    assert not o.disagreements, o.disagreements
    assert o.exit_code == (0 if o.verdict == "pass" else 1)
    assert o.rows_agree + len(o.departures) == o.rows_total


def test_the_committed_corpus_covers_each_tool():
    assert {c.tool for c in CASES} >= {"tpu-mlir", "msprobe", "openvino", "rknn", "litert"} or not CASES
