"""Pairing 100k calls across frameworks: a MindSpore and a PyTorch statistics dump.json of N calls (a
Megatron-style stack of layers, the MindSpore side with its own layer names), paired with msprobe's layer
mapping file, with the API table alone, and with --match structure. Prints seconds per step: reading both
sides (as Tensors) apart from pairing them (crossmap.pair + mapping.map_tensors).

    python -P benchmarks/bench_crossmap.py [CALLS]   (default 100000)
"""
import json
import os
import sys
import tempfile
import time

from accuscope.engine.compare import crossmap
from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.sides.registry import open_side

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


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    root = tempfile.mkdtemp(prefix="bench-crossmap-")
    npu, golden = (os.path.join(root, s, "step0", "rank0") for s in ("ms", "pt"))
    side(npu, "mindspore", calls)
    side(golden, "pytorch", calls)
    layers = os.path.join(root, "layer_mapping.yaml")
    with open(layers, "w") as fh:
        fh.write("Layer:\n  attention: self_attention\n")
    print(f"{calls:,} calls a side")
    for label, path, structure in (("layer mapping file", layers, False), ("API table", None, False),
                                   ("API table + --match structure", None, True)):
        t0 = time.perf_counter()
        a, b = open_side(npu, stats_only=True), open_side(golden, stats_only=True)
        n = len(a.tensors) + len(b.tensors)
        t1 = time.perf_counter()
        found = crossmap.pair(a, b, crossmap.load(path) if path else None, structure=structure)
        mapping = map_tensors(a, b, cross=found)
        t2 = time.perf_counter()
        print(f"{label:32s} read {t1 - t0:5.2f} s ({n:,} tensors)  pair {t2 - t1:5.2f} s  "
              f"paired {len(mapping.matched):,} of {len(mapping.pairs):,}")


if __name__ == "__main__":
    main()
