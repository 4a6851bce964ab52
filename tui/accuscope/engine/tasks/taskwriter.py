"""The one writer of a comparison's result into its task folder: it asks tasks/storage.py which
storage the result's size calls for and writes that, committing task.json last.

    CSV, NPZ   task.save_task: the result CSV (CSV only) and result.npz, one generation
    COLUMNS    a multi-rank task's ranks streamed from their rank files into TASK/columns
               (tasks/columnstore.py); task.json says `columnar`, with the counts from the ranks'
               records, and the result CSV and result.npz of an earlier, smaller result are removed

A multi-rank result (`Ranks`: the ranks' task.json records and the tables still in memory) below the
columnar limit is merged and saved like a single comparison's table; an earlier column store is
removed then.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from accuscope.engine.compare.judgement import combined
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.tasks.columnstore import COLUMNS_DIR, write_columns
from accuscope.engine.tasks.rankfiles import load_ranks, rank_tables
from accuscope.engine.tasks.storage import Storage, storage
from accuscope.engine.tasks.task import RESULT_NPZ, save_task
from accuscope.engine.tasks.taskdoc import mark_state


@dataclass
class Ranks:
    """A multi-rank result: task.json's record of each rank (rankrun) and the ranks' tables this run
    still holds in memory (the others are read from their rank files)."""

    records: dict[str, dict]
    held: dict[str, ResultTable] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(r["rows"] for r in self.records.values())


@dataclass
class Written:
    storage: Storage
    table: ResultTable | None = None  # the rows as saved; None: a columnar task (the rows stay on disk)
    csv: Path | None = None
    warnings: list[str] = field(default_factory=list)  # rank files that could not be read


def ranks_outcomes(records: dict) -> dict[str, tuple[str, str]]:
    """Each rank's own verdict and its line (task.json `ranks`), by its folder: ("", why) for a rank not
    compared; a record written before ranks carried one: "fail" when it has failing rows, else "pass"."""
    def outcome(r: dict) -> tuple[str, str]:
        if r.get("state") != "done":
            return "", f"{r.get('state')}: {r.get('error', '')}"
        if "verdict" in r:
            return r["verdict"], r.get("verdict_line", "")
        return ("fail", f"{r.get('failing')} rows fail") if r.get("failing") else ("pass", "no row fails")
    return {str(r.get("rel", key)): outcome(r) for key, r in records.items()}


def write_result(folder: Path, meta: dict, result: ResultTable | Ranks, thresholds: Thresholds,
                 csv_options: dict | None = None) -> Written:
    """Write `result` into `folder` as task.json `meta` describes it (see the module's text)."""
    if isinstance(result, ResultTable):
        how = storage(len(result))
        return Written(how, result, save_task(folder, meta, result, thresholds, csv_options))
    how = storage(result.rows, ranks=True)
    written = Written(how)
    if how is Storage.COLUMNS:
        records = result.records
        first = next((r for r in sorted(records.values(), key=lambda r: (r["step"], r["rank"], r["proc"]))
                      if r["failing"]), None)
        write_columns(folder, rank_tables(folder, records, written.warnings))
        for old in [folder / RESULT_NPZ, *folder.glob("result_*.csv")]:  # an earlier, smaller result
            old.unlink(missing_ok=True)
        meta = {k: v for k, v in meta.items() if k != "state"}
        outcome, line = combined(ranks_outcomes(records))
        mark_state(folder, "done", **meta, columnar=True, rows=result.rows, verdict=outcome, verdict_line=line,
                   failing=sum(r["failing"] for r in records.values()),
                   first_failing_op=first["rel"] if first else "", csv=None, generation=None,
                   thresholds=thresholds.to_dict())
        return written
    shutil.rmtree(folder / COLUMNS_DIR, ignore_errors=True)  # an earlier, columnar result
    table, warnings = load_ranks(folder, result.records, result.held)
    result.held = {}
    written.table, written.warnings = table, warnings
    written.csv = save_task(folder, {**meta, "columnar": False}, table, thresholds, csv_options)
    return written
