"""The advisor on a 700-op model: PP-OCRv4 det (672 nodes, from the rapidocr-onnxruntime wheel the test
suite caches) against its int8 dynamic quantization, both run by `accuscope run`, then `advise`
timed cold (every failing op re-run) and warm (re-runs cached in advice.json). Target: under 10 s.

    python benchmarks/bench_advisor.py [--size 320] [--dir /tmp/accuscope-bench-advisor]
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

TARGET = 10.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=320)
    ap.add_argument("--dir", default="/tmp/accuscope-bench-advisor")
    args = ap.parse_args()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from accuscope.cli import main as cli
    from accuscope.engine.diagnose.advice import ADVICE_JSON
    from accuscope.engine.diagnose.advisor import advise
    from accuscope.engine.runs.onnxedit import constants_as_initializers
    from conftest import _rapidocr_models

    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    det = _rapidocr_models() / "ch_PP-OCRv4_det_infer.onnx"
    onnx.save(constants_as_initializers(onnx.load(str(det))), str(root / "ref.onnx"))
    quantize_dynamic(str(root / "ref.onnx"), str(root / "int8.onnx"), weight_type=QuantType.QInt8)
    np.save(root / "x.npy", np.random.default_rng(0).standard_normal((1, 3, args.size, args.size)).astype(np.float32))
    t0 = time.perf_counter()
    assert cli(["run", str(root / "ref.onnx"), str(root / "int8.onnx"), "--input", f"x={root / 'x.npy'}",
                "--out", str(root / "task")]) == 0
    t_run = time.perf_counter() - t0
    nodes = len(onnx.load(str(root / "ref.onnx")).graph.node)
    times = {}
    for label in ("cold", "warm"):
        if label == "cold":
            (root / "task" / ADVICE_JSON).unlink(missing_ok=True)
        t0 = time.perf_counter()
        a = advise(root / "task")
        times[label] = time.perf_counter() - t0
    reruns = sum(1 for o in a.ops if o.method == "rerun")
    print(f"PP-OCRv4 det {args.size}x{args.size}: {nodes} reference nodes, {len(a.ops)} failing ops, {reruns} re-run "
          f"(accuscope run took {t_run:.1f} s)")
    for label, t in times.items():
        print(f"  advise {label:5s} {t:6.2f} s   {t / TARGET:.2f} of the 10 s target")
    print(f"  verdict: {a.primary.title}")
    print(f"  first cause: {a.cause.title if a.cause else '-'}")


if __name__ == "__main__":
    main()
