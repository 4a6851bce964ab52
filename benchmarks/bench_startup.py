"""CLI start-up, this tree against another revision's (default: main), side by side in one run:
`import accuscope.cli` (python -X importtime, its cumulative line), the wall time of
`accuscope inspect --help`, of a small real command (`accuscope inspect` on a 4-tensor npy
folder) and of `accuscope compare` on two such folders (target <= 250 ms), and how many modules that compare
imports (-X importtime's lines: fewer modules is the lasting part of a start-up gain), and, where valgrind is
installed, the instructions that compare executes (callgrind's count: the same on every run, so a change of
1% shows on a machine whose wall times drift 30% within the hour). Both trees are byte-compiled
first (as an installed package is), so no run pays for compiling modules. Each figure is the median of
--repeat runs, the two trees' runs interleaved.

    python benchmarks/bench_startup.py [--base main] [--repeat 9]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "accuscope/engine/compare"


def checkout(rev: str, into: Path) -> Path:
    """`rev`'s tui/ as plain files (git archive), with this tree's compiled kernel when it has none."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "tui"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for so in (ROOT / "tui" / KERNEL).glob("_kernel*.so"):
        target = into / "tui" / KERNEL / so.name
        if not target.exists():
            shutil.copy2(so, target)
    return into / "tui"


def import_ms(tui: Path) -> float:
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import accuscope.cli"], capture_output=True,
                       text=True, env=_env(tui), check=True)
    line = next(ln for ln in r.stderr.splitlines() if ln.rstrip().endswith("| accuscope.cli"))
    return int(re.split(r"\s*\|\s*", line)[1]) / 1000


def wall_ms(tui: Path, *args: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "accuscope", *args], capture_output=True, env=_env(tui))
    elapsed = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit(f"accuscope {' '.join(args)} exited {r.returncode} in {tui}: {r.stderr.decode()[-300:]}")
    return elapsed


def modules(tui: Path, *args: str) -> float:
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "accuscope", *args], capture_output=True,
                       text=True, env=_env(tui), check=True)
    return sum(1 for ln in r.stderr.splitlines() if re.match(r"import time:\s+\d", ln))


def instructions(tui: Path, *args: str) -> float:
    """Millions of instructions the whole process executes (valgrind's callgrind: deterministic)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, "-m",
                            "accuscope", *args], capture_output=True, text=True, env=_env(tui), check=True)
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1)) / 1e6


def _env(tui: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tui), "COLUMNS": "120", "NO_COLOR": "1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the revision to compare against (default main)")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="accuscope-bench-startup-") as tmp:
        tmp = Path(tmp)
        trees = {args.base: checkout(args.base, tmp / "base"), "this tree": ROOT / "tui"}
        for tui in trees.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tui)], check=True, stdout=subprocess.DEVNULL,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
        dump, golden = tmp / "dump", tmp / "golden"
        rng = np.random.default_rng(0)
        for folder in (dump, golden):
            folder.mkdir()
            for i, name in enumerate(("conv1", "relu1", "conv2", "fc")):
                np.save(folder / f"{name}.0.{1700000000000000 + i}.npy", rng.standard_normal((1, 8, 4, 4), np.float32))
        measures = {
            "import accuscope.cli (importtime, ms)": import_ms,
            "accuscope inspect --help (wall, ms)": lambda t: wall_ms(t, "inspect", "--help"),
            "accuscope inspect NPY_DIR (wall, ms)": lambda t: wall_ms(t, "inspect", str(dump)),
            "accuscope compare NPY_DIR NPY_DIR (wall, ms)": lambda t: wall_ms(
                t, "compare", "--npu", str(dump), "--golden", str(golden), "--out", str(tmp / "task")),
            "accuscope compare: modules imported": lambda t: modules(
                t, "compare", "--npu", str(dump), "--golden", str(golden), "--out", str(tmp / "task")),
        }
        if shutil.which("valgrind"):
            measures["accuscope compare: M instructions (callgrind)"] = lambda t: instructions(
                t, "compare", "--npu", str(dump), "--golden", str(golden), "--out", str(tmp / "task"))
        print(f"{'':46} {args.base:>10} {'this tree':>10} {'ratio':>7}   (load {os.getloadavg()[0]:.1f})")
        for label, measure in measures.items():
            runs = {name: [] for name in trees}
            repeat = 1 if "callgrind" in label else args.repeat  # the same count every run
            for name, tui in list(trees.items()) * (repeat + 1):  # interleaved; the first pair warms up
                runs[name].append(measure(tui))
            old, new = (statistics.median(r[1:]) for r in runs.values())
            print(f"{label:46} {old:10.0f} {new:10.0f} {old / new:6.2f}x")


if __name__ == "__main__":
    main()
