"""Per-element cost of the metrics of one pair: compiled kernel against the numpy fallback.

All ten metrics (the KL walk included) of 16M float32 element pairs in memory, one core, best of
--rounds, for pairs shaped like real ones. The KL divergence takes its fast series where the two
sides' scaled values are within ~20% of each other and a logarithm elsewhere, so the kinds differ
in how many elements need the logarithm (the `far` column).

    python benchmarks/bench_metrics.py [--n 16777216] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as in a worker process

import numpy as np  # noqa: E402

from accuscope.engine.compare import metrics  # noqa: E402


def pairs(n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(npu, golden) of each kind."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal(n).astype(np.float32)
    noise = rng.standard_normal(n).astype(np.float32)
    step = float(np.abs(g).max()) / 127
    int8 = (np.round(g / step) * step).astype(np.float32)
    return {
        "fp16-like noise 1e-3": (g + noise * np.float32(1e-3), g),
        "ReLU output, noise 1e-3": (np.maximum(g + noise * np.float32(1e-3), 0), np.maximum(g, 0)),
        "int8 quantized": (int8, g),
        "ReLU of int8": (np.maximum(int8, 0), np.maximum(g, 0)),
        "unrelated (a broken op)": (noise, g),
    }


def far_share(x: np.ndarray, y: np.ndarray) -> float:
    ax, ay = x - x.min(), y - y.min()
    with np.errstate(all="ignore"):
        return float(np.mean(np.abs((ax - ay) / (ax + ay)) >= metrics.KL_BOUND))


def best(x: np.ndarray, y: np.ndarray, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        metrics.compare_arrays(x, y)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    kernel = metrics._kernel
    if kernel is None:
        raise SystemExit("the compiled kernel is not built: nothing to compare the fallback with")
    print(f"{args.n:,} float32 element pairs, all metrics, ns per element on one core")
    print(f"{'pair':26s} {'kernel':>7s} {'numpy':>7s} {'ratio':>6s} {'far':>5s}")
    for name, (x, y) in pairs(args.n).items():
        metrics._kernel = kernel
        fast = best(x, y, args.rounds)
        metrics._kernel = None
        slow = best(x, y, args.rounds)
        print(f"{name:26s} {fast / args.n * 1e9:7.1f} {slow / args.n * 1e9:7.1f} {slow / fast:5.1f}x "
              f"{far_share(x, y):5.0%}")
    metrics._kernel = kernel


if __name__ == "__main__":
    main()
