"""A columnar task of 1.2M rows: open, a text filter, `/` search, sort by name and a threshold change,
before (another git ref's code, default `main`) against after (this tree), side by side as ratios.

Builds the task once in --dir: a real multi-rank comparison (--ranks ranks of --tensors npy tensor
pairs, compared by `run_ranks` into a columnar task as tests/app/test_ranks_app.py does with a small
COLUMNAR_ROWS), whose rank tables are then written --repeat times over (each copy one more step:
op names repeat across ranks and steps as in an LLM run) into the task's column store. Each
operation then runs in a fresh Python process per side (the task opened, the operation run twice:
first = a cold call, again = with what the table cached), printing seconds and the process's peak RSS.
The threshold change runs on a copy of the task (main's code writes the result again).

    python benchmarks/bench_columnar.py [--before main] [--ranks 8] [--tensors 1000] [--repeat 150]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tui"

OPS = {
    "open": "",
    "filter npu_op == 'x'": "table.filter_mask(\"npu_op == 'Functional.linear.7.forward.output'\")",
    "search 'linear.42'": "table.search('linear.42', None, -1)",
    "sort by name": "table.sort_order('npu_op')",
    "threshold change": "task.set_thresholds(edited(task.thresholds))",
}

CHILD = """
import json, resource, sys, time
from accuscope.engine.tasks.task import load_task
t0 = time.perf_counter()
task = load_task(sys.argv[1])
table = task.table
opened = time.perf_counter() - t0
def edited(thresholds):
    thresholds.edit("cos=0.5")
    return thresholds
times = []
for _ in range(2 if sys.argv[2] else 0):
    t = time.perf_counter()
    exec(sys.argv[2])
    times.append(time.perf_counter() - t)
times = times or [opened, opened]
print(json.dumps({"rows": len(table), "first": times[0], "again": times[1],
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(folder: Path, ranks: int, tensors: int, repeat: int) -> int:
    """The columnar task in `folder` (kept between runs); returns its rows."""
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.demo.ranktree import write_rank_tree
    from accuscope.engine.tasks import rankrun
    from accuscope.engine.tasks.columnstore import write_columns
    from accuscope.engine.tasks.rankfiles import rank_tables

    task = folder / "task"
    doc = task / "task.json"
    if doc.exists() and json.loads(doc.read_text()).get("rows") == ranks * tensors * repeat:
        return ranks * tensors * repeat
    shutil.rmtree(folder, ignore_errors=True)
    npu, golden = write_rank_tree(folder / "tree", ranks=ranks, tensors=tensors, size=64, faulty=(3,), bad_from=700)
    rankrun.COLUMNAR_ROWS = 0  # columnar whatever its size, as the app test does
    rankrun.run_ranks(CompareSpec(str(npu), str(golden)), task, workers=2)
    meta = json.loads(doc.read_text())
    tables = list(rank_tables(task, meta["ranks"], []))

    def copies():
        for step in range(repeat):
            for table in tables:
                columns = dict(table.columns)
                columns["step"] = columns["step"] * 0 + step
                yield ResultTable(columns, table.custom, table.present)
    rows = write_columns(task, copies())
    meta.update(rows=rows, failing=meta["failing"] * repeat)
    doc.write_text(json.dumps(meta))
    return rows


def measure(tui: Path, task: Path, op: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tui)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(task), OPS[op]], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git ref of the code to compare with (default main)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--tensors", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=150)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "accuscope-bench-columnar")
    args = ap.parse_args()
    rows = build(args.dir, args.ranks, args.tensors, args.repeat)
    before = args.dir / "before"
    shutil.rmtree(before, ignore_errors=True)
    before.mkdir()
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", args.before, "tui"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(before, filter="data")
    print(f"{rows:,} rows, columnar; before = {args.before}, after = this tree")
    print(f"{'operation':<22} {'before s':>9} {'after s':>8} {'x':>6}   {'again b':>8} {'again a':>8}"
          f"   {'RSS b MB':>8} {'RSS a MB':>8} {'x':>5}")
    for op in OPS:
        results = []
        for tui in (before / "tui", HERE):
            task = args.dir / "task"
            if op == "threshold change":
                task = args.dir / "copy"
                shutil.rmtree(task, ignore_errors=True)
                shutil.copytree(args.dir / "task", task)
            results.append(measure(tui, task, op))
        b, a = results
        print(f"{op:<22} {b['first']:>9.2f} {a['first']:>8.2f} {b['first'] / max(a['first'], 1e-6):>6.1f}"
              f"   {b['again']:>8.2f} {a['again']:>8.2f}   {b['rss']:>8.0f} {a['rss']:>8.0f}"
              f" {b['rss'] / a['rss']:>5.1f}")
    shutil.rmtree(args.dir / "copy", ignore_errors=True)
    shutil.rmtree(before, ignore_errors=True)


if __name__ == "__main__":
    main()
