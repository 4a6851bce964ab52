"""tpu-mlir's .mlir text (sources.mlirtext): what an op line's loc and result types are, and the two
readers of the file (graphs.mlirgraph, the model; tpumlir.load_mlir_locs, the npz's names) on lines
crafted to make a parser's cost grow faster than the line (issue 43): each ends, in a forked child
under a time and memory limit (support.bounded), and a count or shape the file cannot hold is refused
with the file and the line."""
from __future__ import annotations

from pathlib import Path

import pytest

from accuscope.engine.graphs.mlirgraph import load_mlir
from accuscope.engine.sources import tpumlir
from accuscope.engine.sources.mlirtext import LocTable, loc_use, tensor_type, tensor_types
from accuscope.engine.sources.tensor import SourceError
from support.bounded import ends
from support.cli import accuscope

HEAD = '  %0 = "top.Input"(%arg0) : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc0)\n'
OP = '  %1 = "top.Relu"(%0) {A} : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc1)\n'
LOCS = '#loc0 = loc("x")\n#loc1 = loc("y_Relu")\n'


def mlir(tmp_path: Path, body: str, locs: str = LOCS) -> Path:
    path = tmp_path / "m.mlir"
    path.write_text("module {\n" + HEAD + body + "}\n" + locs)
    return path


def graph_ops(path: Path) -> list[tuple[str, str, dict]]:
    return [(n.name, n.type, n.attrs) for n in load_mlir(path).nodes]


def loc_table(path: Path) -> dict[str, tuple[str, int]]:
    return {name: (op.type, op.output) for name, op in tpumlir.load_mlir_locs(str(path)).items()}


@pytest.mark.parametrize("line, loc", [
    ('%1 = "top.Relu"(%0) : (tensor<1xf32>) -> tensor<1xf32> loc(#loc12)', "#loc12"),
    ('%1 = "top.Relu"(%0) : (tensor<1xf32>) -> tensor<1xf32> loc(#loc)  \n', "#loc"),
    ('%2 = "tpu.Cast"(%1) : (none) -> none loc("c_Cast"("m.py":3:1))', '"c_Cast"("m.py":3:1)'),
    ('%3:2 = "top.TopK"(%2) : (none) -> (none, none) loc(fused["v_TopK", "i_TopK"])', 'fused["v_TopK", "i_TopK"]'),
    ('%3 = "top.X"(%2) {s = "loc(x"} : (none) -> none loc("a (b) \\" )")', '"a (b) \\" )"'),  # parens in strings
    ('%1 = "top.Relu"(%0) : (none) -> none loc(unknown)', None),
    ('%1 = "top.Relu"(%0) : (none) -> none', None),
    ('%1 = "top.Relu"(%0) : (none) -> none loc(fused["a"', None),
])
def test_the_loc_an_op_line_ends_in(line, loc):
    assert loc_use(line) == loc


def test_result_types_up_to_each_first_close():
    after = " (tensor<1x4xf32>, tensor<1x4x!quant.uniform<i8:f32, 0.05:0>>, none) loc(#loc2)"
    assert tensor_types(after) == ["1x4xf32", "1x4x!quant.uniform<i8:f32, 0.05:0"]
    assert [tensor_type(t) for t in tensor_types(after)] == [("float32", (1, 4)), ("int8", (1, 4))]
    assert tensor_types("tensor<1x2xf32> tensor<3x") == ["1x2xf32"]
    assert tensor_type("?x8xf16") == ("float16", None) and tensor_type("\u00b2x8xf32") == ("float32", None)
    assert tensor_type("0009x8xf32") == ("float32", (9, 8))


@pytest.mark.parametrize("text, message", [
    ("9" * 400 + "x8xf32", r"dimension 999999999999\.\.\.9999 \(400 digits\) is beyond int64"),
    ("9" * 5000 + "x8xf32", r"\(5000 digits\)"),
    (f"{1 << 63}x8xf32", f"dimension {1 << 63} is beyond int64"),
    ("x".join(["1"] * 65) + "xf32", r"a tensor of 65 dimensions \(at most 64\)"),
])
def test_a_shape_no_tensor_has_is_refused_saying_which(text, message):
    with pytest.raises(ValueError, match=message):
        tensor_type(text)


def test_fused_locs_referring_to_each_other_over_and_over_are_refused():
    table = LocTable("m.mlir")
    for line in ["#loc1 = loc(fused[" + ", ".join(["#loc2"] * 100) + "])",
                 "#loc2 = loc(fused[" + ", ".join(["#loc3"] * 100) + "])",
                 "#loc3 = loc(fused[" + ", ".join(["#loc4"] * 100) + "])",
                 '#loc4 = loc("z")', '#loc5 = loc(fused[#loc4, "b"("f":1:2), #loc4])']:
        assert table.read(line)
    assert not table.read('%1 = "top.Relu"(%0) : (none) -> none loc(#loc5)')
    assert table.names("#loc5") == ["z", "b", "z"] and table.names("#loc9") is None
    with pytest.raises(SourceError, match=r"m\.mlir: its loc table names more tensors than the file has characters"):
        ends(table.names, "#loc1")  # 100**3 names in 2 KB: before, they were all built


# --- the readers on crafted lines (each took minutes or more before) --------------------------------

@pytest.mark.parametrize("body, locs", [
    pytest.param(OP.replace("A", "w" * 200_000), LOCS, id="one 200 KB word in {...}"),
    pytest.param(OP.replace("loc(#loc1)", "loc(fused[" * 300_000 + "x)"), LOCS, id="3 MB of loc(fused["),
    pytest.param(OP.replace("loc(#loc1)", 'loc("a"(' * 125_000 + ")"), LOCS, id='1 MB of loc("a"('),
    pytest.param(OP.replace("-> tensor<1x8xf32>", "-> " + "tensor<" * 140_000), LOCS, id="1 MB of tensor<"),
    pytest.param(OP, LOCS + '#loc1 = loc("' + '\\"' * 500_000 + ")\n", id="a 1 MB loc name of backslash-quotes"),
    pytest.param(OP, LOCS.replace('"y_Relu"', 'fused["' + '\\"' * 500_000 + "]"), id="1 MB fused[...] of backslash-quotes"),
    pytest.param(OP.replace("loc(#loc1)", "loc(fused[" + '"a"(' * 250_000 + "])"), LOCS, id='1 MB fused[...] of "a"('),
])
def test_crafted_lines_are_read_in_time_proportional_to_them(tmp_path, body, locs):
    path = mlir(tmp_path, body, locs)
    assert [name for name, _, _ in ends(graph_ops, path)][0] == "x"
    assert ends(loc_table, path)["x"] == ("top.Input", 0)


def test_attributes_and_locs_read_as_before(tmp_path):
    path = mlir(tmp_path, OP.replace("{A}", '{axis = -1 : si64, do_relu = true, eps = 1.5e-05 : f64, name = "a b", '
                                            'w = [1, 2]}').replace("loc(#loc1)", 'loc(fused["y_Relu", "z"])'))
    assert graph_ops(path)[1] == ("y_Relu", "top.Relu", {"axis": "-1 : si64", "do_relu": "true", "eps": "1.5e-05 : f64",
                                                          "name": "a b"})
    assert loc_table(path) == {"x": ("top.Input", 0), "y_Relu": ("top.Relu", 0), "z": ("top.Relu", 1)}


# --- counts and sizes the file cannot hold ----------------------------------------------------------

@pytest.mark.parametrize("group, message", [
    ("999999999", r"line 3: a group of 999999999 results, but its result types after `->` name at most 2"),
    ("0", r"line 3: a group of 0 results"),
    ("9" * 5000, r"line 3: a group of 999999999999\.\.\. \(5000 digits\) results"),
])
def test_a_result_group_larger_than_its_types_is_refused(tmp_path, group, message):
    path = mlir(tmp_path, f'  %1:{group} = "top.Split"(%0) : (tensor<1x8xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>) '
                          "loc(#loc1)\n")
    with pytest.raises(SourceError, match=f"^{path}: {message}"):
        ends(load_mlir, path)  # 999999999: a list of that many names (2.8 GB in 14 s) before


def test_a_result_group_of_an_op_with_regions_is_bounded_by_the_file(tmp_path):
    region = '  %1:2 = "tpu.Group"(%0) ({\n  }) : (tensor<1x8xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>) loc(#loc1)\n'
    assert [n.outputs for n in load_mlir(mlir(tmp_path, region)).nodes][1] == ["1#0", "1#1"]  # no loc on its line
    with pytest.raises(SourceError, match=r"a group of 99999999 results, but the file has \d+ characters"):
        load_mlir(mlir(tmp_path, region.replace("%1:2", "%1:99999999")))


def test_a_dimension_beyond_int64_is_refused_naming_the_file_and_line(tmp_path):
    path = mlir(tmp_path, OP.replace("-> tensor<1x8xf32>", "-> tensor<" + "9" * 400 + "x8xf32>"))
    for read in (load_mlir, lambda p: tpumlir.load_mlir_locs(str(p))):
        with pytest.raises(SourceError, match=rf"^{path}: line 3: dimension 999999999999\.\.\.9999 \(400 digits\)"):
            read(path)
    r = accuscope("inspect", path, timeout=120)
    assert r.returncode == 2 and "(400 digits) is beyond int64" in r.stderr and "9" * 40 not in r.stdout + r.stderr
