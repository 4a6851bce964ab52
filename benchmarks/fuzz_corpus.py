"""The full fuzz corpus over every reader: how many damaged inputs of each class, what became of them.

Seeds are real files of every input class (Ascend dump fixtures and `accuscope demo`'s dumps,
golden npy folders, npz, raw bin, OM JSON, ONNX, a Caffe prototxt, mapping.csv, result CSVs);
each gets every structural mutation of tests/fuzz/corpus.py plus --per-seed random byte flips,
truncations and extensions. Every case runs in a child process under RLIMIT_AS (1 GiB), restarted
after a crash or a hang, and the script prints cases and outcomes per class, the failures one per
line (input class | case | outcome | detail), and the time. Exit 1 when anything escaped, crashed,
hung or lost a good file. tests/engine/test_fuzz.py runs the same corpus with fewer random mutations.

    python benchmarks/fuzz_corpus.py [--per-seed 400] [--seed 0] [--classes ascend,npy,...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz.corpus import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a.startswith("--per-seed") for a in argv):
        argv = ["--per-seed", "400", *argv]
    sys.exit(main(argv))
