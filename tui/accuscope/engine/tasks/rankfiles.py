"""A multi-rank task's rows, rank by rank: TASK/ranks/{step0_rank3}.npz (npztable's format), one file a
rank, written by rankrun as each rank finishes; read back one at a time in (step, rank, proc) order or
merged, and a columnar task's column store (columnstore) read in their place."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.tasks.columnstore import COLUMNS_DIR, read_columns
from accuscope.engine.tasks.npztable import read_npz

RANKS_DIR = "ranks"


def rank_file(folder: Path, key: str) -> Path:
    """Where a rank's rows are kept (`key`: its leaf's key, step0_rank3)."""
    return folder / RANKS_DIR / f"{key}.npz"


def rank_tables(folder: str | os.PathLike, records: dict, warnings: list[str],
                held: dict[str, ResultTable] | None = None) -> Iterator[ResultTable]:
    """The table of every done rank of a task, one at a time in (step, rank, proc) order (from `held`
    when it has the rank, else its file); a rank file that cannot be read is a warning, the other
    ranks still come."""
    folder = Path(folder)
    done = sorted((r.get("step", -1), r.get("rank", -1), r.get("proc", -1), key) for key, r in records.items()
                  if isinstance(r, dict) and r.get("state") == "done")
    for *_, key in done:
        if held and key in held:
            yield held[key]
            continue
        path = rank_file(folder, key)
        try:
            table = read_npz(path)[0]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.append(f"{path}: unreadable ({exc}); its rank is not shown")
            continue
        yield table


def load_ranks(folder: str | os.PathLike, records: dict, held: dict[str, ResultTable] | None = None,
               columnar: bool = False) -> tuple[ResultTable, list[str]]:
    """The rows of every done rank, merged in memory (a `columnar` task: its column store, paged);
    `held`: ranks' tables already in memory, by key."""
    warnings: list[str] = []
    if columnar:
        try:
            return read_columns(folder), warnings
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.append(f"{Path(folder) / COLUMNS_DIR}: unreadable ({exc}); merging the rank files instead")
    return ResultTable.concat(list(rank_tables(folder, records, warnings, held))), warnings
