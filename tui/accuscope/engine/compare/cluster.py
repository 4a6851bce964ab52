"""Where ranks are compared: the local process pool (`LocalPool`) or a Dask cluster (`DaskCluster`,
the optional extra accuscope[cluster]). Both find the rank leaves (`discover`) and yield one
RankResult per rank as it finishes (`results`).

Placement on a cluster: every worker is asked which rank folders it sees under the two roots (on
the worker's host, through ACCUSCOPE_ROOT_MAP there, see sources/ranks.py), and each rank's task
is restricted to the workers that see both of its folders, so tensors are read where they lie and
only result rows cross the network. A rank no worker sees is a problem line, not a task. A worker
that dies or leaves while its rank is pending or running makes that rank lost (the scheduler
cannot move it: no other worker holds its files); the other ranks land.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from accuscope.engine.compare.lifetime import safe_helpers
from accuscope.engine.compare.multirank import LOST, RankResult, compare_rank, pool_results
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.ranks import Rank, local_path, pair_ranks
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:  # crossmap only where a mapping file is given
    from accuscope.engine.compare.crossmap import MappingFile

POLL = 0.5  # seconds between looks at which workers are still there


class LocalPool:
    """Ranks on this machine's process pool (the default)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers
        self.where = "local processes"

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def discover(self, npu: str, golden: str) -> tuple[list[Rank], list[str]]:
        return pair_ranks(npu, golden)

    def results(self, spec: CompareSpec, leaves: list[Rank], cancel: threading.Event | None = None,
                mapping: MappingFile | None = None) -> Iterator[RankResult]:
        return pool_results(spec, leaves, self.workers, cancel, mapping)


def _visible(npu: str, golden: str) -> tuple[list[Rank], list[tuple[str, str]]]:
    """On a worker: the leaves it sees on both sides, and (rel, problem) for one-sided ones."""
    both, problems = pair_ranks(local_path(npu), local_path(golden))
    return both, [(p.split(": ", 1)[0], p) for p in problems]


class DaskCluster:
    """`tcp://HOST:PORT`: a running scheduler; `local:N`: a LocalCluster of N worker processes here."""

    def __init__(self, address: str):
        try:
            import distributed
        except ImportError:
            raise SourceError("--cluster needs Dask distributed: pip install 'accuscope[cluster]'") from None
        self._distributed = distributed
        self.address = address
        self._cluster: Any = None  # dask's LocalCluster and Client, made by __enter__
        self.client: Any = None
        self._where: dict[str, set[str]] = {}  # leaf rel -> addresses of the workers that see it
        self.where = address

    def __enter__(self) -> DaskCluster:
        d = self._distributed
        try:
            if self.address.startswith("local:"):
                n = int(self.address.split(":", 1)[1])
                if n < 1:
                    raise ValueError
                import dask
                safe_helpers()  # the workers (and the fork server they start from) do not run code from the CWD
                with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):  # as our pool
                    self._cluster = d.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                   host="127.0.0.1", dashboard_address="127.0.0.1:0")
                self.client = d.Client(self._cluster)
            else:
                self.client = d.Client(self.address, timeout=30)
        except ValueError:
            raise SourceError(f"--cluster {self.address}: give tcp://HOST:PORT or local:N (N workers)") from None
        except OSError as exc:
            self.__exit__()
            raise SourceError(f"--cluster {self.address}: no Dask scheduler answers ({exc})") from None
        return self

    def __exit__(self, *exc) -> None:
        for part in (self.client, self._cluster):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()

    def _workers(self) -> dict[str, dict]:
        return self.client.scheduler_info(n_workers=-1).get("workers", {})

    def discover(self, npu: str, golden: str) -> tuple[list[Rank], list[str]]:
        seen = self.client.run(_visible, npu, golden)
        if not seen:
            raise SourceError(f"--cluster {self.address}: the scheduler has no workers")
        leaves: dict[str, Rank] = {}
        one_sided: dict[str, str] = {}
        self._where = {}
        for address, (both, problems) in seen.items():
            for leaf in both:
                leaves[leaf.rel] = leaf
                self._where.setdefault(leaf.rel, set()).add(address)
            for path, text in problems:
                one_sided[path] = text
        problems = [text for path, text in one_sided.items()
                    if not any(path.endswith("/" + rel) for rel in leaves)]
        return sorted(leaves.values()), problems

    def results(self, spec: CompareSpec, leaves: list[Rank], cancel: threading.Event | None = None,
                mapping: MappingFile | None = None) -> Iterator[RankResult]:
        """Each rank on a worker that sees its folders; `mapping` (spec.mapping read) sent to every worker once."""
        d = self._distributed
        pending = {}
        given = self.client.scatter(mapping, broadcast=True, hash=False) if mapping is not None else None
        for leaf in leaves:
            future = self.client.submit(compare_rank, spec, leaf, given, workers=sorted(self._where[leaf.rel]),
                                        allow_other_workers=False, pure=False, retries=0,
                                        key=f"accuscope-{leaf.key}-{id(self)}")
            pending[future] = leaf
        try:
            while pending:
                if cancel is not None and cancel.is_set():
                    return
                try:
                    done = d.wait(list(pending), timeout=POLL, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    done = set()
                for future in done:
                    yield self._outcome(future, pending.pop(future))
                alive = set(self._workers())
                for future, leaf in list(pending.items()):
                    if not self._where[leaf.rel] & alive:
                        del pending[future]
                        future.cancel()
                        yield RankResult(leaf, state=LOST, error=f"the worker holding its files left the cluster "
                                                                 f"({', '.join(sorted(self._where[leaf.rel]))}); "
                                                                 "re-run the task to compare it")
        finally:
            for future in pending:
                future.cancel()

    def _outcome(self, future, leaf: Rank) -> RankResult:
        if future.status == "finished":
            return future.result()
        exc = future.exception() if future.status == "error" else None
        if exc is None or type(exc).__name__ == "KilledWorker":
            return RankResult(leaf, state=LOST, error="its worker died while comparing it (out of memory?); "
                                                      "re-run the task to compare it")
        return RankResult(leaf, state="failed", error=f"internal error on the worker: {exc!r}")


def runner(cluster: str | None, workers: int | None) -> LocalPool | DaskCluster:
    return DaskCluster(cluster) if cluster else LocalPool(workers)
