"""`accuscope precision` against a blind bisection over execution order (what Polygraphy's `debug
precision` does: "the first N layers in higher precision", N bisected) on the same model, inputs,
target and machine. The model: PP-OCRv4 det from the rapidocr-onnxruntime wheel the test suite
caches, whose plain fp16 conversion fails (output cos ~0.03: a BatchNormalization's variance
beyond the float16 range). Both count trials (convert + run the candidate against the reference
outputs, computed once); accuscope's time includes its ranking (a task of the full conversion and
the advisor). Target: at most a third of the blind bisection's trials.

    python benchmarks/bench_precision.py [--size 320] [--target cos=0.99] [--dir /tmp/accuscope-bench-precision]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))
sys.path.insert(0, str(ROOT / "tests"))

RATIO = 1 / 3


def blind_bisection(reference, feeds, target, to: str) -> tuple[int, float, int]:
    """(trials, seconds, N): the smallest N such that the first N candidate ops in execution order
    kept in fp32 meet the target, found by bisection on N (N = all is checked first)."""
    from accuscope.engine.precision.convert import candidates, convert
    from accuscope.engine.precision.evaluate import Evaluator, run_outputs
    start = time.perf_counter()
    order = candidates(reference, to)
    evaluator = Evaluator(run_outputs(reference, feeds), feeds, [target])
    trials = 0

    def passes(n: int) -> bool:
        nonlocal trials
        trials += 1
        return evaluator.passes(evaluator.measure(convert(reference, to, order[:n])))

    lo, hi = 0, len(order)
    if passes(lo):
        return trials, time.perf_counter() - start, 0
    if not passes(hi):
        return trials, time.perf_counter() - start, -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return trials, time.perf_counter() - start, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--target", default="cos=0.99")
    ap.add_argument("--to", default="fp16", choices=("fp16", "int8"))
    ap.add_argument("--dir", default="/tmp/accuscope-bench-precision")
    args = ap.parse_args()
    from accuscope.engine.precision.convert import prepare
    from accuscope.engine.precision.evaluate import parse_target
    from accuscope.engine.precision.spec import PrecisionSpec
    from accuscope.engine.precision.workflow import run_precision
    from conftest import _rapidocr_models

    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    det = _rapidocr_models() / "ch_PP-OCRv4_det_infer.onnx"
    x = np.random.default_rng(0).random((1, 3, args.size, args.size)).astype(np.float32)
    target = parse_target(args.target)

    t0 = time.perf_counter()
    reached: list[float] = []

    def on_event(e) -> None:
        if e.trial is not None and e.trial.passed and not reached:
            reached.append(time.perf_counter() - t0)

    result = run_precision(PrecisionSpec(str(det), args.to, str(root / "search"), [target], {"x": x}), on_event)
    ours_s = time.perf_counter() - t0
    to_target = reached[0] if reached else float("nan")
    ours = len(result.outcome.trials)
    blind, blind_s, n = blind_bisection(prepare(det), {"x": x}, target, args.to)

    print(f"model: PP-OCRv4 det {args.size}x{args.size}, {len(result.candidates)} candidate ops, --to {args.to}, "
          f"target {target}; full conversion {result.full.values if result.full else '?'}")
    print(f"accuscope precision: {ours} trials, target reached after {to_target:.1f} s (ranking included), "
          f"{ours_s:.1f} s with the pruning, the result files and the final task, "
          f"met={result.outcome.met}, kept {len(result.outcome.keep)} op(s): {', '.join(result.outcome.keep)}")
    print(f"blind bisection over execution order: {blind} trials, {blind_s:.1f} s, kept the first {n} ops")
    ratio = ours / blind if blind else float("inf")
    print(f"trials ratio {ratio:.2f} (target <= {RATIO:.2f}): {'PASS' if ratio <= RATIO else 'FAIL'}; "
          f"time-to-target ratio {to_target / blind_s:.2f}; ops kept {len(result.outcome.keep)} vs {n}")
    sys.exit(0 if ratio <= RATIO and result.outcome.met else 1)


if __name__ == "__main__":
    main()
