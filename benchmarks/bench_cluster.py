"""Multi-rank comparison on Dask: 1, 2 and 4 workers on loopback, throughput per worker, peak RSS.

Builds a multi-rank npy tree pair (--ranks ranks of --tensors float32 tensors of --mb MB each, so
about ranks x tensors x mb MB per side; tensor pairs above 64 MB are streamed chunk by chunk), warms
the page cache, then for each worker count starts a LocalCluster of that many worker processes
(`--cluster local:N`, one thread each), compares every rank and prints:
  seconds, GB/s over both sides, GB/s per worker (flat = linear scaling, up to the machine's cores)
  each worker's peak RSS (getrusage on the worker, after its ranks) against its RSS before any
  rank, and the bound workers x (baseline + 2 sides x chunk buffers + slack): the memory a run
  needs is set by the worker count and the chunk, not by the dump size.

    python benchmarks/bench_cluster.py [--ranks 8] [--tensors 3] [--mb 40] [--dir /tmp/accuscope-bench-cluster]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import time
from pathlib import Path

from accuscope.engine.compare.cluster import DaskCluster
from accuscope.engine.compare.metrics import CHUNK
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo.ranktree import write_rank_tree

SLACK_MB = 64  # allocator and library noise per worker beyond its chunk buffers


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def warm(root: Path) -> int:
    total = 0
    for path in root.rglob("*.npy"):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    return total


def measure(npu: Path, golden: Path, workers: int) -> dict:
    spec = CompareSpec(str(npu), str(golden))
    with DaskCluster(f"local:{workers}") as cluster:
        before = cluster.client.run(peak_rss_mb)
        leaves, _ = cluster.discover(str(npu), str(golden))
        start = time.perf_counter()
        results = list(cluster.results(spec, leaves))
        seconds = time.perf_counter() - start
        after = cluster.client.run(peak_rss_mb)
    assert all(r.state == "done" for r in results), [r.error for r in results if r.state != "done"]
    return {"seconds": seconds, "rows": sum(len(r.table) for r in results),
            "rss": [(before[a], after[a]) for a in after]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--tensors", type=int, default=3)
    ap.add_argument("--mb", type=float, default=40.0, help="MB per tensor (float32)")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--dir", default="/tmp/accuscope-bench-cluster")
    args = ap.parse_args()
    root = Path(args.dir)
    size = int(args.mb * (1 << 20) / 4)
    shutil.rmtree(root, ignore_errors=True)
    npu, golden = write_rank_tree(root, ranks=args.ranks, tensors=args.tensors, size=size, faulty=(1,))
    total = warm(root)
    chunk_mb = 2 * CHUNK * 8 / (1 << 20)  # two sides, up to float64 work arrays
    print(f"{args.ranks} ranks x {args.tensors} tensors x {args.mb:.0f} MB: {total / 1e9:.2f} GB over both sides; "
          f"{os.cpu_count()} cores; chunk {CHUNK:,} elements")
    for n in (int(w) for w in args.workers.split(",")):
        m = measure(npu, golden, n)
        rate = total / m["seconds"] / 1e9
        base = max(b for b, _ in m["rss"])
        peak = max(p for _, p in m["rss"])
        bound = base + chunk_mb + SLACK_MB
        print(f"workers {n}: {m['seconds']:.2f} s, {m['rows']} rows, {rate:.2f} GB/s, {rate / n:.2f} GB/s per worker; "
              f"peak RSS per worker {peak:.0f} MB (baseline {base:.0f} MB, bound {bound:.0f} MB: "
              f"{'within' if peak <= bound else 'ABOVE'}); all workers {sum(p for _, p in m['rss']):.0f} MB "
              f"<= {n} x {bound:.0f} MB")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
