"""Merging 8 TP shards against reading them: an msprobe tensor-mode dump of a TP=8 run (8 rank folders, npy
tensor files, N Megatron-style layers: a ColumnParallelLinear and, inside a RowParallelLinear, its partial
linear), read two ways in one run, side by side:

  read    every rank's dump (msprobe.read) and every shard's data into memory (a copy of each file's bytes),
          a tensor's 8 shards held together
  merge   the merged run (`--shards names`: shards.read) and every merged tensor's data (once: 8 shards read
          and checked equal; concat: joined; sum: added)

Prints the seconds of each (the best of R rounds, the files in the page cache) and merge / read, by the
wall clock and by this process's CPU time (steadier on a machine other jobs share: waiting for a core is not
counted).

    python -P benchmarks/bench_shards.py [LAYERS] [ROUNDS]   (default 16 layers, 5 rounds)
"""
import json
import os
import sys
import tempfile
import time

import numpy as np

from accuscope.engine.compare import shards
from accuscope.engine.sources import msprobe

TP, TOKENS, HIDDEN, FFN = 8, 64, 512, 2048


def entry(folder: str, name: str, data: np.ndarray) -> dict:
    np.save(os.path.join(folder, "dump_tensor_data", name + ".npy"), data)
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(data.shape), "Max": float(data.max()),
            "Min": float(data.min()), "Mean": float(data.mean()), "Norm": float(np.linalg.norm(data)),
            "requires_grad": False, "data_name": name + ".npy"}


def write(root: str, layers: int) -> None:
    rng = np.random.default_rng(0)
    x = [rng.standard_normal((TOKENS, HIDDEN), dtype=np.float32) for _ in range(layers)]
    w1 = [rng.standard_normal((FFN, HIDDEN), dtype=np.float32) for _ in range(layers)]
    w2 = [rng.standard_normal((HIDDEN, FFN), dtype=np.float32) for _ in range(layers)]
    part = FFN // TP
    for r in range(TP):
        folder = os.path.join(root, "step0", f"rank{r}")
        os.makedirs(os.path.join(folder, "dump_tensor_data"))
        data, construct = {}, {}
        for k in range(layers):
            col = f"Module.layers.{k}.fc1.ColumnParallelLinear.forward.0"
            w = w1[k][r * part:(r + 1) * part]
            h = x[k] @ w.T
            data[col] = {"input_args": [entry(folder, f"{col}.input.0", x[k])], "input_kwargs": {},
                         "output": [entry(folder, f"{col}.output.0", h)],
                         "parameters": {"weight": entry(folder, f"{col}.parameters.weight", w)}}
            row = f"Module.layers.{k}.fc2.RowParallelLinear.forward.0"
            api = f"Functional.linear.{k}.forward"
            v = np.ascontiguousarray(w2[k][:, r * part:(r + 1) * part])
            data[api] = {"input_args": [entry(folder, f"{api}.input.0", h), entry(folder, f"{api}.input.1", v)],
                         "input_kwargs": {}, "output": [entry(folder, f"{api}.output.0", h @ v.T)]}
            data[row] = {"input_args": [entry(folder, f"{row}.input.0", h)], "input_kwargs": {}, "output": [],
                         "parameters": {"weight": entry(folder, f"{row}.parameters.weight", v)}}
            construct[api] = row
        with open(os.path.join(folder, "dump.json"), "w") as fh:
            json.dump({"task": "tensor", "level": "mix", "framework": "pytorch", "dump_data_dir": "dump_tensor_data",
                       "data": data}, fh)
        with open(os.path.join(folder, "construct.json"), "w") as fh:
            json.dump(construct, fh)


def read_all(root: str) -> int:
    """Every rank's dump, then each tensor's 8 shards read into memory together (as the merge holds them)."""
    by_name: dict[str, list] = {}
    for _, _, folder in msprobe.ranks(root):
        for t in msprobe.read(folder)[0]:
            by_name.setdefault(t.tensor_name, []).append(t)
    total = 0
    for group in by_name.values():
        shards_in_memory = [np.array(t.load()) for t in group]
        total += sum(a.nbytes for a in shards_in_memory)
    return total


def merge_all(root: str) -> int:
    tensors, problems, _how = shards.read(root, shards="names")
    assert not problems and not any(t.problem for t in tensors), problems
    return sum(np.asarray(t.load()).nbytes for t in tensors)


def main() -> None:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory() as root:
        write(root, layers)
        shard_bytes = read_all(root)
        merged_bytes = merge_all(root)
        best = {"read": float("inf"), "merge": float("inf")}
        cpu = dict(best)
        for _ in range(rounds):  # alternated, so both see the same machine
            for name, fn in (("read", read_all), ("merge", merge_all)):
                start, start_cpu = time.perf_counter(), time.process_time()
                fn(root)
                best[name] = min(best[name], time.perf_counter() - start)
                cpu[name] = min(cpu[name], time.process_time() - start_cpu)
    print(f"TP={TP}, {layers} layers: {shard_bytes / 2**20:.0f} MiB of shards, {merged_bytes / 2**20:.0f} MiB merged")
    print(f"read  {best['read']:.3f} s   (8 ranks' dumps and every shard's data)")
    print(f"merge {best['merge']:.3f} s   (the merged run and every merged tensor's data)")
    print(f"merge / read = {best['merge'] / best['read']:.2f}   (CPU time: {cpu['merge'] / cpu['read']:.2f}; "
          f"load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
