"""How a comparison uses the cores (pairjob.pair_threads, runners.run_threads): pairs below
SPLIT_ELEMENTS run whole, `workers` at a time; larger ones are split inside the kernel; the digits
are the same whatever the number of workers."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare import pairjob, runners
from accuscope.engine.compare.pairjob import SPLIT_ELEMENTS, THREAD_ELEMENTS, pair_threads
from accuscope.engine.compare.spec import CompareSpec
from support.narrow import present


def test_pairs_below_the_split_size_run_whole_and_larger_ones_split_up_to_the_workers():
    assert pair_threads(1 << 20, 2) == 1 and pair_threads(1 << 20, 64) == 1
    assert pair_threads(SPLIT_ELEMENTS - 1, 64) == 1
    assert pair_threads(SPLIT_ELEMENTS, 1) == 1
    assert pair_threads(SPLIT_ELEMENTS, 2) == 2
    assert pair_threads(SPLIT_ELEMENTS, 64) == SPLIT_ELEMENTS // THREAD_ELEMENTS
    assert pair_threads(2 * SPLIT_ELEMENTS, 64) == 2 * SPLIT_ELEMENTS // THREAD_ELEMENTS


@pytest.fixture(scope="module")
def mid_pairs(tmp_path_factory):
    """Five npy pairs of 300k float32 elements (whole pairs side by side), one ReLU-like, and one
    of SPLIT_ELEMENTS / 4 made to split by a lowered threshold in the test."""
    root = tmp_path_factory.mktemp("cores")
    rng = np.random.default_rng(3)
    for side in ("npu", "golden"):
        (root / side).mkdir()
    for k, n in enumerate([300_000] * 5 + [SPLIT_ELEMENTS // 4]):
        y = rng.standard_normal(n).astype(np.float32)
        x = y + (rng.standard_normal(n) * 1e-3).astype(np.float32)
        if k == 2:
            x, y = np.maximum(x, 0), np.maximum(y, 0)
        name = f"op_{k}.0.{1700000000000000 + k}.npy"
        np.save(root / "npu" / name, x)
        np.save(root / "golden" / name, y)
    return root


def test_the_digits_do_not_depend_on_the_workers_or_the_split(mid_pairs, monkeypatch):
    plan = engine.plan(CompareSpec(str(mid_pairs / "npu"), str(mid_pairs / "golden")))
    tables = [engine.execute(plan, workers=w) for w in (1, 2, 3)]
    monkeypatch.setattr(pairjob, "SPLIT_ELEMENTS", SPLIT_ELEMENTS // 4)  # the last pair split over the workers
    given: list[int] = []

    def threads(n, w):
        given.append(pair_threads(n, w))
        return given[-1]
    monkeypatch.setattr(runners, "pair_threads", threads)
    tables.append(engine.execute(plan, workers=2))
    assert given == [1] * 5 + [2]
    one = present(tables[0]).columns
    for table in tables[1:]:
        for key, column in one.items():
            assert table is not None
            other = table.columns[key]
            if column.dtype.kind == "f":
                assert np.array_equal(column, other, equal_nan=True), key
            else:
                assert list(column) == list(other), key
    assert np.all(one["cos"] > 0.999)


def _copy(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return dst


def test_a_file_gone_or_cut_short_after_planning_is_its_row_with_a_reason_on_the_pool(mid_pairs, tmp_path):
    root = _copy(mid_pairs, tmp_path / "pairs")
    plan = engine.plan(CompareSpec(str(root / "npu"), str(root / "golden")))
    names = [p.npu.name.split(":")[0] for p in plan.pairs]
    gone, cut = (root / "npu" / "op_1.0.1700000000000001.npy"), (root / "golden" / "op_3.0.1700000000000003.npy")
    gone.unlink()
    with open(cut, "r+b") as fh:
        fh.truncate(cut.stat().st_size - 4)
    table = engine.execute(plan, workers=2)
    assert table is not None
    reasons = dict(zip(names, table.columns["reason"]))
    cos = dict(zip(names, table.columns["cos"]))
    assert "No such file" in reasons["op_1"] and np.isnan(cos["op_1"])
    assert "file ends before the tensor's last byte" in reasons["op_3"] and np.isnan(cos["op_3"])
    assert all(cos[n] > 0.999 and not reasons[n] for n in names if n not in ("op_1", "op_3"))


def test_cancel_stops_whole_pairs_on_the_pool(tmp_path):
    """More pairs (24) than the thread pool keeps in flight (4 per worker): a cancel set at the first
    progress leaves pairs never started, however fast those in flight finish (with 6 pairs, all six
    could finish in the first batch on a loaded machine, leaving nothing to cancel)."""
    import threading
    rng = np.random.default_rng(4)
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        for k in range(24):  # each above GROUP_ELEMENTS: a thread-pool task of its own
            np.save(tmp_path / side / f"op_{k}.0.{1700000000000000 + k}.npy", rng.standard_normal(100_000).astype(np.float32))
    plan = engine.plan(CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden")))
    cancel = threading.Event()
    seen = []

    def progress(p):
        seen.append(p.done)
        cancel.set()
    assert engine.execute(plan, progress, cancel, workers=2) is None
    assert seen and seen[-1] < len(plan.pairs)
