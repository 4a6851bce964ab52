"""Single-operator detail speed and memory on one large tensor pair.

Builds (once) a pair of float32 .npy files of --n elements (default 100 million, 400 MB each),
written through memory maps, shaped (1, 64, H, W) like an activation: the golden tensor is a
smooth signal, the NPU tensor the same plus fp16-like noise, with one broken channel, a few NaN
and a few zeros. Then, with the page cache warm, times best of --rounds:
  read     reading both files from the page cache (np.fromfile), nothing else
  detail   accuscope's detail of the pair (opened as npy tensors: chunked file reads): TopN by
           absolute and relative error, both error sketches, statistics, per-channel numbers
and prints the time (target < 3 s for 100M elements), detail / read, the CPU time, and the peak
RSS of a fresh process running the detail above its baseline (bounded by the chunk buffers).

    python benchmarks/bench_opdetail.py [--n 100000000] [--dir /tmp/accuscope-bench-opdetail] [--rounds 2]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np

from accuscope.engine.diagnose.opdetail import detail_tensors
from accuscope.engine.sides.registry import open_golden

CHANNELS = 64


def build(root: str, n: int) -> tuple[str, str]:
    npu, golden = os.path.join(root, "npu"), os.path.join(root, "golden")
    marker = os.path.join(root, f".complete-{n}")
    if os.path.exists(marker):
        return npu, golden
    hw = n // CHANNELS
    shape = (1, CHANNELS, hw // 1000, 1000) if hw % 1000 == 0 else (1, CHANNELS, 1, hw)
    if CHANNELS * hw != n:
        raise SystemExit(f"--n must be a multiple of {CHANNELS}")
    for d in (npu, golden):
        os.makedirs(d, exist_ok=True)
    gx = np.lib.format.open_memmap(os.path.join(golden, "act.0.1700000000000000.npy"), "w+", np.float32, shape)
    nx = np.lib.format.open_memmap(os.path.join(npu, "act.0.1700000000000000.npy"), "w+", np.float32, shape)
    flat_g, flat_n = gx.reshape(-1), nx.reshape(-1)
    rng = np.random.default_rng(0)
    step = 1 << 22
    for lo in range(0, n, step):
        k = min(step, n - lo)
        g = np.sin(np.arange(lo, lo + k, dtype=np.float64) * 1e-3).astype(np.float32) * 3
        flat_g[lo:lo + k] = g
        flat_n[lo:lo + k] = g + (rng.standard_normal(k) * 1e-3).astype(np.float32) * np.abs(g)
    broken = 17
    nx[0, broken] += np.float32(0.5)  # one broken channel
    flat_n[rng.integers(0, n, 5)] = np.nan
    flat_g[rng.integers(0, n, 5)] = 0.0
    gx.flush()
    nx.flush()
    del gx, nx, flat_g, flat_n
    open(marker, "w").close()
    return npu, golden


def tensors(npu: str, golden: str):
    return open_golden(npu).tensors[0], open_golden(golden).tensors[0]


def time_read(a, b) -> float:
    start = time.perf_counter()
    for t in (a, b):
        p = t.payload
        np.fromfile(p.path, dtype=p.dtype, count=p.nbytes // p.dtype.itemsize, offset=p.offset)
    return time.perf_counter() - start


def time_detail(a, b) -> tuple[float, float, object]:
    start, cpu = time.perf_counter(), time.process_time()
    d = detail_tensors(a, b, top=20)
    return time.perf_counter() - start, time.process_time() - cpu, d


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss may carry the parent's peak over fork+exec)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_child(npu: str, golden: str) -> None:
    a, b = tensors(npu, golden)
    base = peak_rss_mb()
    detail_tensors(a, b, top=10000)
    print(base, peak_rss_mb())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--dir", default="/tmp/accuscope-bench-opdetail")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-rss", action="store_true")
    ap.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return rss_child(*args.rss_child)
    npu, golden = build(args.dir, args.n)
    a, b = tensors(npu, golden)
    time_read(a, b)  # warm the page cache
    read = min(time_read(a, b) for _ in range(args.rounds))
    runs = [time_detail(a, b) for _ in range(args.rounds)]
    wall, cpu, d = min(runs, key=lambda r: r[0])
    print(f"pair of {a.size:,} float32 elements, shape {a.shape}, {2 * a.nbytes / 2**30:.2f} GB, "
          f"{os.cpu_count()} cores")
    print(f"read both files  {read:6.2f} s")
    print(f"detail           {wall:6.2f} s  (cpu {cpu:.2f} s; target < 3 s for 100M elements)")
    print(f"detail / read = {wall / read:.1f}x   {wall * 1e9 / a.size:.1f} ns per element")
    worst = d.channels.worst(1)[0] if d.channels is not None else -1
    print(f"check: top abs error at {d.top_abs.coord_text(0)} ({'NaN/inf' if d.top_abs.nonfinite[0] else 'finite'}), "
          f"worst channel {worst} (planted 17), {d.abs.sentence(0.1)}")
    if not args.skip_rss:
        res = subprocess.run([sys.executable, __file__, "--rss-child", npu, golden], capture_output=True, text=True)
        if res.returncode:
            print(res.stderr)
            return
        base, peak = map(float, res.stdout.split())
        print(f"peak RSS {peak:.0f} MB, {peak - base:.0f} MB above the {base:.0f} MB baseline (TopN 10000)")


if __name__ == "__main__":
    main()
