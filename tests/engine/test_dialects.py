"""Platform dialects: tpu-mlir npz, MindSpore kernel dumps, GE graph dumps, ATB tensor files.

Each dialect's files are written here from the published layout facts (the tools themselves do
not install here: tpu_mlir's wheels need Python 3.10; msprobe writes ATB dumps from its C++ probe
inside an ATB process and reads them with torch), filled with REAL activations: the PP-OCR
classifier run by onnxruntime. `read()` must give those values back exactly, in execution order.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accuscope.engine.graphs import gegraph
from accuscope.engine.sides.registry import load_graph
from accuscope.engine.sources import atb, mindspore, tpumlir
from accuscope.engine.sources.ascend import bf16_to_float32
from accuscope.engine.sources.layout import to_storage
from accuscope.engine.sources.tensor import SourceError
from support.bounded import ends
from support.dialects import ms_name, save_npz, write_atb, write_ms_step
from support.narrow import present


def to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits as uint16 (truncating), as tpu-mlir and Ascend keep them."""
    return (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


# --- tpu-mlir ----------------------------------------------------------------------------------------

def write_mlir(path: Path, run, dtype: str = "f32", drop_loc: str | None = None) -> Path:
    """A top/tpu .mlir with one op per tensor, results typed `dtype`, locs named `{out}_{OpType}`."""
    lines = ['#loc = loc(unknown)', 'module attributes {module.name = "cls"} {',
             '  func.func @main(%arg0: tensor<1x3x48x192xf32> loc(unknown)) -> tensor<1x2xf32> {']
    locs = []
    for k, (_, op_type, out, a) in enumerate(run, 1):
        dims = "x".join(map(str, a.shape))
        lines.append(f'    %{k} = "tpu.{op_type}"(%{k - 1}) {{}} : (none) -> tensor<{dims}x{dtype}> loc(#loc{k})')
        name = f"{out}_{op_type}"
        if name != drop_loc:
            locs.append(f'#loc{k} = loc("{name}")')
    lines += ["  } loc(#loc)", "} loc(#loc)"] + locs
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tpumlir_top_outputs_give_back_onnxruntime_values_in_order(tmp_path, cls_run):
    top = save_npz(tmp_path / "cls_top_outputs.npz", {f"{out}_{t}": a for _, t, out, a in cls_run})
    assert tpumlir.sniff(str(top))
    tensors, problems = tpumlir.read(str(top))
    assert problems == []
    assert [t.tensor_name for t in tensors] == [out for _, _, out, _ in cls_run]
    assert [t.op_type for t in tensors] == [t for _, t, _, _ in cls_run]
    for t, (_, _, _, a) in zip(tensors, cls_run):
        assert t.source == str(top) and t.shape == a.shape
        np.testing.assert_array_equal(t.load(), a)


def test_tpumlir_names_normalise_to_the_onnx_output():
    assert tpumlir.normalize("conv2d_0.tmp_0_Conv_f16") == "conv2d_0.tmp_0"
    assert tpumlir.normalize("relu_1.tmp_0_Relu") == "relu_1.tmp_0"
    assert tpumlir.normalize("output_si8") == "output"
    assert tpumlir.normalize("x_Conv", known={"x_Conv"}) == "x_Conv"
    assert tpumlir.normalize("logits") == "logits"
    assert tpumlir.split_op_type("a_b_MatMul") == ("a_b", "MatMul")


def test_tpumlir_bf16_uint16_is_marked_and_widened_by_the_mlir_type_or_the_cast_suffix(tmp_path, cls_run):
    run = cls_run[:12]
    raw = {f"{out}_{t}": to_bf16(a) for _, t, out, a in run}
    tpu = save_npz(tmp_path / "cls_bm1684x_bf16_tpu_outputs.npz", raw)
    plain, _ = tpumlir.read(str(tpu))  # no hint: uint16 stays uint16
    assert plain[0].dtype == np.uint16 and plain[0].dtype_name == "uint16"
    mlir = write_mlir(tmp_path / "cls_bm1684x_bf16_tpu.mlir", run, "bf16")
    tensors, problems = tpumlir.read(str(tpu), mlir=str(mlir))
    assert problems == []
    assert [t.op_type for t in tensors] == [f"tpu.{t}" for _, t, _, _ in run]
    for t, (_, _, _, a) in zip(tensors, run):
        assert t.dtype_name == "bfloat16" and t.dtype == np.float32
        np.testing.assert_array_equal(t.load(), bf16_to_float32(to_bf16(a)))
        assert np.abs(t.load() - a).max() <= np.abs(a).max() * 2 ** -7
    suffixed = save_npz(tmp_path / "cls_model_outputs.npz", {f"{run[0][2]}_bf16": to_bf16(run[0][3])})
    (t,), _ = tpumlir.read(str(suffixed))
    assert t.dtype_name == "bfloat16" and t.tensor_name == run[0][2]
    np.testing.assert_array_equal(t.load(), bf16_to_float32(to_bf16(run[0][3])))


def test_tpumlir_loc_table_and_a_missing_loc_entry(tmp_path, cls_run):
    run = cls_run[:6]
    missing = f"{run[2][2]}_{run[2][1]}"
    mlir = write_mlir(tmp_path / "cls.mlir", run, drop_loc=missing)
    locs = tpumlir.load_mlir_locs(str(mlir))
    first = f"{run[0][2]}_{run[0][1]}"
    assert locs[first].type == f"tpu.{run[0][1]}" and locs[first].shape == run[0][3].shape
    assert locs[first].dtype == "float32" and locs[first].order == 0
    assert "#loc3" in locs and "line" in locs["#loc3"].problem and "no '#loc3 = loc(...)' entry" in locs["#loc3"].problem
    npz = save_npz(tmp_path / "cls_top_outputs.npz", {f"{out}_{t}": a for _, t, out, a in run})
    tensors, problems = tpumlir.read(str(npz), mlir=str(mlir))
    messages = [str(p) for p in problems]
    assert any("#loc3" in m for m in messages)
    assert any(m.startswith(str(npz)) and missing in m and "loc table" in m for m in messages)
    assert len(tensors) == len(run)


def test_tpumlir_loc_table_fused_and_inline_locs(tmp_path):
    mlir = tmp_path / "split.mlir"
    mlir.write_text(
        '#loc = loc(unknown)\n'
        'module {\n'
        '  %0 = "top.Input"(%arg0) : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc1)\n'
        '  %1:2 = "top.Split"(%0) {axis = 1 : si32} : (tensor<1x8xf32>) -> (tensor<1x4xf32>, tensor<1x4xbf16>) loc(#loc4)\n'
        '  %2 = "tpu.Cast"(%1#1) : (tensor<1x4xbf16>) -> tensor<1x4x!quant.uniform<i8:f32, 0.05:0>> loc("c_Cast"("m.py":3:1))\n'
        '  %3:2 = "top.TopK"(%2) : (tensor<1x4xf32>) -> (tensor<1x2xf32>, tensor<1x2xi64>) loc(fused["v_TopK", "i_TopK"])\n'
        '} loc(#loc)\n'
        '#loc1 = loc("x")\n#loc2 = loc("a_Split")\n#loc3 = loc("b_Split")\n#loc4 = loc(fused[#loc2, #loc3])\n')
    locs = tpumlir.load_mlir_locs(str(mlir))
    assert list(locs) == ["x", "a_Split", "b_Split", "c_Cast", "v_TopK", "i_TopK"]
    assert (locs["b_Split"].output, locs["b_Split"].dtype, locs["b_Split"].shape) == (1, "bfloat16", (1, 4))
    assert (locs["c_Cast"].type, locs["c_Cast"].dtype, locs["c_Cast"].shape) == ("tpu.Cast", "int8", (1, 4))
    assert (locs["i_TopK"].dtype, locs["i_TopK"].order) == ("int64", 3)


def test_tpumlir_flattened_onnx_dump_takes_its_shapes_from_the_mlir(tmp_path, cls_run):
    run = cls_run[:8]
    flat = save_npz(tmp_path / "cls_ref_outputs.npz", {f"{out}_{t}": a.ravel() for _, t, out, a in run})
    tensors, problems = tpumlir.read(str(flat), mlir=str(write_mlir(tmp_path / "cls.mlir", run)))
    assert problems == []
    for t, (_, _, _, a) in zip(tensors, run):
        assert t.shape == a.shape
        np.testing.assert_array_equal(t.load(), a)


def test_tpumlir_deploy_folder_offers_tpu_and_bmodel_against_top(tmp_path, cls_run):
    arrays = {f"{out}_{t}": a for _, t, out, a in cls_run[:3]}
    for name in ("cls_top_outputs.npz", "cls_bm1684x_f16_tpu_outputs.npz", "cls_bm1684x_f16_model_outputs.npz",
                 "cls_in_f32.npz", "other_top_outputs.npz"):
        save_npz(tmp_path / name, arrays)
    pairs = tpumlir.find_deploy_files(str(tmp_path))
    assert [(os.path.basename(p.reference), os.path.basename(p.target), p.label) for p in pairs] == [
        ("cls_top_outputs.npz", "cls_bm1684x_f16_tpu_outputs.npz", "tpu"),
        ("cls_top_outputs.npz", "cls_bm1684x_f16_model_outputs.npz", "model")]
    assert all(os.path.basename(p.input) == "cls_in_f32.npz" for p in pairs)
    tpu = str(tmp_path / "cls_bm1684x_f16_tpu_outputs.npz")
    assert tpumlir.describe(tpu, tpumlir.read(tpu)[0]) == [
        "model_deploy pair: cls_bm1684x_f16_tpu_outputs.npz (tpu) against cls_top_outputs.npz"]
    assert tpumlir.sniff(str(tmp_path / "cls_in_f32.npz"))


def test_tpumlir_actual_desired_npz(tmp_path, cls_run):
    run = cls_run[:5]
    both = {}
    for _, t, out, a in run:
        both[f"{out}_{t}_actual"] = a.astype(np.float16).astype(np.float32)
        both[f"{out}_{t}_desired"] = a
    both[f"{run[0][2]}_extra_actual"] = run[0][3]
    path = save_npz(tmp_path / "tdb_err.npz", both)
    assert tpumlir.sniff(str(path))
    actual, desired, problems = tpumlir.read_actual_desired(str(path))
    assert [t.op for t in desired] == [f"{out}_{t}" for _, t, out, _ in run]
    assert [t.tensor_name for t in desired] == [out for _, _, out, _ in run]
    assert len(actual) == len(run) + 1
    assert [str(p) for p in problems] == [f"{path}: {run[0][2]}_extra: has {run[0][2]}_extra_actual but no "
                                          f"{run[0][2]}_extra_desired"]
    for t, (_, _, _, a) in zip(desired, run):
        np.testing.assert_array_equal(t.load(), a)
    got, _ = tpumlir.read(str(path), side="desired")
    assert [t.op for t in got] == [t.op for t in desired]
    only = save_npz(tmp_path / "failed_bmodel_outputs.npz", {"x_actual": run[0][3]})
    with pytest.raises(SourceError, match=r"failed_bmodel_outputs\.npz: holds only _actual arrays \(1\), no _desired"):
        tpumlir.read_actual_desired(str(only))


def test_tpumlir_sniff_refuses_other_files(tmp_path):
    plain = save_npz(tmp_path / "golden.npz", {"a": np.zeros(3)})
    assert not tpumlir.sniff(str(plain))
    assert not tpumlir.sniff(str(tmp_path / "missing_top_outputs.npz"))
    (tmp_path / "junk_top_outputs.npz").write_bytes(b"not a zip")
    with pytest.raises(SourceError, match="junk_top_outputs.npz: not a readable npz"):
        tpumlir.read(str(tmp_path / "junk_top_outputs.npz"))


# --- MindSpore kernel dumps ---------------------------------------------------------------------------


def test_mindspore_step_gives_back_values_through_layouts_in_order(tmp_path, cls_run):
    run = cls_run[:40]
    expected = write_ms_step(tmp_path / "dump" / "rank_0" / "Net" / "step_0", run)
    write_ms_step(tmp_path / "dump" / "rank_1" / "Net" / "step_0", run[:3], base_ts=1800000000000000)
    assert mindspore.sniff(str(tmp_path / "dump"))
    tensors, problems = mindspore.read(str(tmp_path / "dump"))
    assert problems == []
    assert [t.op for t in tensors] == [op for op, _ in expected]
    assert [t.op_type for t in tensors] == [t for _, t, _, _ in run]
    converted = [t for t in tensors if t.format == "NC1HWC0"]
    assert converted and all(t.conversion.startswith("NC1HWC0->NCHW") for t in converted)
    for t, (_, a) in zip(tensors, expected):
        assert t.shape == a.shape and t.io == "output" and t.index == 0
        np.testing.assert_array_equal(t.load(), a)
    assert mindspore.describe(str(tmp_path / "dump"), tensors) == [
        "rank 0 step 0 (2 rank(s), 2 step folder(s); choose with rank=/step=)"]
    other, _ = mindspore.read(str(tmp_path / "dump"), rank=1)
    assert len(other) == 3
    with pytest.raises(SourceError, match=r"no dump for rank 0 step 5; found: rank 0 step 0, rank 1 step 0"):
        mindspore.read(str(tmp_path / "dump"), rank=0, step=5)


def test_mindspore_bf16_raw_int4_and_long_names(tmp_path, cls_run):
    folder = tmp_path / "rank_0" / "graph" / "step_3"
    folder.mkdir(parents=True)
    a = cls_run[0][3]
    np.save(folder / ms_name("Conv2D", "conv", 1, 1700000000000001, "output", 0, "DefaultFormat", "bfloat16"), to_bf16(a))
    np.save(folder / ms_name("MatMul", "mm", 2, 1700000000000002, "input", 1, "ND", "int4"),
            np.zeros((4, 2), np.int8))
    long_op = "Default--" + "very-long-scope-" * 20 + "Relu-op9"
    np.save(folder / "1.npy", a)
    (folder / "mapping.csv").write_text(f"1.npy,{ms_name('ReLU', long_op, 3, 1700000000000003, 'output', 0, 'DefaultFormat', 'float32')}\n")
    np.save(folder / ms_name("Add", "broken", 4, 1700000000000004, "output", 0, "ND", "float32"), a)
    with open(folder / ms_name("Add", "broken", 4, 1700000000000004, "output", 0, "ND", "float32"), "r+b") as fh:
        fh.truncate(300)
    tensors, problems = mindspore.read(str(tmp_path))
    bf, i4, long, broken = tensors
    assert bf.dtype_name == "bfloat16" and bf.dtype == np.float32
    np.testing.assert_array_equal(bf.load(), bf16_to_float32(to_bf16(a)))
    assert i4.io == "input" and i4.index == 1 and "int4 data are stored packed" in i4.problem
    assert long.op == long_op and long.op_type == "ReLU"
    np.testing.assert_array_equal(long.load(), a)
    assert "not a readable npy file" in broken.problem and "truncated" in broken.problem
    assert [p.path for p in problems] == [i4.source, broken.source]


def test_mindspore_sniff_and_bad_paths(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"")
    assert not mindspore.sniff(str(tmp_path / "x.npy"))
    assert not mindspore.sniff(str(tmp_path))
    with pytest.raises(SourceError, match="no MindSpore kernel dump files"):
        mindspore.read(str(tmp_path))


# --- ATB tensor dumps ----------------------------------------------------------------------------------


def test_atb_round_gives_back_values_in_execution_order(tmp_path, cls_run):
    run = cls_run[:10]
    rnd = tmp_path / "0_4242" / "0"
    expected = []
    layer = rnd / "0_ClsModel"
    write_atb(layer / "before" / "intensor0.bin", run[0][3])
    write_atb(layer / "after" / "intensor0.bin", run[0][3])
    expected.append(("0_ClsModel", "input", run[0][3]))
    for k, (_, op_type, _, a) in enumerate(run[1:], 1):  # 10 > 9: order must be numeric
        op = layer / f"{k}_{op_type}Operation"
        write_atb(op / "before" / "outtensor0.bin", np.zeros_like(a))
        write_atb(op / "after" / "outtensor0.bin", a)
        expected.append((f"0_ClsModel/{k}_{op_type}Operation", "output", a))
    write_atb(layer / "after" / "outtensor0.bin", run[-1][3])
    expected.append(("0_ClsModel", "output", run[-1][3]))
    write_atb(tmp_path / "0_4242" / "1" / "0_ClsModel" / "after" / "outtensor0.bin", run[0][3])
    assert atb.sniff(str(tmp_path)) and atb.sniff(str(layer / "after" / "outtensor0.bin"))
    assert atb.rounds(str(tmp_path)) == [os.path.join("0_4242", "0"), os.path.join("0_4242", "1")]
    tensors, problems = atb.read(str(tmp_path))
    assert problems == []
    assert [(t.op, t.io) for t in tensors] == [(op, io) for op, io, _ in expected]
    assert tensors[1].op_type == f"{run[1][1]}Operation"
    for t, (_, _, a) in zip(tensors, expected):
        assert t.dtype_name == "float32" and t.shape == a.shape
        np.testing.assert_array_equal(t.load(), a)
    assert atb.describe(str(tmp_path), tensors) == [
        f"round {os.path.join('0_4242', '0')} of 2 (choose with --option round=NAME) · tensors as each op ended (after/)",
        "ops 10 under 1 top-level layer(s)"]
    before, _ = atb.read(str(tmp_path), when="before")
    assert not before[1].load().any()
    second, _ = atb.read(str(tmp_path), round=os.path.join("0_4242", "1"))
    assert len(second) == 1


def test_atb_bf16_fp16_nz_and_bad_headers(tmp_path, cls_run):
    a = cls_run[5][3]
    folder = tmp_path / "0_1" / "0" / "0_Layer" / "after"
    write_atb(folder / "outtensor0.bin", to_bf16(a), code=27)
    write_atb(folder / "outtensor1.bin", a.astype(np.float16))
    m = a.reshape(-1, a.shape[-1])[:20].astype(np.float16)
    write_atb(folder / "outtensor2.bin", to_storage(m, "FRACTAL_NZ"), code=1, fmt=29)
    no_end = write_atb(folder / "outtensor3.bin", a, end=False)
    short = write_atb(folder / "outtensor4.bin", a, dims=(a.size + 1,))
    odd = write_atb(folder / "outtensor5.bin", a, code=99)
    (folder / "outtensor6.bin").write_bytes(b"$Version=1.0\ndtype=0\n$End=1\n" + a.tobytes())
    tensors, problems = atb.read(str(tmp_path))
    t_bf, t_half, t_nz, t_end, t_short, t_odd, t_nodims = tensors
    assert t_bf.dtype_name == "bfloat16"
    np.testing.assert_array_equal(t_bf.load(), bf16_to_float32(to_bf16(a)))
    np.testing.assert_array_equal(t_half.load(), a.astype(np.float16))
    assert t_nz.format == "FRACTAL_NZ" and t_nz.conversion.startswith("FRACTAL_NZ->ND")
    np.testing.assert_array_equal(t_nz.load()[:20, : m.shape[1]], m)
    assert t_end.problem == f"not an ATB tensor file: no $End=1 line in the first {atb.HEADER_LIMIT} bytes"
    assert "need" in t_short.problem and "data bytes, the file has" in t_short.problem
    assert t_odd.problem == "unsupported dtype code 99"
    assert t_nodims.problem == "header has no dims= line"
    assert [p.path for p in problems] == [str(no_end), str(short), str(odd), t_nodims.source]
    (tmp_path / "plain.bin").write_bytes(b"\x00" * 64)
    assert not atb.sniff(str(tmp_path / "plain.bin"))
    with pytest.raises(SourceError, match=r"plain\.bin: not an ATB tensor file: no header"):
        atb.read(str(tmp_path / "plain.bin"))


# --- GE graph dumps ------------------------------------------------------------------------------------

GE_DTYPES = {"float32": "DT_FLOAT", "float16": "DT_FLOAT16", "int64": "DT_INT64", "int32": "DT_INT32",
             "bool": "DT_BOOL"}


def ge_text(run, name="ge_default_1", fuse_first=True) -> str:
    """A GE ModelDef in protobuf text format for the classifier's first ops: a Data op, then a chain;
    the first two ops fused into one device op carrying `_datadump_original_op_names` and the
    output origin attributes."""
    lines = [f'name: "{name}"', "graph {", f'  name: "{name}"']

    def desc(kind, a, attrs=()):
        out = [f"    {kind} {{", f"      dtype: {GE_DTYPES[a.dtype.name]}", "      shape {"]
        out += [f"        dim: {d}" for d in a.shape] + ["      }", '      layout: "NCHW"']
        for key, value in attrs:
            out += ["      attr {", f'        key: "{key}"', f"        value {{ {value} }}", "      }"]
        return out + ["    }"]

    x = run[0][3]
    lines += ["  op {", '    name: "x"', '    type: "Data"', "    id: 1"] + desc("output_desc", x) + ["  }"]
    prev, ops = "x:0", run[:8]
    start = 2 if fuse_first else 0
    if fuse_first:
        (n0, _, _, _), (n1, t1, _, a1) = ops[0], ops[1]
        lines += ["  op {", f'    name: "{n1}"', f'    type: "{t1}"', f'    input: "{prev}"', '    input: "x:-1"', "    id: 2",
                  "    attr {", '      key: "_datadump_original_op_names"',
                  f'      value {{ list {{ s: "{n0}" s: "{n1}" }} }}', "    }"]
        lines += desc("input_desc", x)
        lines += desc("output_desc", a1, [("_datadump_origin_name", f's: "{n1}"'),
                                          ("_datadump_origin_output_index", "i: 0")]) + ["  }"]
        prev = f"{n1}:0"
    for k, (node, op_type, _, a) in enumerate(ops[start:], 3):
        lines += ["  op {", f'    name: "{node}"', f'    type: "{op_type}"', f'    input: "{prev}"', f"    id: {k}"]
        lines += desc("output_desc", a) + ["  }"]
        prev = f"{node}:0"
    lines += ["  op {", '    name: "out"', '    type: "NetOutput"', f'    input: "{prev}"', "  }", "}"]
    return "\n".join(lines) + "\n"


def test_ge_graph_dump_loads_as_the_device_graph_with_fusion_facts(tmp_path, cls_run):
    path = tmp_path / "ge_proto_00000003_Build.txt"
    path.write_text(ge_text(cls_run))
    assert gegraph.sniff(str(path))
    g = load_graph(path)
    assert g.kind == "om" and g.name == "ge_default_1"
    names = [n.name for n in g.nodes]
    assert names == ["x"] + [node for node, _, _, _ in cls_run[1:8]] + ["out"]
    fused = g.node(cls_run[1][0])
    assert fused is not None
    assert fused.fused == [cls_run[0][0], cls_run[1][0]]
    assert fused.origins == [(cls_run[1][0], 0)]
    assert fused.inputs == ["x:0"]  # the control edge x:-1 is no data input
    assert fused.output_shapes == [cls_run[1][3].shape] and fused.output_dtypes == ["float32"]
    assert g.inputs == ["x:0"] and g.outputs == [f"{cls_run[7][0]}:0"]
    assert present(g.producer(f"{cls_run[3][0]}:0"))[0].type == cls_run[3][1]


def test_ge_graph_parser_bounds_and_messages(tmp_path):
    deep = tmp_path / "ge_proto_1_deep.txt"
    deep.write_text("graph " + "{ op " * 5000 + "}" * 5000)
    with pytest.raises(SourceError, match=r"ge_proto_1_deep\.txt: line 1: messages nested deeper than 64"):
        load_graph(deep)
    bad = tmp_path / "ge_proto_2_bad.txt"
    bad.write_text('graph {\n  op {\n    name: "a"\n    type: @\n')
    with pytest.raises(SourceError, match=r"ge_proto_2_bad\.txt: line 4: unexpected character '@'"):
        load_graph(bad)
    cut = tmp_path / "ge_proto_3_cut.txt"
    cut.write_text('graph {\n  op {\n    name: "a"\n')
    with pytest.raises(SourceError, match=r"end of file inside a message \(missing '\}'\)"):
        load_graph(cut)
    empty = tmp_path / "ge_proto_4_empty.txt"
    empty.write_text('name: "m"\n')
    with pytest.raises(SourceError, match=r"no graph \{ \.\.\. \} in this file"):
        load_graph(empty)
    assert gegraph.parse_text_format('s: "a" \'b\' "\\303\\251\\n" x: -inf y: 2.5f z: true')["s"] == ["ab\u00e9\n"]


def test_ge_graph_text_crafted_to_hang_a_tokenizer_is_read_once(tmp_path):
    """Trailing blanks, a 1 MB line of `\\"` and blank lines were tried from each of their characters
    (minutes each, issue 43); now each ends at once, the parse saying where it failed."""
    blanks = tmp_path / "ge_proto_1_blanks.txt"
    blanks.write_text('graph {\n  op { name: "a" }\n}' + " " * 1_000_000)
    assert ends(gegraph.parse_text_format, blanks.read_text(), "f.txt")["graph"][0]["op"][0]["name"] == ["a"]
    quotes = 'graph {\n  op { name: "' + '\\"' * 500_000 + "\n}\n"
    with pytest.raises(SourceError, match=r"^f\.txt: line 2: a string not closed on its line"):
        ends(gegraph.parse_text_format, quotes, "f.txt")
    text = tmp_path / "graph.txt"
    text.write_text("\n" * 65536 + 'graph {\n  op {\n    name: "a"\n  }\n}\n')
    assert ends(gegraph.sniff, str(text)) is False  # its first 64 KB hold no `graph {` line
    text.write_text("\n" * 1_000_000 + 'graph {\n op {\n \t name: "a\\"b"\n  }\n}\n')
    assert ends(gegraph.op_names, str(text)) == {'a\\"b'}


def test_ge_pick_build_graph_by_dump_coverage(tmp_path, cls_run):
    (tmp_path / "ge_proto_00000001_PreRunBegin.txt").write_text(ge_text(cls_run))
    (tmp_path / "ge_proto_00000002_Build.txt").write_text(ge_text(cls_run[40:], "small"))
    (tmp_path / "ge_proto_00000005_Build.txt").write_text(ge_text(cls_run))
    dumped = [node.replace("/", "_") for node, _, _, _ in cls_run[1:8]]
    path, why = gegraph.pick_build_graph(str(tmp_path), dumped)
    assert os.path.basename(path) == "ge_proto_00000005_Build.txt"
    assert why.startswith("ge_proto_00000005_Build.txt covers 7 of 7 dumped ops")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match=r"empty: no ge_proto_\*_Build\.txt graph dumps"):
        gegraph.pick_build_graph(str(tmp_path / "empty"), dumped)


# --- bad input never raises anything but the documented errors --------------------------------------

_FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_PIECES = st.lists(st.sampled_from(['graph', 'op', '{', '}', '<', '>', ':', '"a\\\\"', "'b'", '[', ']', ',', '1',
                                    '-2.5f', 'DT_FLOAT', '\n', ' ', '#c\n', '\\', '@', 'name', 'true']), max_size=60)


@_FUZZ
@given(pieces=_PIECES)
def test_fuzz_text_format_returns_or_says_where(pieces):
    try:
        gegraph.parse_text_format("".join(pieces), "f.txt")
    except SourceError as exc:
        assert str(exc).startswith("f.txt: ") and "not protobuf text format" in str(exc)


@_FUZZ
@given(head=st.binary(max_size=200), tail=st.binary(max_size=64))
def test_fuzz_atb_file_gives_a_tensor_or_its_problem(tmp_path, head, tail):
    path = tmp_path / "outtensor0.bin"
    path.write_bytes(b"$Version=1.0\n" + head + tail)
    t = atb.read_file(str(path))
    if not t.problem:
        assert t.load().size == int(np.prod(t.shape))


@_FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_mlir_loc_table_returns_or_says_why(tmp_path, text):
    path = tmp_path / "m.mlir"
    path.write_text(text, encoding="utf-8", errors="replace")
    try:
        tpumlir.load_mlir_locs(str(path))
    except SourceError as exc:
        assert str(exc).startswith(str(path))


def test_tpumlir_tensor_names_pair_with_an_onnxruntime_reference_side(tmp_path, cls_model, cls_run):
    """Read as the registry reads a dialect (its tensors in a GoldenDump, seen as a Side), the
    tpu-mlir keys pair by tensor name with `accuscope dump`'s onnxruntime run of the same model."""
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.sides.registry import capabilities, open_side
    from accuscope.engine.sides.side import Side
    from accuscope.engine.sources.golden import GoldenDump

    x = np.random.default_rng(7).standard_normal((1, 3, 48, 192)).astype(np.float32)
    dump_onnx(cls_model, tmp_path / "ref", {"x": x})
    reference = open_side(tmp_path / "ref")
    top = save_npz(tmp_path / "cls_top_outputs.npz", {f"{out}_{t}_f32": a for _, t, out, a in cls_run})
    side = Side(GoldenDump(str(top), tpumlir.KIND, *tpumlir.read(str(top))), tpumlir.KIND, capabilities(tpumlir.KIND))
    assert [t.tensor_name for t in side.tensors] == [out for _, _, out, _ in cls_run]
    for t in side.tensors:
        ref = reference.find_tensor(t.tensor_name)
        assert ref is not None, t.tensor_name
        np.testing.assert_array_equal(t.load(), ref.load())
