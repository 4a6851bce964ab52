"""msprobe dumps: statistics-only triage at LLM scale, and accuscope against msprobe's own compare.

  (a) statistics-only triage of a dump.json of CALLS calls (100k by default; 2 input tensors and 1
      output per call, statistics mode as msprobe writes it, on both sides, 1% of the calls off):
      `accuscope compare --stats-only` end to end (process start, reading both dump.json, pairing,
      comparing, writing the task), and the engine alone on the same dumps: the statistics columns
      (compare/statcolumns.py) read by the compiled scanner (sources/_dumpscan.c), the same columns
      read by json/orjson and its Python twin (msprobe._scan), and the general path (plan + execute).
      Target: under 5 s.
  (b) the same multi-rank tensor dump compared by msprobe and by accuscope: `msprobesim` writes a
      4-rank step of the demo transformer at benchmark size (--seq, --hidden, --ffn), reference and
      side under test. msprobe's compare reads MindSpore's .npy only with MindSpore installed (its
      mindspore package imports it), which does not install here, so the dump is converted to
      PyTorch's layout (.pt by torch.save, framework pytorch) in the venv holding torch and msprobe
      (--msprobe-python), and both tools compare that: `msprobe compare -m auto -tp npu/step0 -gp
      golden/step0 -o OUT` (all ranks, one after another) against one `accuscope compare` of all
      ranks (in parallel on the local pool), with its peak RSS. accuscope on the original .npy dump is timed too.
      Target: accuscope >= 10x faster.

Wall times of whole processes; the ratio printed. Setup (dump writing, conversion) is not timed.

    python benchmarks/bench_msprobe.py [--calls 100000] [--dir /tmp/accuscope-bench-msprobe]
        [--msprobe-python /tmp/torchenv/bin/python] [--seq 512 --hidden 512 --ffn 2048] [--only a,b]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tui"), os.environ.get("PYTHONPATH", "")])}

TO_PT = r"""
import json, os, sys
import numpy as np, torch
for folder, _dirs, files in os.walk(sys.argv[1]):
    if "dump.json" not in files:
        continue
    path = os.path.join(folder, "dump.json")
    doc = json.load(open(path))
    doc["framework"] = "pytorch"
    def visit(v):
        if isinstance(v, dict):
            name = v.get("data_name")
            if isinstance(name, str) and name.endswith(".npy"):
                npy = os.path.join(folder, "dump_tensor_data", name)
                torch.save(torch.from_numpy(np.load(npy)), npy[:-4] + ".pt")
                os.remove(npy)
                v.update(data_name=name[:-4] + ".pt", type="torch.Tensor", dtype="torch.float32")
            for x in v.values():
                visit(x)
        elif isinstance(v, list):
            for x in v:
                visit(x)
    visit(doc["data"])
    json.dump(doc, open(path, "w"))
"""


def timed(cmd: list[str], **kw) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    seconds = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return seconds


def timed_rss(cmd: list[str], work: Path, **kw) -> tuple[float, float]:
    """Wall seconds of a whole process and the peak RSS (MB) of its largest process (it or a pool
    worker), as GNU time reports it."""
    out = work / "maxrss.txt"
    seconds = timed(["/usr/bin/time", "-f", "%M", "-o", out, *cmd], **kw)
    return seconds, int(out.read_text().split()[-1]) / 1024


def warm(root: Path) -> None:
    """Read every file under root once, so that each tool is timed on files in the page cache (a cold
    read of 135 MB of .npy after the .pt runs cost 5 s once, and no tool's merit)."""
    for f in root.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                while fh.read(1 << 22):
                    pass


def statistics_dump(folder: Path, calls: int, off: float, factor: float) -> None:
    """A statistics-mode dump.json of `calls` calls (2 inputs, 1 output each), as msprobe writes it;
    a share `off` of the outputs' statistics multiplied by `factor` (the side under test)."""
    rng = np.random.default_rng(7)
    stats = rng.standard_normal((calls, 3, 4))
    stats[rng.random(calls) < off, 2] *= factor

    def tensor(k: int, j: int) -> dict:
        mx, mn, mean, norm = stats[k, j].tolist()
        return {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [4096, 4096], "Max": mx, "Min": mn,
                "Mean": mean, "Norm": abs(norm), "requires_grad": False}
    data = {f"Functional.linear.{k}.forward": {"input_args": [tensor(k, 0), tensor(k, 1)], "input_kwargs": {},
                                                "output": [tensor(k, 2)]} for k in range(calls)}
    (folder / "step0" / "rank0").mkdir(parents=True, exist_ok=True)
    with open(folder / "step0" / "rank0" / "dump.json", "w") as fh:
        json.dump({"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
                   "data": data}, fh, indent=1)


def bench_statistics(work: Path, calls: int) -> None:
    from accuscope.engine.compare import statcolumns
    from accuscope.engine.compare.comparison import execute, plan
    from accuscope.engine.compare.spec import CompareSpec
    npu, golden = work / "stats-npu", work / "stats-golden"
    if not (npu / "step0" / "rank0" / "dump.json").exists():
        statistics_dump(golden, calls, 0.0, 1.0)
        statistics_dump(npu, calls, 0.01, 3.0)  # 3x: |diff| / max = 2/3, above msprobe's 0.5
    size = (npu / "step0" / "rank0" / "dump.json").stat().st_size
    print(f"(a) statistics-only triage: {calls:,} calls, {3 * calls:,} tensors per side, dump.json {size / 1e6:.0f} MB")
    from accuscope.engine.sources import msprobe
    spec = CompareSpec(str(npu), str(golden), stats_only=True)
    start = time.perf_counter()
    table, _coverage = statcolumns.compare(spec)
    columnar = time.perf_counter() - start
    scanner, msprobe._dumpscan = msprobe._dumpscan, None
    start = time.perf_counter()
    statcolumns.compare(spec)
    twin = time.perf_counter() - start
    msprobe._dumpscan = scanner
    start = time.perf_counter()
    p = plan(spec)
    planned = time.perf_counter() - start
    general = execute(p, workers=1)
    engine = time.perf_counter() - start
    failing = int(table.columns["fail"].sum())
    assert failing == int(general.columns["fail"].sum())
    shutil.rmtree(work / "stats-task", ignore_errors=True)
    cli = timed([sys.executable, "-m", "accuscope", "compare", "--npu", npu, "--golden", golden, "--stats-only",
                 "--out", work / "stats-task"])
    print(f"    engine, general path (plan {planned:.2f} s + execute {engine - planned:.2f} s): {engine:.2f} s")
    print(f"    engine, statistics columns read by json + Python: {twin:.2f} s  -> {engine / twin:.1f}x faster")
    print(f"    engine, statistics columns read by the compiled scanner: {columnar:.2f} s  -> {engine / columnar:.1f}x "
          f"faster than the general path, {twin / columnar:.1f}x than json + Python{'' if scanner else ' (NOT BUILT)'}; "
          f"{failing:,} rows fail")
    print(f"    accuscope compare --stats-only (whole process, task written): {cli:.2f} s "
          f"({'under' if cli < 5 else 'OVER'} the 5 s target)")


def bench_versus_msprobe(work: Path, python: str, seq: int, hidden: int, ffn: int, ranks: int) -> None:
    from accuscope.engine.demo import msprobesim
    npy, pt = work / f"npy-{seq}-{hidden}-{ffn}", work / f"pt-{seq}-{hidden}-{ffn}"
    if not npy.exists():
        for side, fault in (("golden", None), ("npu", 2)):
            msprobesim.write(str(npy / side), ranks=ranks, steps=1, fault_rank=fault, seq=seq, hidden=hidden, ffn=ffn)
    if not pt.exists():
        shutil.copytree(npy, pt)
        subprocess.run([python, "-c", TO_PT, str(pt)], check=True)
    size = sum(f.stat().st_size for f in (pt / "npu").rglob("*.pt")) + sum(
        f.stat().st_size for f in (pt / "golden").rglob("*.pt"))
    print(f"(b) {ranks} ranks, seq {seq}, hidden {hidden}, ffn {ffn}: {size / 1e6:.0f} MB of tensors on both sides")
    out = work / "msprobe-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    msprobe_bin = str(Path(python).parent / "msprobe")
    warm(pt)
    theirs, rss_theirs = timed_rss([msprobe_bin, "compare", "-m", "auto", "-tp", pt / "npu" / "step0", "-gp",
                                    pt / "golden" / "step0", "-o", out], work, cwd=work)
    written = sorted(p.name for p in out.rglob("*.xlsx")) + sorted(p.name for p in out.rglob("*.csv"))
    if not written:
        raise SystemExit(f"msprobe wrote no result into {out}")

    def ours(root: Path) -> tuple[float, float]:
        """One accuscope process comparing every rank (ranks in parallel on the local pool): seconds, and
        the peak RSS of its largest process (MB)."""
        task = work / f"task-{root.name}"
        warm(root)
        shutil.rmtree(task, ignore_errors=True)
        return timed_rss([sys.executable, "-m", "accuscope", "compare", "--npu", root / "npu", "--golden",
                          root / "golden", "--out", task], work)
    (ours_pt, rss_pt), (ours_npy, rss_npy) = ours(pt), ours(npy)
    print(f"    msprobe compare (all ranks):            {theirs:7.2f} s  ({len(written)} result files), peak RSS {rss_theirs:.0f} MB")
    print(f"    accuscope compare, all ranks (.pt):     {ours_pt:7.2f} s  -> {theirs / ours_pt:.1f}x faster, "
          f"peak RSS {rss_pt:.0f} MB")
    print(f"    accuscope compare, all ranks (.npy):    {ours_npy:7.2f} s  -> {theirs / ours_npy:.1f}x faster, "
          f"peak RSS {rss_npy:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/accuscope-bench-msprobe"))
    ap.add_argument("--msprobe-python", default="/tmp/torchenv/bin/python",
                    help="a Python with torch and mindstudio-probe installed (not accuscope's venv)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--only", default="a,b")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if "a" in args.only:
        bench_statistics(args.dir, args.calls)
    if "b" in args.only:
        if not Path(args.msprobe_python).exists():
            print(f"(b) skipped: no {args.msprobe_python} (python -m venv ...; pip install torch mindstudio-probe)")
        else:
            bench_versus_msprobe(args.dir, args.msprobe_python, args.seq, args.hidden, args.ffn, args.ranks)


if __name__ == "__main__":
    main()
