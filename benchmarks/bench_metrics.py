"""Per-element cost of the metrics of one pair: compiled kernel against the numpy fallback.

All ten metrics (the KL walk included) of 16M float32 element pairs in memory, one core, best of
--rounds, for pairs shaped like real ones. The KL divergence takes its fast series where the two
sides' scaled values are within ~20% of each other and a logarithm elsewhere, so the kinds differ
in how many elements need the logarithm (the `far` column).

    python benchmarks/bench_metrics.py [--n 16777216] [--rounds 3] [--base-tui /path/to/other/tui]

--base-tui: that checkout's numpy fallback (its compare/metrics.py) too, round by round with this
one's, to measure a change of the fallback before and after in one run.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
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


def base_metrics(tui: str):
    """Another checkout's metrics module, loaded beside this one (its kernel switched off)."""
    path = os.path.join(tui, "accuscope", "engine", "compare", "metrics.py")
    spec = importlib.util.spec_from_file_location("accuscope.engine.compare._base_metrics", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    module._kernel = None
    return module


def timed(module, x: np.ndarray, y: np.ndarray) -> float:
    start = time.process_time()
    module.compare_arrays(x, y)
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base-tui", help="another checkout's tui folder: its numpy fallback alongside")
    args = ap.parse_args()
    kernel = metrics._kernel
    if kernel is None:
        raise SystemExit("the compiled kernel is not built: nothing to compare the fallback with")
    base = base_metrics(args.base_tui) if args.base_tui else None
    print(f"{args.n:,} float32 element pairs, all metrics, ns per element on one core, best of "
          f"{args.rounds} rounds (run by run alternating); load average {os.getloadavg()[0]:.1f}")
    print(f"{'pair':26s} {'kernel':>7s} {'numpy':>7s} {'ratio':>6s}"
          + (f" {'base':>7s} {'ratio':>6s}" if base else "") + f" {'far':>5s}")
    for name, (x, y) in pairs(args.n).items():
        times: dict[str, list[float]] = {"kernel": [], "numpy": [], "base": []}
        for _ in range(args.rounds):
            metrics._kernel = kernel
            times["kernel"].append(timed(metrics, x, y))
            metrics._kernel = None
            times["numpy"].append(timed(metrics, x, y))
            if base:
                times["base"].append(timed(base, x, y))
        fast, slow = min(times["kernel"]), min(times["numpy"])
        line = f"{name:26s} {fast / args.n * 1e9:7.1f} {slow / args.n * 1e9:7.1f} {slow / fast:5.1f}x"
        if base:
            old = min(times["base"])
            line += f" {old / args.n * 1e9:7.1f} {old / fast:5.1f}x"
        print(f"{line} {far_share(x, y):5.0%}")
    metrics._kernel = kernel
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
