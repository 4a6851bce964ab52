"""Comparison speed and memory, measured side by side in one run. One script, four cases (--case):

network (default, with rss): a realistic dump pair (300 float32 tensors over 2.5 decades of sizes, a
  third of them ReLU outputs, about --gb GB per side: an Ascend dump folder and a golden npy folder),
  page cache warm, in this process, best of --rounds (read and ours alternating, so that each round's
  ratio compares runs made under the same machine load; naive and fallback best of 2):
    read      reading both sides of every pair from the page cache (np.fromfile), nothing else
    naive     a straightforward msaccucmp-style implementation: per pair, both arrays loaded whole
              as float32, each metric its own numpy pass (one process, like msaccucmp)
    ours      accuscope's plan() + execute(): all ten metrics in one pass, pairs on all cores
    fallback  the same with ACCUSCOPE_KERNEL=numpy (no compiled kernel), in a child process
  and prints naive/ours (target >= 5), ours/read (target <= 4) and fallback/ours (target <= 3).
rss: the peak RSS above the baseline of a process comparing one ~1 GB tensor pair (target < 300 MB).
floor: two npy folders of --pairs float32 tensors of --n elements each (default 120 x 1M, 960 MB;
  golden plus 1e-3 noise, every third a ReLU output); each of these a fresh `python -P` process,
  alternating round by round, medians of --rounds: `read` (only np.load()s both sides: the floor),
  `naive` (msaccucmp style), `accuscope compare --workers W` for each W in --workers, and with
  --base-tui DIR (another checkout's tui folder) the same command from there: before and after.
small: --small-pairs npy pairs of 16 float32 elements (default 20,000: a network of tiny tensors);
  whole processes alternating as in floor: `accuscope compare` (this tree and --base-tui) on them
  and on a one-pair folder (start-up and fixed costs), and a process reading every file's bytes;
  prints what a row costs beyond start-up, and beyond reading its two files (target < 50 us), then
  where a row's time goes (opening the sides, planning, comparing, writing: each stage timed in a process).

checks: only the cost of the value checks on pairs (compare/repair.py's recheck, after every pair is
compared): `ours` with them and with recheck replaced by nothing, alternating round by round, best of
--rounds each (target: at most 10% more).

    python benchmarks/bench_compare.py [--case network rss checks] [--gb 1.0] [--rounds 5] [--workers 1 2]
        [--pairs 120] [--n 1048576] [--small-pairs 20000] [--base-tui /path/to/other/tui]
        [--dir /tmp/accuscope-bench-compare]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.metrics import compiled_kernel
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file

EPS64, EPS32 = np.finfo(np.float64).eps, np.finfo(np.float32).eps


def build(root: str, gb: float, count: int = 300) -> tuple[str, str]:
    npu, golden = os.path.join(root, "npu"), os.path.join(root, "golden")
    marker = os.path.join(root, f".complete-relu-{gb}")
    if os.path.exists(marker):
        return npu, golden
    for d in (npu, golden):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    rng = np.random.default_rng(0)
    weights = np.exp(rng.uniform(0, 6, count))  # sizes spread over ~2.5 decades, like a real network
    sizes = np.maximum((weights / weights.sum() * gb * 2**30 / 4).astype(int), 1024)
    base = rng.standard_normal(int(sizes.max())).astype(np.float32)
    noise = (rng.standard_normal(int(sizes.max())) * 1e-3).astype(np.float32)
    for k, n in enumerate(sizes):
        y = base[:n] * (1 + k % 7)
        x = y + noise[:n]
        if k % 3 == 1:  # a ReLU output on both sides: exact zeros, some met by small values
            x, y = np.maximum(x, 0), np.maximum(y, 0)
        name = f"op_{k:03d}"
        write_dump_file(os.path.join(npu, f"Conv2D.{name}.{k + 1}.{1700000000000000 + k}"), name,
                        outputs=[DumpTensor(x)])
        np.save(os.path.join(golden, f"{name}.0.1700000000000000.npy"), y)
    open(marker, "w").close()
    return npu, golden


def build_floor(root: str, pairs: int, n: int) -> tuple[str, str]:
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


def as_installed(*tuis: str) -> None:
    """Each tree's bytecode compiled, as `pip install` leaves it: with PYTHONDONTWRITEBYTECODE set (as on
    the development machine) every process would compile the modules changed since the last compile
    again (tens of ms of each whole-process time)."""
    for tui in tuis:
        subprocess.run([sys.executable, "-m", "compileall", "-q", tui], check=True, stdout=subprocess.DEVNULL,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def alternate(runs: dict, rounds: int) -> dict[str, list[float]]:
    """Each run's times over `rounds` rounds, the runs alternating within a round (so every ratio
    compares runs made under the same load), after one warming run each (page cache, imports)."""
    for cmd, e in runs.values():
        timed(cmd, e)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, (cmd, e) in runs.items():
            times[k].append(timed(cmd, e))
    return times


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start



def floor(args) -> None:
    """Whole processes: reading both sides, msaccucmp style, `accuscope compare` (this tree, --base-tui)."""
    npu, golden = build_floor(os.path.join(args.dir, "floor"), args.pairs, args.n)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tui")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(here)}
    py = [sys.executable, "-P"]
    out = os.path.join(args.dir, "floor-task")

    def compare(w: int, tui: str = here) -> tuple[list[str], dict]:
        return ([*py, "-m", "accuscope.cli", "compare", "--npu", npu, "--golden", golden, "--out", out,
                 "--workers", str(w)], {**env, "PYTHONPATH": os.path.abspath(tui)})
    as_installed(here, *([args.base_tui] if args.base_tui else []))
    runs = {"read": ([*py, "-c", READ, npu, golden], env), "naive": ([*py, "-c", NAIVE, npu, golden], env)}
    for w in args.workers or [1, 2]:
        runs[f"compare -w{w}"] = compare(w)
        if args.base_tui:
            runs[f"base compare -w{w}"] = compare(w, args.base_tui)
    times = alternate(runs, args.rounds)
    gb = 2 * args.pairs * args.n * 4 / 1e9
    print(f"{args.pairs} pairs x {args.n:,} float32 ({gb:.2f} GB), {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; medians of {args.rounds} alternating rounds, whole processes")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        ratio = statistics.median(t / r for t, r in zip(times[k], times["read"]))
        naive = statistics.median(n / t for t, n in zip(times[k], times["naive"]))
        print(f"{k:20s} {v:6.2f} s   / read {ratio:4.1f}x   naive / this {naive:4.1f}x")
    workers = args.workers or [1, 2]
    for w1, w2 in ((a, b) for a in workers for b in workers if a < b):
        for pre in ("", "base ") if args.base_tui else ("",):
            r = statistics.median(a / b for a, b in zip(times[f"{pre}compare -w{w1}"], times[f"{pre}compare -w{w2}"]))
            print(f"{pre}compare: --workers {w1} / --workers {w2} = {r:.2f}x")




READ_BYTES = """
import sys, os
for side in sys.argv[1:3]:
    for f in sorted(os.listdir(side)):
        with open(os.path.join(side, f), "rb") as fh:
            fh.read()
"""


def build_small(root: str, pairs: int) -> tuple[str, str]:
    """`pairs` npy pairs of 16 float32 elements, and beside them a folder pair holding the first."""
    marker = os.path.join(root, f".complete-{pairs}")
    if not os.path.exists(marker):
        rng = np.random.default_rng(0)
        for d in ("npu", "golden", "one-npu", "one-golden"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        for k in range(pairs):
            y = rng.standard_normal(16).astype(np.float32)
            name = f"op_{k:05d}.0.{1700000000000000 + k}.npy"
            for side, data in (("npu", y + np.float32(1e-3)), ("golden", y)):
                np.save(os.path.join(root, side, name), data)
                if k == 0:
                    np.save(os.path.join(root, f"one-{side}", name), data)
        open(marker, "w").close()
    return os.path.join(root, "npu"), os.path.join(root, "golden")


STAGES = """
import json, sys, tempfile, time
t0 = time.perf_counter()
from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.tasks.task import save_task
t = {"imports": time.perf_counter() - t0}
spec = CompareSpec(sys.argv[1], sys.argv[2])
t0 = time.perf_counter(); engine.open_sides(spec); t["open both sides"] = time.perf_counter() - t0
t0 = time.perf_counter(); plan = engine.plan(spec); t["plan (the open above again, pairing, rows)"] = time.perf_counter() - t0
t0 = time.perf_counter(); table = engine.execute(plan, workers=1); t["execute (compare, the table)"] = time.perf_counter() - t0
with tempfile.TemporaryDirectory() as out:
    t0 = time.perf_counter(); save_task(out, {}, table, spec.thresholds, {}); t["write the task"] = time.perf_counter() - t0
print(json.dumps(t))
"""


def stages(trees: dict[str, str], npu: str, golden: str, rounds: int) -> dict[str, dict[str, float]]:
    """Where a row's time goes, per tree: each stage in one process (medians of alternating rounds)."""
    import json
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tui in trees.items():
            r = subprocess.run([sys.executable, "-P", "-c", STAGES, npu, golden], capture_output=True, text=True,
                               check=True, env={**os.environ, "PYTHONPATH": tui})
            runs[name].append(json.loads(r.stdout))
    return {name: {k: statistics.median(d[k] for d in ds) for k in ds[0]} for name, ds in runs.items()}


def small(args) -> None:
    """Per-row cost on a network of tiny tensors, whole processes, this tree against --base-tui."""
    root = os.path.join(args.dir, f"small-{args.small_pairs}")  # (one folder a count: a row's cost divides by it)
    npu, golden = build_small(root, args.small_pairs)
    here = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tui"))
    trees = {"this tree": here, **({"base": os.path.abspath(args.base_tui)} if args.base_tui else {})}
    py = [sys.executable, "-P"]
    as_installed(*trees.values())
    runs = {"read": ([*py, "-c", READ_BYTES, npu, golden], dict(os.environ))}
    for name, tui in trees.items():
        env = {**os.environ, "PYTHONPATH": tui}
        for label, (a, b) in (("", (npu, golden)), (" one pair", (os.path.join(root, "one-npu"),
                                                                 os.path.join(root, "one-golden")))):
            runs[f"{name}{label}"] = ([*py, "-m", "accuscope.cli", "compare", "--npu", a, "--golden", b, "--out",
                                       os.path.join(root, "task"), "--workers", "1"], env)
    times = alternate(runs, args.rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    n = args.small_pairs
    print(f"{n:,} npy pairs of 16 float32, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; medians of "
          f"{args.rounds} alternating rounds, whole processes, --workers 1")
    print(f"reading every file's bytes  {med['read']:6.2f} s  ({med['read'] / n * 1e6:4.0f} us a pair)")
    for name in trees:
        row = (med[name] - med[f"{name} one pair"]) / (n - 1)
        print(f"{name:10s} compare {med[name]:6.2f} s, one pair {med[f'{name} one pair']:5.2f} s: a row {row * 1e6:4.0f} us, "
              f"{(row - med['read'] / n) * 1e6:4.0f} us beyond reading its two files (target < 50)")
    if args.base_tui:
        r = statistics.median(b / t for b, t in zip(times["base"], times["this tree"]))
        print(f"base / this tree, {n:,} pairs: {r:.2f}x (round by round, median)")
    parts = stages(trees, npu, golden, args.rounds)
    print("where a row goes (us a row, in one process each; medians of alternating rounds):")
    print(f"{'':44s}" + "".join(f"{name:>12s}" for name in trees))
    for stage in next(iter(parts.values())):
        print(f"{stage:44s}" + "".join(f"{parts[name][stage] / n * 1e6:12.1f}" for name in trees))

def naive_metrics(x: np.ndarray, y: np.ndarray) -> dict:
    """msaccucmp style: whole float32 arrays, one numpy pass (and temporaries) per metric."""
    r = {"cos": np.sum(x * y) / (np.sqrt(np.sum(x * x)) * np.sqrt(np.sum(y * y))),
         "red": np.sqrt(np.sum((x - y) ** 2)) / np.sqrt(np.sum(y ** 2)),
         "max_abs": np.max(np.abs(x - y)), "mean_abs": np.mean(np.abs(x - y)),
         "rmse": np.sqrt(np.mean((x - y) ** 2))}
    with np.errstate(all="ignore"):
        rel = np.where(np.abs(y) > EPS64, np.abs(x / y - 1), 0)
    r.update(max_rel=rel.max(), mean_rel=rel.mean(), acc_rel=rel.sum())

    def dist(v):
        lo, hi = v.min(), v.max()
        s = np.maximum((v - lo) / (hi - lo) if hi != lo else v, EPS32)
        return s / s.sum()
    px, py = dist(x), dist(y)
    r["kl"] = np.sum(px * np.log(px / py))
    r["std"] = (x.mean(), x.std(), y.mean(), y.std())
    return r


def pairs_of(plan):
    return [(p.npu, p.golden) for p in plan.pairs]


def time_read(pairs) -> float:
    start = time.perf_counter()
    for a, b in pairs:
        for t in (a, b):
            p = t.payload
            np.fromfile(p.path, dtype=p.dtype, count=p.nbytes // p.dtype.itemsize, offset=p.offset)
    return time.perf_counter() - start


def time_naive(pairs) -> float:
    start = time.perf_counter()
    for a, b in pairs:
        naive_metrics(np.asarray(a.load(), np.float32).ravel(), np.asarray(b.load(), np.float32).ravel())
    return time.perf_counter() - start


def time_ours(npu: str, golden: str, workers: int | None) -> float:
    start = time.perf_counter()
    engine.execute(engine.plan(CompareSpec(npu, golden)), workers=workers)
    return time.perf_counter() - start


def time_checks(npu: str, golden: str, workers: int | None, rounds: int) -> tuple[float, float, float]:
    """`ours` with the value checks on pairs and without them (recheck doing nothing), alternating, and
    the checks alone (recheck's own time in the runs with them)."""
    real = engine.recheck
    with_checks, without, alone = [], [], []

    def timed(plan, cells):
        start = time.perf_counter()
        try:
            return real(plan, cells)
        finally:
            alone.append(time.perf_counter() - start)
    for _ in range(rounds):
        engine.recheck = timed
        try:
            with_checks.append(time_ours(npu, golden, workers))
        finally:
            engine.recheck = real
        engine.recheck = lambda plan, cells: []
        try:
            without.append(time_ours(npu, golden, workers))
        finally:
            engine.recheck = real
    return min(with_checks), min(without), min(alone)


def time_fallback(args) -> float:
    """`ours` on the numpy fallback: a child process, since the choice is made at import."""
    cmd = [sys.executable, __file__, "--time-ours", "--dir", args.dir, "--gb", str(args.gb),
           "--rounds", "2"] + (["--workers", str(args.workers[0])] if args.workers else [])
    # OpenBLAS on one thread as the `accuscope` command runs it (cli.py): its threads made the fallback's
    # chunk-sized dot products 5.6x slower on this loaded 2-core machine (22.9 s against 4.1 s here)
    res = subprocess.run(cmd, capture_output=True, text=True,
                         env={**os.environ, "ACCUSCOPE_KERNEL": "numpy", "OPENBLAS_NUM_THREADS": "1"})
    if res.returncode:
        raise RuntimeError(res.stderr)
    return float(res.stdout)


def rss_child(root: str) -> None:
    """Compare one ~1 GB float32 pair in this process; print baseline and peak RSS (MB)."""
    n = 2**28
    npu, golden = os.path.join(root, "big-npu"), os.path.join(root, "big-golden")
    if not os.path.exists(os.path.join(root, ".big-complete")):
        os.makedirs(npu, exist_ok=True)
        os.makedirs(golden, exist_ok=True)
        step = 2**24
        with open(os.path.join(golden, "big.0.1.npy"), "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (n,)})
            for lo in range(0, n, step):
                np.arange(lo, lo + step, dtype=np.float32).tofile(fh)
        write_dump_file(os.path.join(npu, "Conv2D.big.1.1700000000000001"), "big", outputs=[DumpTensor(np.zeros(1, np.float32))])
        _grow_dump(os.path.join(npu, "Conv2D.big.1.1700000000000001"), n, step)
        open(os.path.join(root, ".big-complete"), "w").close()
    plan = engine.plan(CompareSpec(npu, golden))
    base = _status_mb("VmRSS")  # ru_maxrss would carry the parent's peak over fork + exec
    engine.execute(plan, workers=1)
    print(base, _status_mb("VmHWM"))


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _grow_dump(path: str, n: int, step: int) -> None:
    """Rewrite a one-element dump as an n-element one, streaming the payload (no n-sized array)."""
    from accuscope.engine.sources.ascend import build_header, write_raw
    msg, _ = build_header("big", [], [DumpTensor(np.zeros(1, np.float32))])
    msg.output[0].shape.dim[:] = [n]
    msg.output[0].original_shape.dim[:] = [n]
    msg.output[0].size = 4 * n
    write_raw(path, msg, [])
    with open(path, "ab") as fh:
        for lo in range(0, n, step):
            (np.arange(lo, lo + step, dtype=np.float32) * np.float32(1.0001)).tofile(fh)


def checks(args) -> None:
    npu, golden = build(args.dir, args.gb)
    pairs = pairs_of(engine.plan(CompareSpec(npu, golden)))
    gb = sum(a.nbytes + b.nbytes for a, b in pairs) / 2**30
    workers = args.workers[0] if args.workers else None
    time_read(pairs)  # warm the page cache
    time_ours(npu, golden, workers)  # starts the worker processes
    checked, unchecked, alone = time_checks(npu, golden, workers, args.rounds)
    print(f"{len(pairs)} tensor pairs, {gb:.2f} GB in all, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"accuscope with the value checks on pairs {checked:7.2f} s, without {unchecked:7.2f} s; the checks "
          f"alone {alone * 1e3:.2f} ms = {100 * alone / checked:.2f}% of the comparison (target <= 10%)")


def network(args) -> None:
    npu, golden = build(args.dir, args.gb)
    pairs = pairs_of(engine.plan(CompareSpec(npu, golden)))
    gb = sum(a.nbytes + b.nbytes for a, b in pairs) / 2**30
    workers = args.workers[0] if args.workers else None
    time_read(pairs)  # warm the page cache
    first = time_ours(npu, golden, workers)  # starts the worker processes
    # read and ours alternate, so that each ratio compares runs made under the same machine load
    rounds = [(time_read(pairs), time_ours(npu, golden, workers)) for _ in range(args.rounds)]
    read, ours = min(r for r, _ in rounds), min(o for _, o in rounds)
    ratios = sorted(o / r for r, o in rounds)
    naive = min(time_naive(pairs) for _ in range(2))
    fallback = time_fallback(args)
    kernel = "compiled kernel" if compiled_kernel() else "NOT BUILT: numpy fallback"
    print(f"{len(pairs)} tensor pairs, {gb:.2f} GB in all, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"read both sides       {read:7.2f} s")
    print(f"naive (msaccucmp)     {naive:7.2f} s")
    print(f"accuscope             {ours:7.2f} s  ({kernel}; first round, starting the workers: {first:.2f} s)")
    print(f"accuscope, numpy only {fallback:7.2f} s")
    print(f"naive / accuscope = {naive / ours:.1f}x (target >= 5)   accuscope / read = {ours / read:.1f}x "
          f"(target <= 4; round by round {ratios[0]:.1f}-{ratios[-1]:.1f}x, median "
          f"{ratios[len(ratios) // 2]:.1f}x)   numpy fallback / compiled kernel = {fallback / ours:.1f}x (target <= 3)")


def rss(args) -> None:
    if not os.path.exists(os.path.join(args.dir, ".big-complete")):  # building the pair raises the peak: not measured
        subprocess.run([sys.executable, __file__, "--rss-child", args.dir], capture_output=True, check=True)
    res = subprocess.run([sys.executable, __file__, "--rss-child", args.dir], capture_output=True, text=True)
    if res.returncode:
        print(res.stderr)
        return
    base, peak = map(float, res.stdout.split())
    print(f"one 1.0 GB float32 pair: peak RSS {peak:.0f} MB, {peak - base:.0f} MB above the "
          f"{base:.0f} MB baseline (target < 300)")


CASES = {"network": network, "rss": rss, "floor": floor, "small": small, "checks": checks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="+", choices=list(CASES), default=["network", "rss"])
    ap.add_argument("--gb", type=float, default=1.0, help="network: GB per side")
    ap.add_argument("--dir", default="/tmp/accuscope-bench-compare")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, nargs="+", help="floor: each timed (default 1 2); network: the first")
    ap.add_argument("--pairs", type=int, default=120, help="floor: tensor pairs")
    ap.add_argument("--n", type=int, default=1 << 20, help="floor: elements per tensor")
    ap.add_argument("--small-pairs", type=int, default=20_000, help="small: pairs of 16-element tensors")
    ap.add_argument("--base-tui", help="floor, small: another checkout's tui folder, timed in the same rounds")
    ap.add_argument("--rss-child", help=argparse.SUPPRESS)
    ap.add_argument("--time-ours", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return rss_child(args.rss_child)
    if args.time_ours:
        npu, golden = build(args.dir, args.gb)
        print(min(time_ours(npu, golden, args.workers[0] if args.workers else None) for _ in range(args.rounds)))
        return
    for case in args.case:
        CASES[case](args)


if __name__ == "__main__":
    main()
