"""One task writer: tasks/storage.py picks the storage by size, tasks/taskwriter.py writes it, for a
single comparison's table and for a multi-rank task's ranks alike."""
from __future__ import annotations

import numpy as np
import pytest

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.tasks import storage
from accuscope.engine.tasks.storage import Storage
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskwriter import Ranks, write_result
from support.narrow import present


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(storage, "CSV_ROWS", 3)
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 6)


def _table(n: int) -> ResultTable:
    rows = [{"index": k, "op_seq": k + 1, "npu_op": f"op{k}", "golden_op": f"op{k}", "tensor": f"op{k}:output:0",
             "type": "Conv", "io": "output", "cos": float(np.float32(0.5 + k / 100))} for k in range(n)]
    return ResultTable.from_rows(rows)


@pytest.mark.parametrize(("rows", "ranks", "expected"), [
    (3, False, Storage.CSV), (4, False, Storage.NPZ), (7, False, Storage.NPZ),
    (3, True, Storage.CSV), (6, True, Storage.NPZ), (7, True, Storage.COLUMNS)])
def test_one_function_picks_the_storage_by_size(small_limits, rows, ranks, expected):
    assert storage.storage(rows, ranks=ranks) is expected


def test_the_writer_writes_what_storage_picks_for_one_table(small_limits, tmp_path):
    small = write_result(tmp_path / "small", {}, _table(3), Thresholds())
    assert small.storage is Storage.CSV and small.csv is not None and small.csv.exists()
    big = write_result(tmp_path / "big", {}, _table(7), Thresholds())
    assert big.storage is Storage.NPZ and big.csv is None
    assert not list((tmp_path / "big").glob("result_*.csv")) and (tmp_path / "big" / "result.npz").exists()
    assert len(present(load_task(tmp_path / "big").table)) == 7


def test_the_writer_streams_many_ranks_into_columns(small_limits, tmp_path):
    from accuscope.engine.tasks.npztable import write_npz
    from accuscope.engine.tasks.rankfiles import RANKS_DIR, rank_file
    folder = tmp_path / "t"
    (folder / RANKS_DIR).mkdir(parents=True)
    records = {}
    for r in range(2):
        key = f"step0_rank{r}"
        write_npz(_table(4), rank_file(folder, key), {})
        records[key] = {"state": "done", "step": 0, "rank": r, "proc": -1, "rel": f"step0/rank{r}", "rows": 4,
                        "failing": 0}
    written = write_result(folder, {"npu": "a", "golden": "b", "ranks": records}, Ranks(records), Thresholds())
    assert written.storage is Storage.COLUMNS and written.table is None
    assert (folder / "columns").is_dir() and not (folder / "result.npz").exists()
    task = load_task(folder)
    assert task.table is not None
    assert task.doc.columnar and len(task.table) == 8
