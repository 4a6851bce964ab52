"""How a plan's pairs run: recorded statistics compared in vectorized batches (no tensor read), pairs one
at a time in this thread, small pairs in groups on a thread pool and large ones split across threads
(the compiled kernel), or on a pool of worker processes that survives a worker's death (its pairs
retried one by one, only the culprit's row losing its values). comparison.execute picks one by size."""
from __future__ import annotations

import collections
import itertools
import os
from collections.abc import Iterator
from dataclasses import replace

from accuscope.engine.compare import statistics
from accuscope.engine.compare.lifetime import die_with_parent, end_pool, process_context
from accuscope.engine.compare.pairjob import GROUP_ELEMENTS, Job, pair_threads, run_job, run_small


def recorded(jobs: list[Job], across: bool, batch: int = 20_000) -> Iterator[list[tuple[int, dict]]]:
    """Pairs with a side without data (a statistics dump, --stats-only): what the dumps recorded, compared
    in vectorized batches, no tensor read; `across`: two frameworks' sides (statistics.compare_many)."""
    for lo in range(0, len(jobs), batch):
        yield statistics.compare_many([(j.row, j.npu, j.golden) for j in jobs[lo:lo + batch]], across)


def run_inline(jobs: list[Job], cancel) -> Iterator[list[tuple[int, dict]]]:
    for job in jobs:
        if cancel is not None and cancel.is_set():
            return
        yield [run_job(job)]


GROUP_PAIRS = 64  # small pairs go to a thread in groups of up to this many pairs or GROUP_ELEMENTS


def in_groups(jobs: list[Job]) -> Iterator[list[Job]]:
    """Consecutive small pairs in groups of up to GROUP_PAIRS pairs or GROUP_ELEMENTS elements (a
    pair larger than that alone): one thread-pool task, one result batch and, for the pairs the
    fused pass takes, one kernel call and their cells as columns (pairjob.run_small) per group
    instead of per pair, whose cost (~30 us) would otherwise exceed a tiny pair's whole comparison."""
    group: list[Job] = []
    elements = 0
    for job in jobs:
        if group and (len(group) == GROUP_PAIRS or elements + job.npu.size > GROUP_ELEMENTS):
            yield group
            group, elements = [], 0
        group.append(job)
        elements += job.npu.size
    if group:
        yield group


def run_threads(jobs: list[Job], workers: int, cancel) -> Iterator[list[tuple[int, dict]]]:
    """On the compiled kernel: pairs big enough to split (pair_threads) one at a time, each on its
    threads; the rest in groups (in_groups), `workers` groups at a time on a thread pool (the
    kernel releases the GIL)."""
    threads = [pair_threads(j.npu.size, workers) for j in jobs]
    big = [replace(j, threads=t) for j, t in zip(jobs, threads) if t > 1]
    small = [j for j, t in zip(jobs, threads) if t == 1]
    yield from run_inline(big, cancel)
    groups = in_groups(small)
    first = next(groups, None)
    if workers == 1 or (second := next(groups, None)) is None:
        # in this thread (one group would take one pool thread): a group at a time (a few ms), each
        # its own progress and chance to stop; concurrent.futures (and logging) is not even imported
        for group in itertools.chain((first,) if first else (), groups):  # (no second group if workers > 1)
            if cancel is not None and cancel.is_set():
                return
            yield run_small(group)
        return
    from concurrent.futures import ThreadPoolExecutor  # with logging ~10 ms of start-up: only when a pool runs
    with ThreadPoolExecutor(workers) as pool:  # results in the pairs' order (plugins, progress)
        pending: collections.deque = collections.deque()
        queue = itertools.chain((first, second), groups)
        while True:
            while len(pending) < 4 * workers and not (cancel is not None and cancel.is_set()):
                ready = next(queue, None)
                if ready is None:
                    break
                pending.append(pool.submit(run_small, ready))
            if not pending:
                return
            batch = pending.popleft().result()
            while pending and pending[0].done():
                batch += pending.popleft().result()
            yield batch
            if cancel is not None and cancel.is_set():
                for f in pending:
                    f.cancel()
                return


WORKER_DIED = "the worker process comparing this pair died (out of memory?); not compared"


class _PoolBroke(Exception):
    def __init__(self, in_flight: list[Job]):
        self.in_flight = in_flight


def run_pool(jobs: list[Job], workers: int, cancel) -> Iterator[list[tuple[int, dict]]]:
    """Largest pairs first (balances the cores), at most 2 per worker in flight (bounds memory).

    A worker that dies (the OOM killer, a crash in a native library) breaks the whole pool: the
    pairs it had in flight are retried one by one in their own process, so only the culprit gets
    a reason instead of values, and the rest continue in a fresh pool. When no worker process can
    be started at all, everything runs inline."""
    remaining = sorted(jobs, key=lambda j: -j.npu.size)
    while remaining:
        finished: set[int] = set()
        try:
            for batch in _pool_batches(remaining, workers, cancel):
                finished.update(row for row, _ in batch)
                yield batch
            return
        except _PoolBroke as broke:
            if not _pool_starts():
                yield from run_inline([j for j in remaining if j.row not in finished], cancel)
                return
            if len(remaining) == 1:
                yield [(remaining[0].row, {"reason": WORKER_DIED})]
                return
            suspects = {j.row for j in broke.in_flight}
            for job in broke.in_flight:
                if cancel is not None and cancel.is_set():
                    return
                yield from run_pool([job], 1, cancel)
            remaining = [j for j in remaining if j.row not in finished and j.row not in suspects]
        except OSError:  # no process could be started here
            yield from run_inline([j for j in remaining if j.row not in finished], cancel)
            return


def _pool_starts() -> bool:
    """Whether worker processes can run at all here (a pool may also break because none starts)."""
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: imported when a pool runs, not before
    try:
        with ProcessPoolExecutor(1, mp_context=process_context()) as pool:
            return pool.submit(os.getpid).result(timeout=60) > 0
    except Exception:  # noqa: BLE001 - any failure means: no pool
        return False


def _pool_batches(order: list[Job], workers: int, cancel) -> Iterator[list[tuple[int, dict]]]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core per worker; inherited by the pool
    with ProcessPoolExecutor(workers, mp_context=process_context(), initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        pending: dict = {}
        queue = iter(order)
        try:
            while True:
                while len(pending) < 2 * workers and not (cancel is not None and cancel.is_set()):
                    job = next(queue, None)
                    if job is None:
                        break
                    try:
                        pending[pool.submit(run_job, job)] = job
                    except BrokenProcessPool:  # a worker died since the last wait: `job` runs in the next pool
                        raise _PoolBroke(list(pending.values())) from None
                if not pending:
                    return
                done, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                try:
                    batch = [f.result() for f in done]
                except BrokenProcessPool:
                    raise _PoolBroke(list(pending.values())) from None
                for f in done:
                    del pending[f]
                if batch:
                    yield batch
                if cancel is not None and cancel.is_set():
                    return
        except BaseException:  # Ctrl+C, SIGTERM, a closed generator: do not wait for pairs in flight
            end_pool(pool)
            raise
        finally:
            for f in pending:
                f.cancel()
