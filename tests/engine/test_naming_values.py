"""Values that name are shown, not judged, across frameworks: an all_reduce's process group given by
name on MindSpore's side (`"tp-0-1-2-3"`) and as PyTorch's default (None) on the other is information,
not a failing row; within one framework a differing string argument (`mode`) still fails.

The files: msprobe's own MindSpore and PyTorch dumps of one step (tests/fixtures/msprobe/cross, written
by make_cross.py), with one collective call added to each dump.json as msprobe records a call's
arguments (the tensor's statistics, then the group)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.statistics import names_not_computes
from accuscope.engine.sides.registry import open_side

CROSS = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "cross"
ARGS = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "args"
STATS = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 4], "Max": 1.0, "Min": -1.0, "Mean": 0.0,
         "Norm": 2.0, "requires_grad": False}


def with_collective(tmp_path: Path, side: str, group) -> Path:
    shutil.copytree(CROSS / side, tmp_path / side)
    doc_path = tmp_path / side / "step0" / "rank0" / "dump.json"
    doc = json.loads(doc_path.read_text())
    doc["data"]["Distributed.all_reduce.0.forward"] = {
        "input_args": [STATS], "input_kwargs": {"group": group}, "output": [STATS]}
    doc_path.write_text(json.dumps(doc))
    return tmp_path / side / "step0" / "rank0"


def test_a_process_group_named_against_the_default_is_shown_not_judged(tmp_path):
    ms = with_collective(tmp_path, "ms", {"type": "str", "value": "tp-0-1-2-3"})
    pt = with_collective(tmp_path, "pt", None)
    p = plan(CompareSpec(str(ms), str(pt)))
    assert p.across
    table = execute(p, workers=1)
    assert table is not None
    c = table.columns
    row = next(i for i in range(len(table)) if c["npu_op"][i] == "Distributed.all_reduce.0.forward"
               and "tp-0-1-2-3" in c["reason"][i])
    assert not c["fail"][row] and "names" in c["reason"][row] and "not judged" in c["reason"][row]


def test_a_differing_string_argument_within_one_framework_still_fails(tmp_path):
    """msprobe's PyTorch dumps of one net: `mode` of F.pad "constant" against "reflect" computes."""
    bench = next((ARGS / "bench").glob("step0/*"))
    cand = tmp_path / "cand"
    shutil.copytree(bench, cand)
    doc = json.loads((cand / "dump.json").read_text())
    pad = doc["data"]["Functional.pad.0.forward"]
    assert pad["input_kwargs"]["mode"]["value"] == "constant"
    pad["input_kwargs"]["mode"]["value"] = "reflect"
    (cand / "dump.json").write_text(json.dumps(doc))
    p = plan(CompareSpec(str(cand), str(bench)))
    assert not p.across
    table = execute(p, workers=1)
    assert table is not None
    c = table.columns
    row = next(i for i in range(len(table)) if c["npu_value"][i] == '"reflect"')
    assert c["fail"][row]
    x = next(t for t in open_side(str(cand)).tensors if t.value == '"reflect"')
    y = next(t for t in open_side(str(bench)).tensors if t.value == '"constant"')
    assert names_not_computes(x, y) == ""  # a mode computes, even across frameworks
