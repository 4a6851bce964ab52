"""Loading an Ascend dump folder versus plain np.fromfile of the same bytes, side by side.

Builds a ~1 GB dump folder with our writer (float32 ND tensors, float16 NC1HWC0 activations,
float16 FRACTAL_Z weights), warms the page cache, then for each group of tensors times, in
alternation and best of several rounds:
  raw      np.fromfile(path, dtype, count, offset) of each payload, then touch
  ours     open_npu_dump(...) header scan + Tensor.load() (layout converted, padding cropped), then touch
where touch reads every byte once (max over a uint8 view: cheap, so reading dominates), and
prints ours/raw per group, the extra cost per GB (layout conversion), and the peak RSS of a process that
visits every tensor one by one for a quarter of the folder and for all of it.

    python benchmarks/bench_load.py [--gb 1.0] [--dir /tmp/accuscope-bench-load] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.npudump import open_npu_dump

GROUPS = {  # name -> (storage format, logical shape, dtype, share of the bytes)
    "ND float32": ("ND", (1, 256, 64, 64), np.float32, 0.55),
    "NC1HWC0 float16": ("NC1HWC0", (4, 120, 64, 64), np.float16, 0.38),
    "FRACTAL_Z float16": ("FRACTAL_Z", (250, 250, 3, 3), np.float16, 0.07),
}


def build(folder: str, gb: float) -> None:
    if os.path.isdir(folder) and os.path.exists(os.path.join(folder, ".complete")):
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.default_rng(0)
    task = 0
    for name, (fmt, shape, dtype, share) in GROUPS.items():
        count = max(1, int(gb * share * 2**30 / (np.prod(shape) * np.dtype(dtype).itemsize)))
        base = rng.standard_normal(shape).astype(dtype)
        for k in range(count):
            task += 1
            data = base + np.asarray(k, dtype=dtype)
            path = os.path.join(folder, f"{fmt.title().replace('_', '')}.{name.split()[0]}_{k}.{task}.{1700000000000000 + task}")
            write_dump_file(path, f"{name.split()[0]}_{k}", outputs=[DumpTensor(data, format=fmt)])
    open(os.path.join(folder, ".complete"), "w").close()


def groups_of(folder: str) -> dict[str, list]:
    dump = open_npu_dump(folder)
    return {name: [t for t in dump.tensors if t.format == fmt] for name, (fmt, *_rest) in GROUPS.items()}


def touch(a: np.ndarray) -> int:
    return int(a.reshape(-1).view(np.uint8).max()) if a.size else 0


def time_raw(tensors) -> float:
    start = time.perf_counter()
    for t in tensors:
        p = t.payload
        touch(np.fromfile(p.path, dtype=p.dtype, count=p.nbytes // p.dtype.itemsize, offset=p.offset))
    return time.perf_counter() - start


def time_ours(folder: str, name: str) -> float:
    start = time.perf_counter()
    for t in groups_of(folder)[name]:  # the header scan is part of our cost
        touch(t.load())
    return time.perf_counter() - start


def rss_child(folder: str, limit: int) -> None:
    """Visit `limit` tensors one by one (0 = all) and print peak RSS in MB."""
    tensors = open_npu_dump(folder).tensors
    for t in tensors[: limit or None]:
        touch(t.load())
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--dir", default="/tmp/accuscope-bench-load")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return rss_child(args.rss_child[0], int(args.rss_child[1]))
    build(args.dir, args.gb)
    groups = groups_of(args.dir)
    for tensors in groups.values():
        time_raw(tensors)  # warm the page cache
    print(f"dump folder {args.dir}: {sum(len(v) for v in groups.values())} tensors")
    print(f"{'group':<20}{'tensors':>8}{'GB':>7}{'raw s':>9}{'ours s':>9}{'ours/raw':>10}{'extra s/GB':>12}")
    for name, tensors in groups.items():
        gb = sum(t.payload.nbytes for t in tensors) / 2**30
        raw = min(time_raw(tensors) for _ in range(args.rounds))
        ours = min(time_ours(args.dir, name) for _ in range(args.rounds))
        print(f"{name:<20}{len(tensors):>8}{gb:>7.2f}{raw:>9.3f}{ours:>9.3f}{ours / raw:>10.2f}{(ours - raw) / gb:>12.3f}")
    total = sum(len(v) for v in groups.values())
    rss = {}
    for limit in (total // 4, 0):
        res = subprocess.run([sys.executable, __file__, "--rss-child", args.dir, str(limit)],
                             capture_output=True, text=True, check=True)
        rss[limit] = float(res.stdout.strip())
    print(f"peak RSS visiting tensors one by one: quarter of the folder {rss[total // 4]:.0f} MB, "
          f"whole folder {rss[0]:.0f} MB (ratio {rss[0] / rss[total // 4]:.2f})")


if __name__ == "__main__":
    main()
