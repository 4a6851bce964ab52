"""`accuscope pairs --to msprobe`: a task's pairing as msprobe's -dm / -cm files, held to what the real
msprobe pairs with them (tests/fixtures/msprobe/cross/check_mapping.py ran msprobe 26.2 on the exported
data_mapping.yaml of two cases: export/*/msprobe_pairs.json) and read back by accuscope's own reader into the same pairs."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import crossmap
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope

CROSS = Path(__file__).parent.parent / "fixtures" / "msprobe" / "cross"


def pairs_of(task: Path) -> dict[str, str | None]:
    """{npu data name: golden data name or None} of a task's pairing."""
    return {p.npu.tensor_name: p.golden.tensor_name if p.golden is not None else None for p in load_task(task).plan.pairs}


def compare(out: Path, *more, golden: str = "pt") -> Path:
    r = accuscope("compare", "--npu", CROSS / "ms", "--golden", CROSS / golden, "--out", out, *more)
    assert r.returncode == 0, r.stderr
    return out


CASES = {  # check_mapping.py's cases: the golden side and how the task was made
    "decided": ("pt", ("--mapping", CROSS / "decisions.yaml")),
    "structure": ("pt_renamed", ("--match", "structure")),
}


@pytest.fixture(scope="module", params=CASES)
def exported(request, tmp_path_factory) -> tuple[str, Path, Path]:
    """(the case, its task: the MindSpore run against the PyTorch one, the task's export)."""
    root = tmp_path_factory.mktemp(request.param)
    golden, more = CASES[request.param]
    task = compare(root / "task", *more, golden=golden)
    r = accuscope("pairs", task, "--to", "msprobe", "--out", root / "mapping")
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "data_mapping.yaml" in r.stdout and "msprobe compare" in r.stdout
    return request.param, task, root / "mapping"


def test_msprobe_pairs_by_the_export_what_accuscope_paired(exported):
    case, task, mapping = exported
    recorded = CROSS / "export" / case
    # the files msprobe was run on are the ones the export writes today
    assert (mapping / "data_mapping.yaml").read_text() == (recorded / "data_mapping.yaml").read_text()
    assert (mapping / "cell_mapping.yaml").read_text() == (recorded / "cell_mapping.yaml").read_text()
    theirs = json.loads((recorded / "msprobe_pairs.json").read_text())
    ours = pairs_of(task)
    assert ours == theirs and sum(v is not None for v in ours.values()) == 109
    hows = {p.npu.tensor_name: p.how for p in load_task(task).plan.pairs}
    assert theirs["Mint.softmax.1.forward.output.0"] == "Torch.softmax.1.forward.output.0"  # the API table
    if case == "decided":  # a per-tensor pair no rule makes, a namesake rejected, name variants
        assert ours["Primitive.matmul.MatMul.0.forward.input.1"] == "Functional.linear.0.forward.input.1"
        assert ours["Tensor.__mul__.0.forward.input.1"] is None and theirs["Tensor.__mul__.0.forward.input.0"]
        assert theirs["Cell.layers.1.attention.qkv.Dense.forward.0.parameters.weight"] == \
            "Module.layers.1.self_attention.query_key_value.Linear.forward.0.parameters.weight"
    else:  # the renamed attention's calls, paired by structure alone
        name = "Cell.layers.1.attention.qkv.Dense.forward.0.output.0"
        assert hows[name] == "structure" and sum(h == "structure" for h in hows.values()) == 20
        assert theirs[name] == "Module.layers.1.mixer.query_key_value.Linear.forward.0.output.0"


def test_the_export_read_back_pairs_the_same(exported, tmp_path):
    case, task, mapping = exported
    golden = CASES[case][0]
    data = crossmap.load(str(mapping / "data_mapping.yaml"))
    cells = crossmap.load(str(mapping / "cell_mapping.yaml"))
    assert data.kind == crossmap.DATA and cells.kind == crossmap.CELL
    if case == "decided":
        assert data.names["Tensor.__mul__.0.forward.input.1"] == crossmap.NO_COUNTERPART
    ours = pairs_of(task)
    again = compare(tmp_path / "again", "--mapping", mapping / "data_mapping.yaml", golden=golden)
    assert pairs_of(again) == ours
    # the cell mapping pairs each module call it names as accuscope did, slot for slot where the names agree
    by_cells = pairs_of(compare(tmp_path / "cells", "--mapping", mapping / "cell_mapping.yaml", golden=golden))
    renamed = {k: v for k, v in ours.items() if k.startswith("Cell.") and v and k.split(".forward.")[1] ==
               v.split(".forward.")[1]}
    assert len(renamed) > 30 and all(by_cells[k] == v for k, v in renamed.items())


def test_the_apps_pairs_yaml_is_the_tasks_pairing(tmp_path):
    """Decisions recorded in the app (the task's pairs.yaml), not yet re-run, are exported."""
    task = compare(tmp_path / "task")
    shutil.copy(CROSS / "decisions.yaml", task / crossmap.DECISIONS)
    r = accuscope("pairs", task, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "data_mapping.yaml").read_text() == \
        (CROSS / "export" / "decided" / "data_mapping.yaml").read_text()


def test_what_cannot_be_exported_exits_2(tmp_path):
    npu, golden, task = tmp_path / "npu", tmp_path / "golden", tmp_path / "npy"
    for side in (npu, golden):
        side.mkdir()
        np.save(side / "conv1.npy", np.ones((2, 3), np.float32))
    assert accuscope("compare", "--npu", npu, "--golden", golden, "--out", task).returncode in (0, 1)
    r = accuscope("pairs", task, "--out", tmp_path / "m")
    assert r.returncode == 2 and "msprobe" in r.stderr and "Traceback" not in r.stderr
    cross = compare(tmp_path / "cross")
    os.symlink(tmp_path, tmp_path / "link")
    r = accuscope("pairs", cross, "--out", tmp_path / "link")
    assert r.returncode == 2 and "symbolic link" in r.stderr
    planted = tmp_path / "planted"  # a link planted at a file's name inside the folder: replaced, never followed
    planted.mkdir()
    (tmp_path / "target").write_text("theirs")
    os.symlink(tmp_path / "target", planted / "data_mapping.yaml")
    assert accuscope("pairs", cross, "--out", planted).returncode == 0
    assert (tmp_path / "target").read_text() == "theirs" and not (planted / "data_mapping.yaml").is_symlink()
    (tmp_path / "file").write_text("x")
    r = accuscope("pairs", cross, "--out", tmp_path / "file")
    assert r.returncode == 2 and "not a folder" in r.stderr
    r = accuscope("pairs", tmp_path / "nothing", "--out", tmp_path / "m")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_namesakes_need_no_file_rank_by_rank(tmp_path):
    """Two runs of one program, 2 steps of 2 ranks: every pair a namesake, so no file is written."""
    train = CROSS.parent / "train"
    task = tmp_path / "task"
    assert accuscope("compare", "--npu", train / "cand", "--golden", train / "bench", "--out", task).returncode == 0
    r = accuscope("pairs", task, "--out", tmp_path / "m")
    assert r.returncode == 0, r.stderr
    assert "no data_mapping.yaml" in r.stdout and "640 namesakes" not in r.stdout
    assert not (tmp_path / "m" / "data_mapping.yaml").exists()
