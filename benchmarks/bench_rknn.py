"""What reading an RKNN snapshot costs against RKNN-Toolkit2 writing it: `accuracy_analysis` (its simulator
and golden runs, dumped layer by layer, and its error table) as timed by tests/fixtures/rknn/make_fixtures.py
(the manifest's rknn_seconds), against accuscope (1) opening both sides of the snapshot and loading every
layer, (2) the whole comparison into a task folder (open, pair, compare, write), both in this process, and
(3) `accuscope compare SNAPSHOT --out T` as a command (a fresh interpreter). Prints the best of --repeat of
each and its ratio to RKNN's own time, per case (the committed ones and the cache's: cls-int8-wide is
1x3x48x192):

    python benchmarks/bench_rknn.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))
MANIFESTS = [Path(os.path.expanduser("~/.cache/accuscope-tests/conformance/rknn/cases.json")),
             ROOT / "tests" / "fixtures" / "conformance" / "rknn" / "cases.json"]


def read_all(snapshot: str) -> int:
    from accuscope.engine.compare.inputs import two_runners
    from accuscope.engine.sides.registry import open_side
    npu_runner, golden_runner = two_runners(snapshot, None, None)
    n = 0
    for runner in (npu_runner, golden_runner):
        for t in open_side(snapshot, runner=runner).tensors:
            n += t.load().size
    return n


def compare(snapshot: str, out: str) -> None:
    from accuscope.engine.compare.inputs import build_spec
    from accuscope.engine.tasks.taskrun import run_comparison
    run_comparison(build_spec({"npu": snapshot, "golden": snapshot}), out, one_source=True)


def best(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    path = next((p for p in MANIFESTS if p.is_file()), None)
    if path is None:
        print("no RKNN manifest: run tests/fixtures/rknn/make_fixtures.py")
        return 1
    doc = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for k, case in enumerate(doc["cases"]):
            snapshot = str(path.parent / case["accuscope"]["source"])
            if not os.path.isdir(snapshot):
                continue
            own = case["rknn_seconds"]
            values = read_all(snapshot)
            read = best(partial(read_all, snapshot), args.repeat)
            cmp = best(partial(compare, snapshot, os.path.join(tmp, f"t{k}")), args.repeat)
            command = [sys.executable, "-m", "accuscope", "compare", snapshot, "--out", os.path.join(tmp, f"c{k}")]
            cli = best(partial(subprocess.run, command, env={**os.environ, "PYTHONPATH": str(ROOT / "tui")},
                               capture_output=True, check=True), max(1, args.repeat // 2))
            print(f"{case['id']}: {values:,} values on both sides · RKNN accuracy_analysis {own:.2f} s · accuscope "
                  f"read {read:.3f} s ({read / own:.2f}x) · compare {cmp:.3f} s ({cmp / own:.2f}x) · "
                  f"command {cli:.2f} s ({cli / own:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
