"""Pairs decided one tensor at a time (accuscope's own mapping file, `call:input:1: call:input:2`; `""`
rejects one tensor) through the real entry point, on the cross-framework msprobe fixture
(tests/fixtures/msprobe/cross: a MindSpore and a PyTorch step, compared with --match structure)."""
from __future__ import annotations

from pathlib import Path

from accuscope.engine.tasks.task import load_task
from support.cli import accuscope

CROSS = Path(__file__).parents[1] / "fixtures" / "msprobe" / "cross"
QKV = "Cell.layers.0.attention.qkv.Dense.forward.0"
QKV_PT = "Module.layers.0.self_attention.query_key_value.Linear.forward.0"
PROJ = "Cell.layers.0.attention.proj.Dense.forward.0"


def rows_of(folder: Path, call: str) -> dict[str, dict]:
    table = load_task(folder).table
    assert table is not None
    rows = (table.row(i) for i in range(len(table)))
    return {r["tensor"].rsplit(":", 2)[1] + ":" + r["tensor"].rsplit(":", 1)[1]: r for r in rows if r["npu_op"] == call}


def compare(tmp_path: Path, name: str, *more) -> Path:
    out = accuscope("compare", "--npu", CROSS / "ms", "--golden", CROSS / "pt", "--match", "structure", *more,
                    "--out", tmp_path / name)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    return tmp_path / name


def test_a_tensor_line_repairs_or_rejects_one_tensor_and_structure_pairs_the_rest(tmp_path):
    before = rows_of(compare(tmp_path, "before"), QKV)
    assert {r["how"] for r in before.values()} == {"name_variants"}
    pairs = tmp_path / "pairs.yaml"
    pairs.write_text(f'"{QKV}:input:1": "{QKV_PT}:input:2"\n'  # weight and bias swapped, on purpose
                     f'"{QKV}:input:2": "{QKV_PT}:input:1"\n'
                     f'"{PROJ}:output:0": ""\n')
    folder = compare(tmp_path, "after", "--mapping", pairs)
    qkv, proj = rows_of(folder, QKV), rows_of(folder, PROJ)
    assert qkv["input:1"]["how"] == qkv["input:2"]["how"] == "mapping"
    assert qkv["input:1"]["golden_op"] == QKV_PT
    # the weight now against the bias and the bias against the weight: their statistics' differences mirror
    assert qkv["input:1"]["max_diff"] == -qkv["input:2"]["max_diff"] != 0
    assert abs(qkv["input:1"]["max_diff"]) > 100 * abs(before["input:1"]["max_diff"])
    # the call's other tensors are still paired by name variants, beside the tensors decided one by one
    assert qkv["input:0"]["how"] == qkv["output:0"]["how"] == "name_variants"
    assert qkv["input:0"]["max_diff"] == before["input:0"]["max_diff"]
    assert proj["output:0"]["how"] == "" and "rejected in" in proj["output:0"]["reason"]
    assert {proj[k]["how"] for k in ("input:0", "input:1", "input:2")} == {"name_variants"}
