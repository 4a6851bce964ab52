"""Helpers of test_ranks.py that other tests use too."""
from __future__ import annotations

import pytest

from accuscope.engine.demo.ranktree import write_rank_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """2 steps x 4 ranks of 6 tensors; rank 2 breaks from its 4th tensor on."""
    return write_rank_tree(tmp_path_factory.mktemp("ranks"), ranks=4, steps=2, tensors=6, faulty=(2,), bad_from=3)
