"""Pairing 100k calls across frameworks: a MindSpore and a PyTorch statistics dump.json of N calls (a
Megatron-style stack of layers, the MindSpore side with its own layer names), paired with msprobe's layer
mapping file, with the API table alone, and with --match structure. Each case runs in a fresh `python -P`
process that reads both sides (open_side and their Tensors and calls: not timed as pairing) and then
pairs them (crossmap.pair + mapping.map_tensors: timed, wall and CPU seconds). Target: pairing < 5 s.
Then what pairing left is named (leftovers.account), timed on its own.

With --base-tui DIR (another checkout's tui folder: before), the same cases run from there too,
alternating with this tree's round by round (the machine's load is shared by both), and the ratios
base/this tree are printed (median over the rounds). Best of --rounds.

    python -P benchmarks/bench_crossmap.py [CALLS] [--rounds 2] [--base-tui /work/main/tui]   (CALLS: 100000)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from accuscope.engine.compare import crossmap
from accuscope.engine.compare.mapping import map_tensors

try:
    from accuscope.engine.sides.registry import open_side
except ImportError:  # a --base-tui from before engine/sides/
    from accuscope.engine.sources.registry import open_side

STATS = {"Max": 1.0, "Min": -1.0, "Mean": 0.0, "Norm": 2.0, "requires_grad": False}


def tensor(fw: str, shape) -> dict:
    return {"type": "mindspore.Tensor" if fw == "mindspore" else "torch.Tensor",
            "dtype": "Float32" if fw == "mindspore" else "torch.float32", "shape": shape, **STATS}


def side(folder: str, fw: str, calls: int) -> None:
    """Layers of (norm, qkv linear, matmul, softmax, matmul, proj linear, add): 9 calls a layer with its modules."""
    ms = fw == "mindspore"
    data, construct, stack = {}, {}, {}
    layer, k = 0, 0
    counters: dict[str, int] = {}

    def api(name: str, parent: str, n_in: int = 2) -> None:
        nonlocal k
        c = counters.get(name, 0)
        counters[name] = c + 1
        call = f"{name}.{c}.forward"
        data[call] = {"input_args": [tensor(fw, [4, 8]) for _ in range(n_in)], "output": [tensor(fw, [4, 8])]}
        construct[call] = parent
        stack[call] = []
        k += 1

    while k < calls:
        top = f"{'Cell' if ms else 'Module'}.layers.{layer}.Layer.forward.0"
        att_name = "attention" if ms else "self_attention"
        att = f"{'Cell' if ms else 'Module'}.layers.{layer}.{att_name}.Attention.forward.0"
        api("Mint.matmul" if ms else "Torch.matmul", att)
        api("Mint.softmax" if ms else "Torch.softmax", att, 1)
        api("Mint.matmul" if ms else "Torch.matmul", att)
        api("Tensor.__add__", top)
        for call, parent in ((att, top), (top, None)):
            data[call] = {"input_args": [tensor(fw, [4, 8])], "output": [tensor(fw, [4, 8])]}
            construct[call] = parent
            k += 1
        layer += 1
    os.makedirs(folder)
    for name, doc in (("dump.json", {"task": "statistics", "level": "mix", "framework": fw, "dump_data_dir": None,
                                     "data": data}), ("construct.json", construct), ("stack.json", stack)):
        with open(os.path.join(folder, name), "w") as fh:
            json.dump(doc, fh)


CASES = {"layer mapping file": ("layers", False), "API table": ("", False),
         "API table + --match structure": ("", True)}


def child(root: str, case: str) -> None:
    """One case in this process: read, then pair; prints one JSON line."""
    npu, golden = (os.path.join(root, s, "step0", "rank0") for s in ("ms", "pt"))
    mapping, structure = CASES[case]
    t0 = time.perf_counter()
    a, b = open_side(npu, stats_only=True), open_side(golden, stats_only=True)
    n = len(a.tensors) + len(b.tensors)  # the calls (Side.ops) too
    t1, c1 = time.perf_counter(), time.process_time()
    found = crossmap.pair(a, b, crossmap.load(os.path.join(root, "layer_mapping.yaml")) if mapping else None,
                          structure=structure)
    paired = map_tensors(a, b, cross=found)
    t2, c2 = time.perf_counter(), time.process_time()
    try:  # what is left named (compare/leftovers.py; absent from a --base-tui before it): timed on its own
        from accuscope.engine.compare import leftovers
    except ImportError:
        left, t3 = {}, t2
    else:
        left = leftovers.account(a.ops, b.ops, paired.pairs, found.unmapped_apis).counts()
        t3 = time.perf_counter()
    print(json.dumps({"read": t1 - t0, "pair": t2 - t1, "cpu": c2 - c1, "tensors": n, "left": t3 - t2,
                      "paired": len(paired.matched), "of": len(paired.pairs), "leftovers": left}))


def build(root: str, calls: int) -> None:
    marker = os.path.join(root, f"built-{calls}")
    if os.path.exists(marker):
        return
    shutil.rmtree(root, ignore_errors=True)
    side(os.path.join(root, "ms", "step0", "rank0"), "mindspore", calls)
    side(os.path.join(root, "pt", "step0", "rank0"), "pytorch", calls)
    with open(os.path.join(root, "layer_mapping.yaml"), "w") as fh:
        fh.write("Layer:\n  attention: self_attention\n")
    open(marker, "w").close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("calls", nargs="?", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--base-tui", help="another checkout's tui folder, timed in the same rounds")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "bench-crossmap"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.dir, args.child)
        return
    build(args.dir, args.calls)
    here = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tui"))
    trees = {"this tree": here, **({"base": os.path.abspath(args.base_tui)} if args.base_tui else {})}
    runs: dict[tuple[str, str], list[dict]] = {(t, c): [] for t in trees for c in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            for tree, tui in trees.items():
                out = subprocess.run([sys.executable, "-P", os.path.abspath(__file__), "--dir", args.dir,
                                      "--child", case], env={**os.environ, "PYTHONPATH": tui},
                                     capture_output=True, text=True, check=True).stdout
                runs[(tree, case)].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.calls:,} calls a side, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; best of "
          f"{args.rounds} rounds, each case a fresh process, trees alternating")
    for case in CASES:
        for tree in trees:
            r = runs[(tree, case)]
            best = min(r, key=lambda x: x["pair"])
            print(f"{case:30s} {tree:9s} read {min(x['read'] for x in r):5.2f} s ({best['tensors']:,} tensors)  "
                  f"pair {best['pair']:5.2f} s (CPU {min(x['cpu'] for x in r):5.2f} s)  "
                  f"paired {best['paired']:,} of {best['of']:,}; left named {best.get('left', 0):5.2f} s "
                  f"{best.get('leftovers') or ''}")
        if "base" in trees:
            ratio = statistics.median(b["pair"] / t["pair"] for b, t in zip(runs[("base", case)],
                                                                             runs[("this tree", case)]))
            cpu = statistics.median(b["cpu"] / t["cpu"] for b, t in zip(runs[("base", case)],
                                                                         runs[("this tree", case)]))
            print(f"{'':30s} base / this tree: pairing {ratio:.2f}x wall, {cpu:.2f}x CPU (median of rounds)")


if __name__ == "__main__":
    main()
