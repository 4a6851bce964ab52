"""A bounded run of the fuzz corpus (tests/fuzz/corpus.py): real inputs of every class, damaged.

Each case runs in a child process under RLIMIT_AS (1 GiB), so a reader that dies on a signal,
hangs on a FIFO or allocates what a header claims is caught as such. Nothing may escape the reader
API but SourceError, a broken tensor must carry its problem when opened, and the good files beside
a broken one must come back intact. The full corpus: benchmarks/fuzz_corpus.py.
"""
from __future__ import annotations

import pytest

from fuzz.corpus import CLASSES, FAILURES, run_corpus, summary

GROUPS = [("ascend",), ("npy", "npz", "bin", "mapping"), ("omjson", "onnx", "prototxt", "resultcsv"),
          ("msprobe", "pt", "ptfolder", "taskjson"), ("polygraphy", "tpumlir", "atb", "mindspore", "gegraph"),
          ("openvino",)]
PER_SEED = 30  # random byte mutations per seed file, besides every structural mutation


def test_groups_cover_every_input_class():
    assert sorted(c for g in GROUPS for c in g) == sorted(CLASSES)


@pytest.mark.parametrize("classes", GROUPS, ids=["+".join(g) for g in GROUPS])
def test_fuzz_corpus_finds_no_escape_crash_hang_or_loss(tmp_path, classes):
    results = run_corpus(tmp_path, per_seed=PER_SEED, seed=15, classes=classes)
    table = summary(results)
    assert set(table) == set(classes)
    bad = [f"{case.cls} | {case.label} | {outcome} | {detail}" for case, outcome, detail in results
           if outcome in FAILURES + ("late",)]
    assert not bad, "\n".join(bad[:20])
    for cls in classes:  # the corpus really damages: every class has refused or flagged inputs
        assert table[cls]["problems"] + table[cls]["refused"] > 0, table[cls]
