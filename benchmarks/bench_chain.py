"""A chain of four stages against one pair: `accuscope compare --golden REF --npu s1=.. --npu s2=.. --npu s3=..
--npu s4=..` against `accuscope compare --npu s4 --golden REF`, whole processes, medians of alternating runs.

The data: a reference npy folder of --tensors float32 tensors (--size-mb in all), and four stages, each
the one before plus a little noise (a pipeline whose error grows within the thresholds). Two chains:
"pass" (no stage breaks a threshold: four comparisons with the reference, no step) and "fault" (the last
stage's tensors from the middle on scaled: its comparison with the reference fails there, so its step
against the third stage runs over those ops). The target (issue 47): a chain of four stages in no more
than four times one pair's time.

    python benchmarks/bench_chain.py [--size-mb 1024] [--tensors 64] [--rounds 3] [--workers N]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_chain(root: Path, size_mb: int, tensors: int) -> dict[str, Path]:
    """The reference and the stages s1..s4 and s4fault as npy folders under root."""
    n = size_mb * (1 << 20) // 4 // tensors
    rng = np.random.default_rng(0)
    folders = {name: root / name for name in ("ref", "s1", "s2", "s3", "s4", "s4fault")}
    for f in folders.values():
        f.mkdir(parents=True)
    for i in range(tensors):
        x = rng.standard_normal(n, dtype=np.float32)
        np.save(folders["ref"] / f"t{i:03d}.npy", x)
        for k in range(1, 5):
            x = x + rng.standard_normal(n, dtype=np.float32) * np.float32(1e-3)
            np.save(folders[f"s{k}"] / f"t{i:03d}.npy", x)
        np.save(folders["s4fault"] / f"t{i:03d}.npy", x * np.float32(1.5) if i >= tensors // 2 else x)
    return folders


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=int, default=256, help="each stage's size (the issue: 1024)")
    p.add_argument("--tensors", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tui")}
    base = [sys.executable, "-P", "-m", "accuscope", "compare"]
    workers = ["--workers", str(args.workers)] if args.workers else []
    root = Path(tempfile.mkdtemp(prefix="bench-chain-"))
    try:
        f = write_chain(root / "data", args.size_mb, args.tensors)
        cases = {
            "pair": base + ["--npu", f["s4"], "--golden", f["ref"], "--out", root / "pair"] + workers,
            "chain pass": base + ["--golden", f["ref"]] + [a for k in range(1, 5) for a in ("--npu", f"s{k}={f[f's{k}']}")]
            + ["--out", root / "chain-pass"] + workers,
            "chain fault": base + ["--golden", f["ref"]] + [a for k in range(1, 4) for a in ("--npu", f"s{k}={f[f's{k}']}")]
            + ["--npu", f"s4={f['s4fault']}", "--out", root / "chain-fault"] + workers,
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for cmd in cases.values():  # once each first: the page cache warm for all
            timed(cmd, env)
        for _ in range(args.rounds):
            for name, cmd in cases.items():
                times[name].append(timed(cmd, env))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"4 stages of {args.size_mb} MB ({args.tensors} tensors each), {os.cpu_count()} cores, "
              f"medians of {args.rounds} runs")
        print(f"  one pair (s4 against the reference): {med['pair']:.2f} s")
        for name in ("chain pass", "chain fault"):
            print(f"  {name}: {med[name]:.2f} s = {med[name] / med['pair']:.2f}x one pair (target: <= 4x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
