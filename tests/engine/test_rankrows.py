"""The (step, rank) pairs of a multi-rank task's table and the rows of one: a real rank run over the
demo's msprobe dumps (2 steps x 4 ranks, rank 2 faulty)."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare.rankrows import step_rank_of, step_rank_rows, step_ranks
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo import msprobesim
from accuscope.engine.tasks import rankrun


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("rankrows")
    msprobesim.write(str(root / "golden"), ranks=4, steps=2)
    msprobesim.write(str(root / "npu"), ranks=4, steps=2, fault_rank=2)
    return rankrun.run_ranks(CompareSpec(str(root / "npu"), str(root / "golden")), root / "task", workers=1).table


def test_a_multi_rank_table_holds_each_step_and_rank_and_their_rows(table):
    pairs = step_ranks(table)
    assert pairs == [(s, r) for s in (0, 1) for r in range(4)]
    rows = step_rank_rows(table, (1, 2))
    assert rows.sum() == len(table) // 8 and set(table.columns["rank"][rows].tolist()) == {2}
    assert set(table.columns["step"][rows].tolist()) == {1}
    assert table.columns["fail"][rows].any() and not table.columns["fail"][step_rank_rows(table, (1, 0))].any()
    first = int(np.flatnonzero(rows)[0])
    assert step_rank_of(table, first) == (1, 2)


def test_a_table_of_one_rank_or_without_ranks_has_no_pairs(table):
    one = step_rank_rows(table, (0, 3))
    assert step_ranks(ResultTable.from_rows([table.row(i) for i in np.flatnonzero(one)])) == []
    plain = ResultTable.from_rows([dict(index=0, npu_op="op", type="Conv2D", io="output", tensor="t:output:0",
                                        reason="", npu_nonfinite=0, golden_nonfinite=0, is_npu_only=False)])
    assert step_ranks(plain) == []
