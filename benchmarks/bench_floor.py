"""`accuscope compare` as a whole process against the floor of reading the dumps, and against a
msaccucmp-style process, measured side by side in one run.

Builds two npy folders of --pairs float32 tensors of --n elements each (default 120 x 1M: 960 MB
in all; the golden side plus 1e-3 noise, every third tensor a ReLU output), warms the page cache,
then runs each of these as a fresh process (`python -P`), alternating round by round, and prints
the median of each and of the round-by-round ratios:
  read      a process that only np.load()s both sides of every pair (the floor)
  naive     msaccucmp style: per pair, both arrays loaded whole, each metric its own numpy pass
  compare   `accuscope compare --npu --golden --out --workers W`, for each W in --workers
  base      the same command from another checkout (--base-tui DIR: its `tui` folder), to
            measure before and after in one run

    python benchmarks/bench_floor.py [--pairs 120] [--n 1048576] [--rounds 5] [--workers 1 2]
                                     [--base-tui /work/main/tui]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

READ = """
import sys, os, numpy as np
for side in sys.argv[1:3]:
    for f in sorted(os.listdir(side)):
        np.load(os.path.join(side, f))
"""

NAIVE = """
import sys, os, numpy as np
EPS64, EPS32 = np.finfo(np.float64).eps, np.finfo(np.float32).eps
npu, golden = sys.argv[1:3]
for f in sorted(os.listdir(golden)):
    x, y = np.load(os.path.join(npu, f)).ravel(), np.load(os.path.join(golden, f)).ravel()
    r = [np.sum(x * y) / (np.sqrt(np.sum(x * x)) * np.sqrt(np.sum(y * y))),
         np.sqrt(np.sum((x - y) ** 2)) / np.sqrt(np.sum(y ** 2)), np.max(np.abs(x - y)),
         np.mean(np.abs(x - y)), np.sqrt(np.mean((x - y) ** 2))]
    with np.errstate(all="ignore"):
        rel = np.where(np.abs(y) > EPS64, np.abs(x / y - 1), 0)
    r += [rel.max(), rel.mean(), rel.sum()]
    def dist(v):
        lo, hi = v.min(), v.max()
        s = np.maximum((v - lo) / (hi - lo) if hi != lo else v, EPS32)
        return s / s.sum()
    px, py = dist(x), dist(y)
    with np.errstate(all="ignore"):
        r += [np.sum(px * np.log(px / py)), x.mean(), x.std(), y.mean(), y.std()]
"""


def build(root: str, pairs: int, n: int) -> tuple[str, str]:
    npu, golden = os.path.join(root, "npu"), os.path.join(root, "golden")
    marker = os.path.join(root, f".complete-{pairs}-{n}")
    if os.path.exists(marker):
        return npu, golden
    os.makedirs(npu, exist_ok=True)
    os.makedirs(golden, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.standard_normal(n).astype(np.float32)
    noise = (rng.standard_normal(n) * 1e-3).astype(np.float32)
    for k in range(pairs):
        y = base * np.float32(1 + k % 7)
        x = y + np.roll(noise, k)
        if k % 3 == 1:
            x, y = np.maximum(x, 0), np.maximum(y, 0)
        np.save(os.path.join(npu, f"op_{k:03d}.0.{1700000000000000 + k}.npy"), x)
        np.save(os.path.join(golden, f"op_{k:03d}.0.{1700000000000000 + k}.npy"), y)
    open(marker, "w").close()
    return npu, golden


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=120)
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "accuscope-bench-floor"))
    ap.add_argument("--base-tui", help="another checkout's tui folder: its compare timed too")
    args = ap.parse_args()
    npu, golden = build(args.dir, args.pairs, args.n)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tui")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(here)}
    py = [sys.executable, "-P"]
    out = os.path.join(args.dir, "task")

    def compare(w: int, tui: str = here) -> tuple[list[str], dict]:
        return ([*py, "-m", "accuscope.cli", "compare", "--npu", npu, "--golden", golden, "--out", out,
                 "--workers", str(w)], {**env, "PYTHONPATH": os.path.abspath(tui)})
    runs = {"read": ([*py, "-c", READ, npu, golden], env), "naive": ([*py, "-c", NAIVE, npu, golden], env)}
    for w in args.workers:
        runs[f"compare -w{w}"] = compare(w)
        if args.base_tui:
            runs[f"base compare -w{w}"] = compare(w, args.base_tui)
    for cmd, e in runs.values():  # warm the page cache and every import
        timed(cmd, e)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, (cmd, e) in runs.items():
            times[k].append(timed(cmd, e))
    gb = 2 * args.pairs * args.n * 4 / 1e9
    print(f"{args.pairs} pairs x {args.n:,} float32 ({gb:.2f} GB), {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; medians of {args.rounds} alternating rounds, whole processes")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        ratio = statistics.median(t / r for t, r in zip(times[k], times["read"]))
        naive = statistics.median(n / t for t, n in zip(times[k], times["naive"]))
        print(f"{k:20s} {v:6.2f} s   / read {ratio:4.1f}x   naive / this {naive:4.1f}x")
    for w1, w2 in ((a, b) for a in args.workers for b in args.workers if a < b):
        for pre in ("", "base ") if args.base_tui else ("",):
            r = statistics.median(a / b for a, b in zip(times[f"{pre}compare -w{w1}"], times[f"{pre}compare -w{w2}"]))
            print(f"{pre}compare: --workers {w1} / --workers {w2} = {r:.2f}x")


if __name__ == "__main__":
    main()
