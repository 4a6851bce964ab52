"""Any source on either side: framework against framework, on real pretrained models.

PP-OCR (from the rapidocr-onnxruntime wheel) against its float16 conversion (onnxconverter-common)
and its int8 dynamic quantization (onnxruntime.quantization), through the real entry point: the
`run` flow, `dump` + `compare` on two npy folders, npz on both sides, a mapping file, the refusal
to call a run that paired nothing a pass, and the operator detail, advisor and export on the result.
"""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest

from accuscope.engine.compare.mapping import read_mapping_file
from accuscope.engine.runs.onnxedit import constants_as_initializers
from accuscope.engine.sides.registry import detect, open_side
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import load_task
from support.narrow import present


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def cls_pair(cls_model, tmp_path_factory):
    """(root, fp32 model, fp16 model, input file)."""
    from onnxconverter_common import float16
    root = tmp_path_factory.mktemp("sides-cls")
    m = onnx.load(str(cls_model))
    onnx.save(float16.convert_float_to_float16(m, keep_io_types=True), str(root / "cls16.onnx"))
    np.save(root / "x.npy", np.random.default_rng(3).standard_normal((1, 3, 48, 192)).astype(np.float32))
    return root, cls_model, root / "cls16.onnx", root / "x.npy"


@pytest.fixture(scope="module")
def det_int8(det_model, tmp_path_factory):
    """(root, fp32 model with initializers, its quantize_dynamic int8 version, input file)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    root = tmp_path_factory.mktemp("sides-det")
    onnx.save(constants_as_initializers(onnx.load(str(det_model))), str(root / "det.onnx"))
    quantize_dynamic(str(root / "det.onnx"), str(root / "det8.onnx"), weight_type=QuantType.QInt8)
    np.save(root / "x.npy", np.random.default_rng(4).standard_normal((1, 3, 96, 96)).astype(np.float32))
    return root, root / "det.onnx", root / "det8.onnx", root / "x.npy"


def test_run_fp32_against_fp16_then_detail_advice_and_export(cls_pair, tmp_path):
    root, ref, cand, x = cls_pair
    task = tmp_path / "task"
    r = accuscope("run", ref, cand, "--input", f"x={x}", "--out", task, "--advisor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "network outputs compared 1 of 1" in r.stdout and "advice for" in r.stdout
    meta = json.loads((task / "task.json").read_text())
    cov = meta["coverage"]
    assert meta["sides"] == {"npu": "npy", "golden": "npy"} and not cov["warnings"]
    assert cov["golden_used"] == cov["golden_total"] and cov["npu_paired"] == cov["npu_total"] > 500
    assert Path(meta["npu"]).parent.parent == (task / "dumps").resolve()  # the dumps live in the task
    table = load_task(task).table
    assert table is not None
    c = table.columns
    paired = c["how"] != ""
    assert set(c["how"][paired]) == {"tensor", "name"}  # graph tensor names first, node names for renamed outputs
    assert (c["how"][paired] == "tensor").mean() > 0.95
    assert c["is_output"].sum() == 1 and (c["type"] != "").all()
    # every op's inputs come from its producers, so input rows exist as in a device dump
    assert (c["io"][paired] == "input").sum() > 200
    # fp16 against fp32 on a real model: close, but not bit-equal
    cos = table.numbers("cos")[paired]
    assert np.nanmin(cos) > 0.99 and np.nanmax(table.numbers("max_abs")[paired]) > 0

    conv = next(op for op, io in zip(c["npu_op"], c["io"]) if op.startswith("Conv") and io == "output")
    r = accuscope("op", task, conv, "--out", tmp_path / "detail")
    assert r.returncode == 0, r.stdout + r.stderr
    assert any((tmp_path / "detail").glob("*_summary.txt"))

    ops = [op for op, io in zip(c["golden_op"], c["io"]) if io == "output" and op.startswith("Conv")]
    r = accuscope("export", task, "--start", ops[1], "--end", ops[3], "--retest")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "re-test:" in r.stdout


def test_int8_quantized_model_pairs_by_tensor_names(det_int8, tmp_path):
    """quantize_dynamic renames every Conv (ConvInteger + casts + Mul) but keeps the output tensor
    names: every reference tensor still finds its candidate counterpart; what the quantizer added
    is NPU-only with the reason, not 'unpaired'."""
    root, ref, cand, x = det_int8
    assert accuscope("dump", ref, "--out", tmp_path / "ref", "--input", f"x={x}").returncode == 0
    assert accuscope("dump", cand, "--out", tmp_path / "cand", "--input", f"x={x}").returncode == 0
    renamed = {n.name for n in onnx.load(str(ref)).graph.node} - {n.name for n in onnx.load(str(cand)).graph.node}
    assert len(renamed) > 50  # the quantizer renamed the convolutions
    r = accuscope("compare", "--npu", tmp_path / "cand", "--golden", tmp_path / "ref", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    cov = json.loads((tmp_path / "t" / "task.json").read_text())["coverage"]
    assert cov["golden_used"] == cov["golden_total"] and cov["npu_paired"] == cov["npu_total"]
    assert cov["npu_only"] > 100 and cov["outputs_paired"] == 1
    c = present(load_task(tmp_path / "t").table).columns
    only = c["is_npu_only"]
    assert all(r.startswith("inserted by the conversion") for r in c["reason"][only])
    assert not (c["fail"] & only).any()  # what has no counterpart is never flagged
    # a renamed conv: its output is compared with the reference conv's output, found by tensor name
    ground = {op: g for op, g, io in zip(c["npu_op"], c["golden_op"], c["io"]) if io == "output"}
    assert any(ground.get(op) in renamed for op in ground)


def test_npz_on_both_sides_and_a_mapping_file(cls_pair, tmp_path):
    """Tensors keyed by graph tensor names in .npz files pair by those names; keys renamed beyond
    any rule pair only through the user's mapping file, and pairing nothing is an error, not a pass."""
    root, ref, cand, x = cls_pair
    assert accuscope("dump", ref, "--out", tmp_path / "ref", "--input", f"x={x}").returncode == 0
    assert accuscope("dump", cand, "--out", tmp_path / "cand", "--input", f"x={x}").returncode == 0
    for name, prefix in (("ref", ""), ("cand", "dev/")):
        side = open_side(tmp_path / name)
        with zipfile.ZipFile(tmp_path / f"{name}.npz", "w") as zf:
            for op in side.ops:
                for t in op.outputs:
                    if t.tensor_name:
                        with zf.open(f"{prefix}{t.tensor_name}.npy", "w") as fh:
                            np.lib.format.write_array(fh, np.asarray(t.load()), allow_pickle=False)
    assert detect(str(tmp_path / "ref.npz")).kind == "npz"
    # same keys on both sides: pairs by tensor name
    r = accuscope("compare", "--npu", tmp_path / "ref.npz", "--golden", tmp_path / "ref.npz", "--out", tmp_path / "same")
    assert r.returncode == 0, r.stdout + r.stderr
    assert present(load_task(tmp_path / "same").table).numbers("cos")[0] == pytest.approx(1.0)

    # every key renamed: nothing pairs -> exit 2 naming both sides and the likely causes
    r = accuscope("compare", "--npu", tmp_path / "cand.npz", "--golden", tmp_path / "ref.npz", "--out", tmp_path / "none")
    assert r.returncode == 2
    assert "nothing was paired" in r.stderr and "--mapping" in r.stderr and "dev/" in r.stderr
    assert not (tmp_path / "none" / "result.npz").exists()

    keys = [k[:-4] for k in zipfile.ZipFile(tmp_path / "ref.npz").namelist()]
    yaml = tmp_path / "map.yaml"
    yaml.write_text("# renamed by the device toolchain\n" + "".join(f"dev/{k}: {k}\n" for k in keys[:3]))
    csv = tmp_path / "map.csv"
    csv.write_text("npu_name,golden_name\n" + "".join(f"dev/{k},{k}:output:0\n" for k in keys))
    assert read_mapping_file(str(yaml)) == {f"dev/{k}": k for k in keys[:3]}

    r = accuscope("compare", "--npu", tmp_path / "cand.npz", "--golden", tmp_path / "ref.npz", "--mapping", csv,
                  "--out", tmp_path / "mapped", "--fail-on-error", "--threshold", "cos=0.9", "--threshold", "red=0.5",
                  "--threshold", "mean_rel=off", "--threshold", "kl=off", "--threshold", "rmse=off")
    assert r.returncode == 0, r.stdout + r.stderr
    c = present(load_task(tmp_path / "mapped").table).columns
    assert (c["how"] == "mapping").sum() == len(keys)  # every reference tensor, through the file
    assert len(c["how"]) - len(keys) == 2  # the converter's input and output casts: no line for them

    # a few pairs only: the verdict is not a pass
    r = accuscope("compare", "--npu", tmp_path / "cand.npz", "--golden", tmp_path / "ref.npz", "--mapping", yaml,
                  "--out", tmp_path / "few", "--fail-on-error", "--threshold", "cos=0.5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "warning" in r.stdout and "only 3 of" in r.stdout
    meta = json.loads((tmp_path / "few" / "task.json").read_text())
    assert meta["coverage"]["npu_paired"] == 3 and meta["coverage"]["warnings"]
    r = accuscope("advise", tmp_path / "few", "--json")
    found = {f["rule"]: f for f in json.loads(r.stdout)["findings"]}
    assert found["coverage"]["severity"] == "warning" and "saw too little" in found["coverage"]["title"]


def test_bad_mapping_file_names_the_line(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("a,b\nc,d,e\n")
    with pytest.raises(SourceError, match=r"m.csv:2: expected `npu_name,golden_name`, got 3 fields"):
        read_mapping_file(str(bad))


def test_a_model_or_an_unknown_folder_is_no_side(cls_pair, tmp_path):
    root, ref, cand, x = cls_pair
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    r = accuscope("compare", "--npu", ref, "--golden", tmp_path / "notes", "--out", tmp_path / "t")
    assert r.returncode == 2 and "is a model" in r.stderr and "accuscope run" in r.stderr
    r = accuscope("compare", "--npu", tmp_path / "notes", "--golden", tmp_path / "notes", "--out", tmp_path / "t")
    assert r.returncode == 2 and "no .npy or .pt file and no Ascend dump file" in r.stderr and "Polygraphy" in r.stderr
    assert not (tmp_path / "t").exists()  # unusable input leaves no task folder behind


def test_swapped_sides_are_recognised(ws, tmp_path):
    """The demo's device dump given as the reference and its framework dump as the side under test."""
    from accuscope.engine.demo.workspace import MAIN
    meta = json.loads((ws / MAIN.name / "task.json").read_text())
    r = accuscope("compare", "--npu", meta["golden"], "--golden", meta["npu"], "--out", tmp_path / "t")
    assert "swapped" in r.stderr and f"--npu {meta['npu']}" in r.stderr


def test_a_task_moved_with_its_data_still_works(cls_pair, tmp_path):
    """task.json keeps each path absolute and relative to the task folder: a task moved to another
    directory (or machine) with its dumps opens, details, advises and exports from the new place."""
    import shutil
    root, ref, cand, x = cls_pair
    r = accuscope("run", ref, cand, "--input", f"x={x}", "--out", tmp_path / "a" / "task")
    assert r.returncode == 0, r.stdout + r.stderr
    meta = json.loads((tmp_path / "a" / "task" / "task.json").read_text())
    assert Path(meta["npu"]).is_absolute() and meta["relative"]["npu"].startswith("dumps/")
    shutil.move(tmp_path / "a", tmp_path / "b")
    task = tmp_path / "b" / "task"
    c = present(load_task(task).table).columns
    conv = next(op for op, io in zip(c["npu_op"], c["io"]) if op.startswith("Conv") and io == "output")
    r = accuscope("op", task, conv, "--out", tmp_path / "detail")
    assert r.returncode == 0, r.stdout + r.stderr
    r = accuscope("advise", task, "--json")
    assert r.returncode == 0, r.stderr
    assert not any("unusable" in n for n in json.loads(r.stdout)["notes"])


def test_tensors_inside_control_flow_are_carried_into_the_task(tmp_path):
    """`accuscope dump` expands the If its inputs decide and cannot fetch tensors inside a Loop body;
    the comparison says which."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    vi = lambda name, elem=T.FLOAT, shape=(2, 3): h.make_tensor_value_info(name, elem, shape)  # noqa: E731
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["t_out"], name="then_relu")], "then", [], [vi("t_out")])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e_mid"]), h.make_node("Abs", ["e_mid"], ["e_out"])],
                          "else", [], [vi("e_out")])
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body/Add")], "body",
                        [vi("i", T.INT64, ()), vi("cond_in", T.BOOL, ()), vi("acc_in")],
                        [vi("cond_out", T.BOOL, ()), vi("acc_out")])
    graph = h.make_graph([h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
                          h.make_node("Loop", ["n", "", "y"], ["acc"], name="loop", body=body),
                          h.make_node("Neg", ["acc"], ["z"], name="after")], "g", [vi("x"), vi("c", T.BOOL, ())],
                         [vi("z")], [nh.from_array(np.array(2, np.int64), "n")])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "if.onnx"))
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(tmp_path / "c.npy", np.array(True))
    r = accuscope("run", tmp_path / "if.onnx", tmp_path / "if.onnx", "--input", f"x={tmp_path / 'x.npy'}",
                  "--input", f"c={tmp_path / 'c.npy'}", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: 2 tensors inside If/Loop bodies could not be dumped" in r.stdout
    cov = json.loads((tmp_path / "t" / "task.json").read_text())["coverage"]
    assert set(cov["unreachable"]) == {"cond_out", "acc_out"} and not cov["warnings"]
    ops = set(present(load_task(tmp_path / "t").table).columns["npu_op"].tolist())
    assert "then_relu" in ops and "branch" not in ops  # the If's taken branch, expanded


def test_polygraphy_files_on_both_sides_and_one_file_with_two_runners(cls_pair, tmp_path):
    """`polygraphy run --onnxrt --onnx-outputs mark all --save-outputs` of the fp32 and the fp16
    model, written by Polygraphy itself: compared file against file, and as one file holding both
    runners (the second against the first)."""
    import os
    pytest.importorskip("polygraphy")
    from polygraphy.comparator import RunResults
    root, ref, cand, x = cls_pair
    exe = os.path.join(os.path.dirname(sys.executable), "polygraphy")
    for name, model in (("ref", ref), ("cand", cand)):
        subprocess.run([exe, "run", str(model), "--onnxrt", "--onnx-outputs", "mark", "all", "--load-inputs",
                        str(tmp_path / "in.json"), "--save-outputs", str(tmp_path / f"{name}.json")]
                       if name == "cand" else
                       [exe, "run", str(model), "--onnxrt", "--onnx-outputs", "mark", "all", "--input-shapes",
                        "x:[1,3,48,192]", "--save-inputs", str(tmp_path / "in.json"), "--save-outputs",
                        str(tmp_path / f"{name}.json")], check=True, capture_output=True, timeout=300)
    r = accuscope("compare", "--npu", tmp_path / "cand.json", "--golden", tmp_path / "ref.json", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    cov = json.loads((tmp_path / "t" / "task.json").read_text())["coverage"]
    assert cov["golden_used"] == cov["golden_total"] > 200 and cov["outputs_paired"] == 1
    c = present(load_task(tmp_path / "t").table).columns
    assert set(c["how"][c["how"] != ""]) == {"tensor"}

    both = RunResults()
    for name in ("ref", "cand"):
        (runner, iterations), = list(RunResults.load(str(tmp_path / f"{name}.json")).items())
        both.append((f"{name}-{runner}", iterations))
    both.save(str(tmp_path / "both.json"))
    r = accuscope("compare", tmp_path / "both.json", "--out", tmp_path / "t2")
    assert r.returncode == 0, r.stdout + r.stderr
    meta = json.loads((tmp_path / "t2" / "task.json").read_text())
    assert meta["npu_runner"].startswith("cand-") and meta["golden_runner"].startswith("ref-")
    same = present(load_task(tmp_path / "t").table).numbers("cos")
    assert np.allclose(present(load_task(tmp_path / "t2").table).numbers("cos"), same, equal_nan=True)


def test_npu_against_npu_pairs_through_the_framework_names_both_record(ws, tmp_path):
    """Two Ascend dumps of one model (the demo's, with its int4 conv, and one without: two toolkit
    versions), each with its offline model: device outputs pair through the framework ops their
    fusion attributes name, and only the quantized conv makes its error."""
    from dataclasses import replace as dc_replace

    from accuscope.engine.demo import workspace as demo
    from accuscope.engine.demo.workspace import MAIN, build_model, demo_image
    main = ws / MAIN.name
    (tmp_path / "clean" / "npu").mkdir(parents=True)
    (tmp_path / "clean" / "model").mkdir()
    spec = demo._npu_dump(dc_replace(MAIN, quantize=()), tmp_path / "clean", build_model(MAIN.network, MAIN.seed),
                          main / "model" / "tinynet.onnx", demo_image(), lambda _text: None)
    r = accuscope("compare", "--npu", main / "npu", "--golden", spec.npu, "--npu-model", main / "model" / "tinynet.json",
                  "--golden-model", spec.model, "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    cov = json.loads((tmp_path / "t" / "task.json").read_text())["coverage"]
    assert cov["golden_used"] >= cov["golden_total"] - 2 and not cov["warnings"]
    c = present(load_task(tmp_path / "t").table).columns
    assert set(c["how"][c["how"] != ""]) == {"fusion"}
    first = int(np.flatnonzero(c["fail"])[0])
    assert c["npu_op"][first].startswith("/block1/conv1/Conv") and c["io"][first] == "output"


def test_the_registry_spells_each_lazily_imported_format_as_its_module_does():
    """The formats whose modules the registry imports only on use name their kind in the registry;
    it is the module's KIND, and `describe` reaches tpu-mlir's reader."""
    from accuscope.engine.graphs import gegraph, mlirgraph
    from accuscope.engine.sides import registry
    from accuscope.engine.sources import tpumlir
    kinds = {f.kind for f in registry.FORMATS}
    assert {tpumlir.KIND, gegraph.KIND, mlirgraph.KIND} <= kinds
    assert present(registry.BY_KIND[tpumlir.KIND].reader)() is tpumlir
