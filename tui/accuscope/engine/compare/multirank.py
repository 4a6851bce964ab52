"""Comparing many ranks: one rank is one unit of work (plan + execute on that rank's two folders),
run on the local process pool here, or on a Dask cluster (compare/cluster.py). Only a rank's
result rows travel back, as a ResultTable with its step and rank columns set.

A mapping file is read once, by the run (`given_mapping`), and what it holds is handed to the workers:
to each process of the pool once, as it starts, and to a cluster's workers once (scattered). Read again
for each rank it cost every worker its parse (a YAML mapping takes some 20x its size while parsed, 5 s
for 400,000 lines) and the cluster's every host a copy of the file at the same path.
"""
# lazy: engine.compare.crossmap
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare import statcolumns
from accuscope.engine.compare.lifetime import die_with_parent, end_pool, process_context
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.ranks import Rank, local_path
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:  # crossmap only where a mapping file is given
    from accuscope.engine.compare.crossmap import MappingFile

LOST = "lost"  # a rank whose worker died or left: re-running the task compares it again
_POOL_MAPPING: list[MappingFile | None] = [None]  # in a pool's process: the mapping the pool was started with


@dataclass
class RankResult:
    rank: Rank
    table: ResultTable | None = None  # None: not compared (error says why)
    problems: list[str] = field(default_factory=list)
    coverage: dict | None = None
    worker: str = ""  # who compared it: the Dask worker's name, else host:pid
    error: str = ""
    state: str = "done"  # done, failed (unusable input: error), lost (worker gone: error)
    seconds: float = 0.0
    sides: dict = field(default_factory=dict)  # the kind of source of each side: {"npu": "msprobe", ...}


def rank_spec(spec: CompareSpec, rank: Rank) -> CompareSpec:
    return replace(spec, npu=os.path.join(spec.npu, rank.rel), golden=os.path.join(spec.golden, rank.rel),
                   rank=None, step=None)  # the leaf is one rank's folder


def worker_name() -> str:
    if "distributed" in sys.modules:
        from distributed import get_worker  # only inside a Dask worker, where distributed is loaded
        try:
            worker = get_worker()
            return f"{worker.name} ({worker.address})"
        except ValueError:
            pass
    import socket  # only here: a rank's worker, not the ranks' process, needs it
    return f"{socket.gethostname()}:{os.getpid()}"


def given_mapping(spec: CompareSpec) -> MappingFile | None:
    """spec.mapping read (once, by the run; SourceError naming it), for `compare_rank`; None without one."""
    if not spec.mapping:
        return None
    from accuscope.engine.compare import crossmap
    return crossmap.load(spec.mapping)


def compare_rank(spec: CompareSpec, rank: Rank, mapping: MappingFile | None = None) -> RankResult:
    """Compare one rank's two folders (read as this host sees them); never raises for bad input. `mapping`:
    spec.mapping as `given_mapping` read it (else the file is read here)."""
    start = time.perf_counter()
    one = rank_spec(spec, rank)
    one = replace(one, npu=local_path(one.npu), golden=local_path(one.golden))
    result = RankResult(rank, worker=worker_name())
    try:
        fast = statcolumns.compare(one)  # statistics of two clean dump.json: as columns
        if fast is not None:
            (table, coverage), problems = fast, []
            result.sides = {"npu": statcolumns.KIND, "golden": statcolumns.KIND}
        else:
            plan = engine.plan(one, mapping_file=mapping)
            table = cast(ResultTable, engine.execute(plan, workers=1))  # None only when cancelled: no cancel here
            coverage, problems = plan.coverage, plan.problems
            result.sides = {"npu": plan.npu.kind, "golden": plan.golden.kind}
    except SourceError as exc:
        result.state, result.error = "failed", str(exc)
    else:
        n = len(table)
        table.columns["step"][:n] = rank.step
        table.columns["rank"][:n] = rank.rank
        result.table, result.coverage = table, coverage.to_meta()
        result.problems = [str(p) for p in problems]
    result.seconds = time.perf_counter() - start
    return result


def _initializer(main_pid: int, mapping: MappingFile | None) -> None:
    die_with_parent(main_pid)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _POOL_MAPPING[0] = mapping


def _pooled_rank(spec: CompareSpec, rank: Rank) -> RankResult:
    """compare_rank in a pool's process, with the mapping the process was started with."""
    return compare_rank(spec, rank, _POOL_MAPPING[0])


def pool_results(spec: CompareSpec, leaves: list[Rank], workers: int | None = None,
                 cancel: threading.Event | None = None, mapping: MappingFile | None = None) -> Iterator[RankResult]:
    """Each rank in a process of the local pool, results as they finish (`mapping`: spec.mapping read, handed
    to each process once). A process that dies (out of memory) breaks the pool: the ranks in flight are
    reported lost, the rest still run."""
    remaining = list(leaves)
    workers = max(1, min(workers or os.cpu_count() or 1, len(leaves)))
    if workers == 1:
        for leaf in leaves:
            if cancel is not None and cancel.is_set():
                return
            yield compare_rank(spec, leaf, mapping)
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # imported when a pool runs, not before
    from concurrent.futures.process import BrokenProcessPool
    while remaining:
        with ProcessPoolExecutor(workers, mp_context=process_context(), initializer=_initializer,
                                 initargs=(os.getpid(), mapping)) as pool:
            pending = {pool.submit(_pooled_rank, spec, leaf): leaf for leaf in remaining}
            try:
                while pending:
                    if cancel is not None and cancel.is_set():
                        end_pool(pool)
                        return
                    done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    for f in done:
                        leaf = pending[f]
                        try:
                            result = f.result()
                        except BrokenProcessPool:
                            raise
                        except Exception as exc:  # noqa: BLE001 - a bug comparing one rank: say so on that rank
                            result = RankResult(leaf, state="failed", error=f"internal error: {exc!r}")
                        del pending[f]
                        remaining.remove(leaf)
                        yield result
                return
            except BrokenProcessPool:
                for leaf in list(pending.values()):
                    remaining.remove(leaf)
                    yield RankResult(leaf, state=LOST, error="the process comparing this rank died "
                                                             "(out of memory?); re-run the task to compare it")
            except BaseException:  # Ctrl+C, SIGTERM, a closed generator: do not wait for ranks in flight
                end_pool(pool)
                raise
            finally:
                for f in pending:
                    f.cancel()
