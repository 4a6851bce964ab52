"""`accuscope sensitivity` on a real case: PP-OCR cls with one BatchNormalization planted beyond the
float16 range (test_diagnosis's cliff), fp32 against its fp16 conversion. The ranking is useful when
the block list it prints, given back to the converter, gives the reference output back."""
from __future__ import annotations

import json

import onnx
import pytest

from accuscope.engine.diagnose.sensitivity import sensitivity
from support.cli import accuscope
from support.models import cos, output


@pytest.fixture(scope="module")
def cliff_task(cls_cliff, tmp_path_factory):  # noqa: F811 - the imported fixture
    root, ref, cand, bn, x = cls_cliff
    task = tmp_path_factory.mktemp("sens") / "t"
    r = accuscope("run", ref, cand, "--input", f"x={root / 'x.npy'}", "--out", task)
    assert r.returncode == 0, r.stdout + r.stderr
    return task, ref, bn, x


def test_planted_op_ranks_first_and_its_block_list_gives_the_output_back(cliff_task):
    from onnxconverter_common import float16
    task, ref, bn, x = cliff_task
    ranking = sensitivity(task)
    assert ranking.method == "rerun" and ranking.outcome == "fail"
    first = ranking.ops[0]
    assert first.isolated_cos is not None and first.output_cos_alone is not None
    assert first.op == bn and first.origin == "introduced" and first.cause == "fp16_range"
    assert first.chain == [bn] and "red" in first.broken and first.error >= 1 - first.isolated_cos
    assert any("float16" in c for c in first.changes)
    assert first.output_cos_alone < 0.99  # its error alone makes the output fail (the advisor's reach)
    # introduced before inherited, mean_rel-only ops last
    order = [(o.minor, o.origin != "introduced") for o in ranking.ops]
    assert order == sorted(order)
    names = ranking.block_list(1)
    assert names == [bn] and ranking.to_dict(1)["nodes_to_exclude"] == [bn]
    # the proof: the printed list fed back into the converter gives the reference output
    golden = output(str(ref), x)
    kept = float16.convert_float_to_float16(onnx.load(str(ref)), keep_io_types=True, node_block_list=names)
    assert cos(output(kept, x), golden) > 0.9999
    assert (task / "advice.json").exists()  # advised once, reused next time
    again = sensitivity(task)
    assert [o.op for o in again.ops] == [o.op for o in ranking.ops]


def test_cli_prints_the_ranking_the_lists_and_json(cliff_task):
    task, _, bn, _ = cliff_task
    r = accuscope("sensitivity", task, "--top", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the model fails" in r.stdout and f"#1 {bn} (BatchNormalization), fp16_range: " in r.stdout
    assert f'node_block_list (onnxconverter-common float16): ["{bn}"' in r.stdout
    assert "nodes_to_exclude (onnxruntime.quantization)" in r.stdout
    r = accuscope("sensitivity", task, "--json", "--top", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["ops"]) <= 2 and doc["ops"][0]["op"] == bn and doc["ops"][0]["cause"] == "fp16_range"
    assert doc["node_block_list"][0] == bn and doc["outcome"] == "fail" and doc["method"] == "rerun"


def test_cli_on_a_missing_task_exits_2(tmp_path):
    r = accuscope("sensitivity", tmp_path / "nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(tmp_path / "nope") in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = accuscope("sensitivity", tmp_path, "--top", "0")
    assert r.returncode == 2 and "count of ops" in r.stderr


def test_without_a_framework_model_the_cli_says_it_ranks_by_the_weaker_method(tmp_path):
    from accuscope.engine.demo.workspace import MAIN, build_workspace
    build_workspace(tmp_path)  # its own (a copy's task.json names the original's dumps)
    task = tmp_path / MAIN.name
    doc = json.loads((task / "task.json").read_text())
    for model in (task / "model" / "tinynet.onnx", task / "golden" / "model.onnx"):  # the framework models
        model.unlink()
    doc["demo"].pop("framework_model")
    (task / "task.json").write_text(json.dumps(doc))
    r = accuscope("sensitivity", task, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["method"] == "input-output", doc["framework_model"]
    assert doc["ops"] and not any(o["cause"] for o in doc["ops"])
    assert any("weaker input/output method" in n for n in doc["notes"])
    r = accuscope("sensitivity", task)
    assert r.returncode == 0 and "own error by the weaker input/output method" in r.stdout
