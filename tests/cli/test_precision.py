"""`accuscope precision` on real models: PP-OCR cls with one BatchNormalization planted beyond the
float16 range (test_diagnosis's cliff: keeping exactly that node in fp32 gives the output back), and
the same classifier quantized to int8 (dynamic), which a few convolutions kept in fp32 fix. Every
file the search writes is read back by the tool that consumes it."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import pytest

from accuscope.engine.precision.evaluate import parse_target
from accuscope.engine.precision.search import Search
from accuscope.engine.precision.trials import Trial
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.models import cos, output


@pytest.fixture(scope="module")
def cliff_search(cls_cliff, tmp_path_factory):  # noqa: F811 - the imported fixture
    root, ref, _, bn, x = cls_cliff
    out = tmp_path_factory.mktemp("prec") / "s"
    r = accuscope("precision", ref, "--to", "fp16", "--input", f"x={root / 'x.npy'}", "--target", "cos=0.9999",
                  "--out", out)
    return r, out, ref, bn, x


def test_fp16_cliff_is_fixed_by_exactly_the_planted_op_in_two_trials(cliff_search):
    r, out, ref, bn, x = cliff_search
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ranked first by sensitivity: {bn}" in r.stdout
    assert f"target met keeping 1 op(s) in fp32: {bn}" in r.stdout
    assert "2 trials (2 run now)" in r.stdout  # the full conversion, then the top-ranked op: no bisection
    records = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert records[0]["kind"] == "accuscope-precision" and records[0]["to"] == "fp16"
    assert records[1]["keep"] == [] and records[2]["ranked"][0] == bn and records[3]["keep"] == [bn]
    assert all(r["seconds"] > 0 and r["at"].endswith("+00:00") and "cos" in r["values"] for r in (records[1], records[3]))
    # the ranking is made once the full conversion has missed; the log ends in the list and its files
    assert len(records) == 5 and records[4]["final"]["met"] and records[4]["final"]["keep"] == [bn]
    assert records[4]["final"]["files"]["keep_dtype"] == "result/keep_dtype.cfg"
    # the mixed model itself meets the target against the reference
    golden = output(str(ref), x)
    assert cos(output(str(out / "result" / "model.onnx"), x), golden) > 0.9999


def test_every_output_is_read_back_by_the_tool_that_consumes_it(cliff_search):
    from onnxconverter_common import float16
    from onnxruntime.quantization import quantize_dynamic
    from polygraphy.tools.args.util import parse_arglist_to_dict
    _, out, ref, bn, x = cliff_search
    res = out / "result"
    golden = output(str(ref), x)
    block = json.loads((res / "node_block_list.json").read_text())
    assert block == [bn]
    kept = float16.convert_float_to_float16(onnx.load(str(out / "reference.onnx")), keep_io_types=True,
                                            node_block_list=block)
    assert cos(output(kept, x), golden) > 0.9999
    node = next(n for n in kept.graph.node if n.name == bn)  # the blocked node itself still computes in float32
    floats = {t.name: t.data_type for t in kept.graph.initializer}
    assert all(floats[i] == onnx.TensorProto.FLOAT for i in node.input if i in floats) and len(node.input) == 5
    exclude = json.loads((res / "nodes_to_exclude.json").read_text())
    quantize_dynamic(str(out / "reference.onnx"), str(out / "q.onnx"), nodes_to_exclude=exclude)
    q = onnx.load(str(out / "q.onnx"))
    assert bn in {n.name for n in q.graph.node}  # excluded: left as it was
    tokens = (res / "polygraphy.txt").read_text().split()
    assert tokens[:4] == ["--fp16", "--precision-constraints", "obey", "--layer-precisions"]
    assert parse_arglist_to_dict(tokens[4:], allow_empty_key=False) == {bn: "float32"}
    node = next(n for n in onnx.load(str(out / "reference.onnx")).graph.node if n.name == bn)
    qtable = [line.split() for line in (res / "qtable.txt").read_text().splitlines() if not line.startswith("#")]
    assert qtable == [[node.output[0], "F32"]]  # tpu-mlir names an op by its output tensor
    # the same list in the other toolchains' words: NNCF, RKNN-Toolkit2 (by output tensor), ATC, AMCT
    assert json.loads((res / "ignored_scope.json").read_text()) == {"names": [bn]}
    import yaml
    assert yaml.safe_load((res / "rknn_hybrid.cfg").read_text()) == {"custom_quantize_layers": {node.output[0]: "float16"}}
    assert (res / "keep_dtype.cfg").read_text() == f"{bn}\n"
    assert [line for line in (res / "amct_skip_layers.cfg").read_text().splitlines() if not line.startswith("#")] == \
        [f"skip_layers: {json.dumps(bn)}"]
    per_node = json.loads((res / "precision.json").read_text())
    assert {p["name"]: p["precision"] for p in per_node}[bn] == "float32"
    assert sum(p["precision"] == "float16" for p in per_node) > 100
    task = load_task(res / "task")  # the final model against the reference: a task like any other
    assert task.table is not None
    assert len(task.table) > 100 and min(task.table.columns["cos"][~np.isnan(task.table.columns["cos"])]) > 0.99


@pytest.fixture(scope="module")
def drift_input(tmp_path_factory):
    """An input on which the classifier's int8 conversion misses cos 0.9995 (test_diagnosis's drift)."""
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    path = tmp_path_factory.mktemp("x") / "x.npy"
    np.save(path, x)
    return path, x


def test_int8_model_is_fixed_by_excluding_a_few_ops(cls_cliff, drift_input, tmp_path):  # noqa: F811
    _, ref, _, _, _ = cls_cliff
    xpath, x = drift_input
    r = accuscope("precision", ref, "--to", "int8", "--input", f"x={xpath}", "--target", "cos=0.9995",
                  "--out", tmp_path / "s", "--json")
    # the planted BN is no int8 concern: dynamic quantization touches only Conv/MatMul
    doc = json.loads(r.stdout)
    assert doc["met"] and r.returncode == 0, r.stderr
    assert 1 <= len(doc["keep"]) <= 8 < doc["candidates"]
    from onnxruntime.quantization import quantize_dynamic
    quantize_dynamic(str(tmp_path / "s" / "reference.onnx"), str(tmp_path / "q.onnx"), nodes_to_exclude=doc["keep"])
    golden = output(str(ref), x)
    assert cos(output(str(tmp_path / "q.onnx"), x), golden) >= 0.9995
    full = _trials(tmp_path / "s" / "trials.jsonl")[0]
    assert full["keep"] == [] and full["values"]["cos"] < 0.9995
    # the list as written, taken by onnxruntime's static quantization: the named Convs stay in float32
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": x}])

        def get_next(self):
            return next(self.feeds, None)
    exclude = json.loads((tmp_path / "s" / "result" / "nodes_to_exclude.json").read_text())
    assert exclude == doc["keep"]
    quantize_static(str(tmp_path / "s" / "reference.onnx"), str(tmp_path / "qs.onnx"), Reader(), nodes_to_exclude=exclude)
    q = onnx.load(str(tmp_path / "qs.onnx"))
    floats = {t.name for t in q.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    weights = {n.name: n.input[1] for n in q.graph.node if n.op_type == "Conv"}  # QDQ: a quantized one's comes dequantized
    assert set(exclude) <= set(weights) and all(weights[c] in floats for c in exclude)
    assert sum(w not in floats for c, w in weights.items() if c not in exclude) > 10  # the others quantized


def _trials(log) -> list[dict]:
    """The trials of a log (whole lines only: a kill may have torn the last)."""
    records = []
    for line in log.read_text().splitlines()[1:]:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return [r for r in records if "n" in r]


CHECK = """import os, sys
ops = open(sys.argv[-1]).read().split()
assert ops == open(os.environ["ACCUSCOPE_OPS_FILE"]).read().split() and os.path.isfile(os.environ["ACCUSCOPE_MODEL"])
sys.exit(0 if {want!r} in ops else 1)
"""


def test_check_command_decides_and_a_killed_search_resumes_without_redoing_trials(cls_cliff, tmp_path):  # noqa: F811
    """A --check script accepting only the sets holding one early Conv (not the ranked BN): the
    search must bisect and prune to it. Killed after a few trials, run again: it resumes."""
    root, ref, _, bn, _ = cls_cliff
    want = [n.name for n in onnx.load(str(ref)).graph.node if n.op_type == "Conv"][3]
    script = tmp_path / "check.py"
    script.write_text(CHECK.format(want=want))
    args = [sys.executable, "-m", "accuscope", "precision", str(ref), "--to", "fp16", "--input",
            f"x={root / 'x.npy'}", "--check", f"{sys.executable} {script}", "--out", str(tmp_path / "s")]
    log = tmp_path / "s" / "trials.jsonl"
    scratch = tempfile.mkdtemp(prefix="accuscope-pool-")  # killed, it leaves its pool's folders: here, removed
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # (short: a socket path
                             env={**os.environ, "TMPDIR": scratch})  # under it stays within AF_UNIX's 108 bytes)
    try:
        while first.poll() is None and (not log.exists() or len(_trials(log)) < 4):
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    before = _trials(log)
    assert len(before) >= 4
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "from the log" in r.stdout and f"target met keeping 1 op(s) in fp32: {want}" in r.stdout
    trials = _trials(log)
    assert [t["keep"] for t in trials[:len(before)]] == [t["keep"] for t in before]
    keys = [frozenset(t["keep"]) for t in trials]
    assert len(keys) == len(set(keys))  # no trial ran twice
    assert [t["n"] for t in trials] == list(range(1, len(trials) + 1))
    assert all(t["check"] in (0, 1) for t in trials)
    ranking = [json.loads(line) for line in log.read_text().splitlines() if '"ranked"' in line]
    assert len(ranking) == 1 and ranking[0]["ranked"][0] == bn  # ranked once, by the first run


def test_budget_stops_the_search_with_exit_1(cls_cliff, drift_input, tmp_path):  # noqa: F811
    _, ref, _, _, _ = cls_cliff
    r = accuscope("precision", ref, "--to", "int8", "--input", f"x={drift_input[0]}", "--target", "cos=0.99999",
                  "--max-trials", "1", "--out", tmp_path / "s")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "target not met" in r.stdout and "--max-trials 1 reached" in r.stdout
    assert not (tmp_path / "s" / "result").exists() and not (tmp_path / "s" / "ranking").exists()  # not needed yet


def test_unusable_input_is_one_line_and_exit_2(cls_cliff, tmp_path):  # noqa: F811
    root, ref, _, _, _ = cls_cliff
    for extra, needle in ((["--target", "bogus=1"], "--target bogus=1"), (["--target", "cos=x"], "not a number")):
        r = accuscope("precision", ref, "--to", "fp16", "--input", f"x={root / 'x.npy'}", "--out", tmp_path / "s",
                      *extra)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = accuscope("precision", tmp_path / "nope.onnx", "--to", "fp16", "--random-inputs", "--out", tmp_path / "s")
    assert r.returncode == 2 and "nope.onnx" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trials.jsonl").write_text("garbage\n")
    r = accuscope("precision", ref, "--to", "fp16", "--input", f"x={root / 'x.npy'}", "--out", tmp_path / "t")
    assert r.returncode == 2 and "trials.jsonl" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_search_order_greedy_then_bisection_then_pruning():
    """The search alone, on a made-up monotone judge: ops a and d are needed; the ranking names a."""
    order = list("abcdefgh")

    def evaluate(keep, phase, n):
        return Trial(n, phase, keep, {"cos": 1.0}, passed={"a", "d"} <= set(keep))

    s = Search(evaluate, ["a"], order)
    out = s.run()
    assert out.met and sorted(out.keep) == ["a", "d"]
    phases = [t.phase for t in out.trials]
    assert phases[:3] == ["full", "greedy", "all"] and "bisect" in phases and phases[-1] == "prune"
    again = Search(evaluate, ["a"], order, done=out.trials).run()  # a replay: no new trial
    assert again.ran == 0 and again.keep == out.keep
    assert parse_target("red=0.01").met(0.005) and not parse_target("cos=0.99").met(0.98)
    with pytest.raises(SourceError):
        parse_target("cos")


def test_static_int8_calibrates_on_a_folder_and_excludes_the_named_ops(cls_cliff, drift_input, tmp_path):  # noqa: F811
    from accuscope.engine.precision.convert import candidates, convert, prepare
    _, ref, _, _, _ = cls_cliff
    cal = tmp_path / "cal"
    cal.mkdir()
    for i in range(2):
        np.save(cal / f"{i}.npy", np.random.default_rng(i).standard_normal((1, 3, 48, 192)).astype(np.float32))
    model = prepare(ref)
    names = candidates(model, "int8", str(cal))
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    assert set(convs) <= set(names)
    q = convert(model, "int8", convs[:2], str(cal))
    producer = {o: n.op_type for n in q.graph.node for o in n.output}
    fed = {n.name: {producer.get(i) for i in n.input[:2]} for n in q.graph.node if n.op_type == "Conv"}
    assert all("DequantizeLinear" not in fed[c] for c in convs[:2])  # left in fp32
    assert all(fed[c] == {"DequantizeLinear"} for c in convs[2:])  # the others quantized (QDQ)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="holds no .npy or .npz"):
        convert(model, "int8", [], str(empty))
    (cal / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(SourceError, match="bad.npy"):
        convert(model, "int8", [], str(cal))


def test_fp16_without_onnxconverter_common_is_exit_2_with_the_install_line(tmp_path):
    """The [onnx] extra does not bring onnxconverter-common: a stand-in on PYTHONPATH that fails to
    import plays its absence. The search stops before any work, with the line to install it."""
    import os

    from accuscope.engine.demo.workspace import build_model
    ref = tmp_path / "ref.onnx"
    onnx.save(build_model("cnn", 0), str(ref))
    standin = tmp_path / "standin" / "onnxconverter_common"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text("raise ImportError('No module named onnxconverter_common (a stand-in)')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(standin.parent),
                                                                      os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "accuscope", "precision", str(ref), "--to", "fp16", "--random-inputs",
                        "--target", "cos=0.99", "--out", str(tmp_path / "s")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--to fp16 needs onnxconverter-common: pip install onnxconverter-common" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr and not (tmp_path / "s").exists()
