"""The full fuzz corpus over every reader, then the hostile corpus through the real command.

1. tests/fuzz/corpus.py: seeds are real files of every input class (Ascend dump fixtures and
   `accuscope demo`'s dumps, golden npy folders, npz, raw bin, OM JSON, ONNX, a Caffe prototxt,
   mapping.csv, result CSVs); each gets every structural mutation plus --per-seed random byte flips,
   truncations and extensions, run through the reader API in a child under RLIMIT_AS (1 GiB). It
   prints cases and outcomes per class and the failures one per line.
2. tests/fuzz/hostile.py: crafted payloads (DAG reprs, zip bombs, odd zips and stride tricks in .pt
   files, deep JSON and folders, huge integers, NUL and bidi names, symlinks in output folders,
   modules planted in the working directory, a FIFO and /dev/zero given to every path option, deep, huge,
   anchored and tagged YAML, billions of ranks), each run as `accuscope ...` in a fresh process. It
   prints per class: inputs, tracebacks, exit codes outside 0/1/2, hangs (> 60 s), peak RSS.

Exit 1 when anything escaped, crashed, hung, lost a good file or failed a hostile case.
tests/engine/test_fuzz.py and tests/cli/test_hostile_corpus.py run the same (the first with fewer
random mutations).

    python benchmarks/fuzz_corpus.py [--per-seed 400] [--seed 0] [--classes ascend,npy,...] [--hostile-only]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz import corpus, hostile  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    status = 0
    if "--hostile-only" in argv:
        argv.remove("--hostile-only")
    else:
        if not any(a.startswith("--per-seed") for a in argv):
            argv = ["--per-seed", "400", *argv]
        status = corpus.main(argv)
        print()
    sys.exit(hostile.main([]) or status)
