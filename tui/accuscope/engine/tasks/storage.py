"""How a task's result is stored, chosen by its size here and nowhere else.

    CSV       result_{time}.csv + result.npz   up to CSV_ROWS rows
    NPZ       result.npz only                  above CSV_ROWS: a 300k-row CSV takes 3 s to write
                                               (Python's csv module) and 100 MB, three times the
                                               rest of a 100k-call statistics triage, for a file no
                                               spreadsheet opens comfortably; `show --format csv|xlsx`
                                               exports it
    COLUMNS   TASK/columns (tasks/columnstore) a multi-rank task above COLUMNAR_ROWS: its ranks are
                                               streamed into the store one at a time, never merged
                                               in memory, and load_task opens it paged

A single comparison's table is in memory already, so it is never stored as columns (result.npz
whatever its size). tasks/taskwriter.py writes what `storage` picks; task.save_task asks it whether
to write the CSV.
"""
from __future__ import annotations

import enum

CSV_ROWS = 200_000
COLUMNAR_ROWS = 1_000_000


class Storage(enum.Enum):
    CSV = "csv"  # the result CSV and result.npz
    NPZ = "npz"  # result.npz only
    COLUMNS = "columns"  # TASK/columns only (a columnar task)


def storage(rows: int, ranks: bool = False) -> Storage:
    """The storage of a result of `rows` rows; `ranks`: the rows come rank by rank from rank files
    (a multi-rank task), so they can be stored as columns without merging them."""
    if ranks and rows > COLUMNAR_ROWS:
        return Storage.COLUMNS
    return Storage.CSV if rows <= CSV_ROWS else Storage.NPZ
