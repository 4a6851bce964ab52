"""Running a multi-rank comparison into one task folder, rank by rank as results arrive.

    TASK/ranks/{step0_rank3}.npz   one rank's rows (result.npz's columnar format), written as soon
                                   as that rank finishes: a lost worker loses only its rank
    TASK/task.json                 `ranks`: per rank its state (done, failed, lost), rows, failing,
                                   the worker that compared it, seconds, error

A re-run of the same comparison into the task resumes: ranks whose file holds this comparison's
rows (same inputs and algorithms) are not compared again. Once every rank has an outcome the task
is done and written by tasks/taskwriter.py, in the storage tasks/storage.py picks by size: up to
COLUMNAR_ROWS rows, the ranks are also merged into the usual result CSV and result.npz; above, the
task is columnar (task.json `columnar`): the ranks are streamed, one at a time, into TASK/columns
(tasks/columnstore.py), which load_task opens paged, and `accuscope show --format csv` exports the CSV.
"""
# lazy: engine.compare.leftovers
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from accuscope import __version__
from accuscope.engine.compare.cluster import DaskCluster, LocalPool
from accuscope.engine.compare.judgement import Basis, combined, verdict
from accuscope.engine.compare.multirank import LOST, RankResult, given_mapping
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.sides.registry import capabilities, pairs_calls
from accuscope.engine.sources import ranks as rank_mod
from accuscope.engine.sources.outputfile import atomic_path, not_a_link
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import taskdoc
from accuscope.engine.tasks.npztable import read_npz, write_npz
from accuscope.engine.tasks.rankfiles import RANKS_DIR, rank_file
from accuscope.engine.tasks.storage import Storage, storage
from accuscope.engine.tasks.task import TaskLock, check_task_folder, create_task_folder, unwritable
from accuscope.engine.tasks.taskdoc import mark_state, spec_fields
from accuscope.engine.tasks.taskwriter import Ranks, ranks_outcomes, write_result


@dataclass
class RanksRun:
    leaves: list[rank_mod.Rank] = field(default_factory=list)
    results: dict[str, dict] = field(default_factory=dict)  # leaf key -> task.json's record of it
    resumed: list[str] = field(default_factory=list)  # leaf keys already compared by an earlier run
    problems: list[str] = field(default_factory=list)
    table: ResultTable | None = None  # the merged rows (None: cancelled, or a columnar task)
    held: dict[str, ResultTable] = field(default_factory=dict)  # this run's ranks' rows, kept for the merge
    rows: int = 0
    failing: int = 0
    cancelled: bool = False
    where: str = ""
    coverage: dict = field(default_factory=dict)  # task.json's coverage of the whole run (its basis: judgement.Basis)
    verdict: tuple[str, str] = ("", "")  # a columnar task's verdict and its line, from its ranks' (judgement.combined)

    @property
    def lost(self) -> list[str]:
        return [k for k, r in self.results.items() if r["state"] == LOST]


def _fingerprint(spec: CompareSpec) -> str:
    """What makes a rank's stored rows this comparison's rows."""
    fields = spec_fields(spec)
    fields.pop("relative", None)
    return json.dumps(fields, sort_keys=True, default=str)


def _stored(folder: Path, leaf: rank_mod.Rank, fingerprint: str) -> bool:
    try:
        _, meta = read_npz(rank_file(folder, leaf.key))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return meta.get("spec") == fingerprint


def _verdict(table: ResultTable, thresholds: Thresholds, coverage: dict | None) -> tuple[str, str]:
    """One rank's own verdict and its line (judgement.verdict under its coverage's Basis)."""
    v = verdict(table, thresholds, Basis.from_coverage(coverage))
    return v.outcome, v.line(table.columns["tensor"])


def _record(result: RankResult, thresholds: Thresholds) -> dict:
    t = result.table
    judged = ("", "") if t is None else _verdict(t, thresholds, result.coverage)
    return {"verdict": judged[0], "verdict_line": judged[1], "state": result.state, "step": result.rank.step, "rank": result.rank.rank, "proc": result.rank.proc,
            "rel": result.rank.rel, "rows": len(t) if t is not None else 0,
            "failing": int(t.columns["fail"].sum()) if t is not None else 0, "worker": result.worker,
            "seconds": round(result.seconds, 3), "error": result.error, "problems": result.problems[:100],
            "coverage_warnings": (result.coverage or {}).get("warnings", []), "sides": result.sides,
            "unread": (result.coverage or {}).get("unread", [])[:100],
            "unread_count": (result.coverage or {}).get("unread_count", 0),
            **({"pairing": ladder} if (ladder := (result.coverage or {}).get("ladder")) else {})}


def run_ranks(spec: CompareSpec, folder: str | os.PathLike, cluster: str | None = None,
              workers: int | None = None, rank: list[int] | None = None, step: list[int] | None = None,
              progress: OnProgress | None = None,
              cancel: threading.Event | None = None,
              planned: Callable[[RanksRun], None] | None = None, *,
              rank_done: Callable[[RankResult], None] | None = None) -> RanksRun:
    """Compare every chosen rank of the two trees into `folder` (see the module's text): `planned(run)`
    once the ranks are known, then as each rank lands `rank_done(result)` and `progress`, counting the
    ranks compared of those to compare on this run (resumed ones left out), `what` the rank's label.
    SourceError: no rank pairs, none chosen, the cluster unreachable, the folder unusable."""
    folder, run = Path(folder), RanksRun()
    rank = rank if rank is not None else rank_mod.numbers(spec.rank)  # --rank/--step pick among the ranks
    step = step if step is not None else rank_mod.numbers(spec.step)
    lock = TaskLock(folder)
    started = False
    try:
        if check_task_folder(folder):
            lock.acquire()
        mapping = given_mapping(spec)  # read once here (a bad one named before any rank), handed to the workers
        with (DaskCluster(cluster) if cluster else LocalPool(workers)) as where:
            run.where = where.where
            found, run.problems = where.discover(spec.npu, spec.golden)
            if not found:
                raise SourceError(f"{spec.npu}: no rank folder (step*/rank*) pairs with one under {spec.golden}"
                                  + (f" on any worker of {cluster}" if cluster else ""))
            run.leaves = rank_mod.pick(found, rank, step)
            if not run.leaves:
                have = ", ".join(r.label for r in found[:8]) + (" …" if len(found) > 8 else "")
                raise SourceError(f"{spec.npu}: no rank folder matches --rank/--step (found: {have})")
            create_task_folder(folder)
            lock.acquire()
            not_a_link(folder / RANKS_DIR).mkdir(exist_ok=True)
            fingerprint = _fingerprint(spec)
            previous = _previous(folder)
            todo = []
            for leaf in run.leaves:
                if previous.get(leaf.key, {}).get("state") == "done" and _stored(folder, leaf, fingerprint):
                    run.results[leaf.key] = previous[leaf.key]
                    run.resumed.append(leaf.key)
                else:
                    todo.append(leaf)
            fields = {**spec_fields(spec, folder), "multirank": True, "cluster": cluster,
                      "rank_filter": rank, "step_filter": step}
            mark_state(folder, "running", error="", tool=f"accuscope {__version__}",
                       started=datetime.now().isoformat(timespec="seconds"), ranks=run.results, **fields)
            started = True
            if planned:
                planned(run)
            for result in where.results(spec, todo, cancel, mapping):
                if result.table is not None:
                    _save_rank(folder, result, fingerprint)
                    run.held[result.rank.key] = result.table
                    if storage(sum(len(t) for t in run.held.values()), ranks=True) is Storage.COLUMNS:
                        run.held.clear()  # a columnar task: the store is written from the rank files
                run.results[result.rank.key] = _record(result, spec.thresholds)
                mark_state(folder, "running", ranks=run.results)
                if rank_done:
                    rank_done(result)
                if progress:
                    progress(Progress(len(run.results) - len(run.resumed), len(run.leaves) - len(run.resumed),
                                      result.rank.label))
        if cancel is not None and cancel.is_set():
            run.cancelled = True
            mark_state(folder, "cancelled")
            return run
        _finish(folder, spec, run, fields)
    except BaseException as exc:
        place = unwritable(exc, folder)
        if started:
            try:
                interrupted = isinstance(exc, KeyboardInterrupt)
                mark_state(folder, "cancelled" if interrupted else "failed",
                           error="" if interrupted else str(place or exc) or type(exc).__name__)
            except OSError:
                pass
        if place is not None:
            raise place from None
        raise
    finally:
        lock.release()
    return run


def _previous(folder: Path) -> dict:
    """The rank records of the task's task.json (an earlier run's), {} when it has none."""
    return {k: v for k, v in taskdoc.read_or_empty(folder).ranks.items() if isinstance(v, dict)}


def _save_rank(folder: Path, result: RankResult, fingerprint: str) -> None:
    assert result.table is not None  # a rank with rows
    path = rank_file(folder, result.rank.key)
    with atomic_path(path, f".{os.getpid()}.partial") as tmp:
        write_npz(result.table, tmp, {"spec": fingerprint, "rank": result.rank.rel, "worker": result.worker})


def _sides(records: dict) -> dict:
    """The kind of source of each side, as the ranks were read (msprobe, npy ...): the advisor's rules
    depend on it; "ranks" when no rank says (none compared, or recorded by an earlier accuscope)."""
    kinds = [r["sides"] for r in records.values() if isinstance(r.get("sides"), dict) and r["sides"]]
    return {side: kinds[0].get(side, "ranks") if kinds else "ranks" for side in ("npu", "golden")}


def _finish(folder: Path, spec: CompareSpec, run: RanksRun, fields: dict) -> None:
    records = run.results
    run.rows = sum(r["rows"] for r in records.values())
    run.failing = sum(r["failing"] for r in records.values())
    lost = [f"{r['rel']}: {r['state']}: {r['error']}" for r in records.values() if r["state"] != "done"]
    unread = lost + [f"{r['rel']}: {u}" for r in records.values() for u in r.get("unread") or []]
    sides = _sides(records)
    run.coverage = {"warnings": [f"{len(lost)} of {len(records)} ranks not compared (task.json `ranks`)"] if lost else [],
                    **({"step": True} if capabilities(sides["npu"]).step_based else {}),
                    **({"unread": unread[:1000], "unread_count": len(lost) + sum(
                        r.get("unread_count") or 0 for r in records.values())} if unread else {})}
    ladders = [r["pairing"] for r in records.values() if isinstance(r.get("pairing"), dict)]
    if ladders:  # the pairing ladder's counts over the ranks (compare/leftovers.py)
        from accuscope.engine.compare.leftovers import merged
        run.coverage["ladder"] = merged(ladders)
    meta = {**fields, "tool": f"accuscope {__version__}", "created": datetime.now().isoformat(timespec="seconds"),
            "problems": run.problems + lost + [p for r in records.values() for p in r.get("problems", [])][:1000],
            "state": "done", "error": "", "ranks": records, "sides": sides,
            "pairs_calls": pairs_calls(sides["npu"], sides["golden"]), "coverage": run.coverage}
    held, run.held = run.held, {}
    written = write_result(folder, meta, Ranks(records, held), spec.thresholds, {"golden_is_npy": True})
    run.problems += written.warnings
    run.table = written.table
    if run.table is None:
        run.verdict = combined(ranks_outcomes(records))
