"""accuscope against tpu-mlir's own `npz_tool compare` on the files tpu-mlir wrote, side by side in one run.

The fixtures of tests/fixtures/tpumlir (PP-OCR cls converted by tpu-mlir 1.30.2, F16, bm1684x):
  (a) the tpu MLIR's 150 tensors against the top MLIR's, `--tolerance 0.99,0.90`
  (b) the top MLIR against the original ONNX model's run (the BatchNormalizations folded into their
      Convs: accuscope re-pairs 37 tensors by their values), `--tolerance 0.99,0.99`
Each command is a whole process; medians of alternating runs. npz_tool runs in the Python 3.10 venv
tests/fixtures/tpumlir/make_fixtures.py builds (skipped, saying so, when it is absent). The in-process
time of plan + execute for (a) is printed too (the issue's target: under 1 s for 150 tensors).

    python benchmarks/bench_tpumlir.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "tpumlir"
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "tpumlir"))
sys.path.insert(0, str(ROOT / "tui"))

CASES = {"a": ("cls_bm1684x_f16_tpu_outputs.npz", "cls_top_outputs.npz", "0.99,0.90"),
         "b": ("cls_top_outputs.npz", "onnx_out.npz", "0.99,0.99")}


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    import make_fixtures as mf
    tool = os.path.join(mf.VENV, "bin", "npz_tool.py")
    have_tool = os.path.exists(os.path.join(mf.VENV, "bin", "python"))
    accuscope = [sys.executable, "-P", "-m", "accuscope"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tui")}
    from accuscope.engine.compare.comparison import execute, plan
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.compare.thresholds import Thresholds
    a, b, tol = CASES["a"]
    inproc = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        th = Thresholds([])
        th.set_tolerance(0.99, 0.90)
        p_ = plan(CompareSpec(npu=str(FIX / a), golden=str(FIX / b), thresholds=th))
        execute(p_, workers=1)
        inproc.append(time.perf_counter() - t0)
    print(f"(a) plan + execute in process, {len(p_.npu.tensors)} tensors: {statistics.median(inproc):.3f} s (median "
          f"of {args.rounds})")
    for key, (npu, golden, tol) in CASES.items():
        ours, theirs = [], []
        with tempfile.TemporaryDirectory() as d:
            for k in range(args.rounds):
                ours.append(timed([*accuscope, "compare", "--npu", str(FIX / npu), "--golden", str(FIX / golden),
                                   "--tolerance", tol, "--out", f"{d}/t{k}"], env))
                if have_tool:
                    theirs.append(timed([os.path.join(mf.VENV, "bin", "python"), tool, "compare", str(FIX / npu),
                                         str(FIX / golden), "--tolerance", tol], mf.tool_env()))
        line = f"({key}) {npu} against {golden}: accuscope compare {statistics.median(ours):.2f} s"
        if theirs:
            line += (f", npz_tool compare {statistics.median(theirs):.2f} s: accuscope "
                     f"{statistics.median(theirs) / statistics.median(ours):.1f}x faster (all ten metrics and the "
                     "TpuVerdict ladder against npz_tool's two)")
        else:
            line += f" (npz_tool not measured: run {FIX / 'make_fixtures.py'} once to build its venv)"
        print(line)


if __name__ == "__main__":
    main()
