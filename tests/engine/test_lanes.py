"""Git-log style lanes of a graph in execution order (engine.lanes): the drawn strings of small
hand-made graphs, lane counts, very wide lane sets cut with a `…N` marker, and big graphs."""
from __future__ import annotations

import time

import numpy as np
import pytest

from accuscope.engine.demo import workspace as demo
from accuscope.engine.demo.npusim import simulate
from accuscope.engine.graphs.graph import Graph, Node
from accuscope.engine.graphs.lanes import LIMIT, NODE, layout
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sides.registry import load_graph, open_golden


def graph(*ops: tuple[str, list[str], list[str]]) -> Graph:
    """ops as (name, inputs, outputs); the type is the name's first letter."""
    nodes = [Node(name=name, type=name[:1].upper(), index=i, seq_id=i + 1, inputs=list(ins), outputs=list(outs))
             for i, (name, ins, outs) in enumerate(ops)]
    return Graph("g", "onnx", "", nodes, ["x"], [])


def drawn(g: Graph, cap: int = LIMIT) -> list[str]:
    lanes = layout(g)
    return [lanes.draw(i, cap) for i in range(len(lanes))]


def test_a_chain_is_one_straight_lane():
    g = graph(("a", ["x"], ["a"]), ("b", ["a", "w"], ["b"]), ("c", ["b"], ["c"]))
    lanes = layout(g)
    assert drawn(g) == ["●", "●", "●"]
    assert lanes.width == 1 and lanes.open_after == [1, 1, 0] and lanes.edges == 2
    assert lanes.columns == [0, 0, 0]


def test_residual_branch_and_merge():
    g = graph(("stem", ["x"], ["s"]), ("conv1", ["s"], ["c1"]), ("conv2", ["c1"], ["c2"]),
              ("add", ["c2", "s"], ["a"]), ("relu", ["a"], ["r"]))
    lanes = layout(g)
    assert drawn(g) == [
        "●",
        "├─●",  # s is read here and again below: it branches off
        "│ ●",
        "●─┘",  # the Add is the last reader of both: the lanes merge, the Add sits in the leftmost
        "●",
    ]
    assert lanes.width == 2 and lanes.open_after == [1, 2, 2, 1, 0] and lanes.edges == 5


def test_multiple_outputs_open_lanes_to_the_right():
    g = graph(("split", ["x"], ["o0", "o1", "o2", "unused"]), ("a", ["o0"], ["a"]), ("b", ["o1"], ["b"]),
              ("concat", ["a", "b", "o2"], ["y"]))
    lanes = layout(g)
    assert drawn(g) == ["●─┬─┐", "● │ │", "│ ● │", "●─┴─┘"]
    assert lanes.width == 3 and lanes.open_after == [3, 3, 3, 0]


def test_crossings_and_a_lane_freed_for_reuse():
    # attention: q, k, v read the normalized tokens t, which the residual Add reads last
    g = graph(("norm", ["x"], ["t"]), ("q", ["t"], ["q"]), ("k", ["t"], ["k"]), ("v", ["t"], ["v"]),
              ("qk", ["q", "k"], ["qk"]), ("out", ["qk", "v"], ["o"]), ("res", ["t", "o"], ["r"]),
              ("head", ["r"], ["h"]), ("side", ["r"], ["s"]), ("join", ["h", "s"], ["y"]))
    assert drawn(g) == [
        "●",
        "├─●",
        "├─┼─●",  # k's branch crosses q's lane
        "├─┼─┼─●",
        "│ ●─┘ │",
        "│ ●───┘",  # v's lane merges across the freed column 2
        "●─┘",
        "├─●",  # the freed column 1 is taken again
        "● │",  # the last reader of r stays in r's column
        "●─┘",
    ]
    lanes = layout(g)
    assert lanes.width == 4 and max(lanes.open_after) == 4


def test_same_tensor_read_twice_and_edges_against_the_order_are_not_drawn():
    g = graph(("a", ["x"], ["a"]), ("square", ["a", "a"], ["sq"]), ("late", ["z"], ["y"]), ("z", ["sq"], ["z"]))
    lanes = layout(g)
    assert drawn(g) == ["●", "●", "│ ●", "●"]  # `late` reads z before it is produced: no lane to it
    assert lanes.edges == 2 and lanes.open_after == [1, 1, 1, 0]


def test_very_wide_lane_sets_are_cut_with_a_count_of_the_hidden_lanes():
    n = 200
    g = graph(("src", ["x"], [f"o{j}" for j in range(n)]),
              *[(f"u{j}", [f"o{j}"], [f"u{j}"]) for j in range(n)],
              ("cat", [f"u{j}" for j in range(n)], ["y"]))
    lanes = layout(g)
    assert lanes.width == n and len(lanes) == n + 2
    rows = [lanes.draw(i, 8) for i in range(len(lanes))]
    assert rows[0] == "●─┬─┬─┬─┬─┬─┬─┬─ …192"  # 8 columns shown, 192 lanes beyond
    assert rows[1] == "● │ │ │ │ │ │ │ …192"
    assert rows[151] == "│ │ │ │ │ │ │ │ …191●"  # the op beyond the cap is still drawn
    assert rows[-1].startswith("●─┴─┴─┴─┴─┴─┴─┴─ …")
    assert all(NODE in r for r in rows) and max(len(r) for r in rows) <= lanes.drawn_width(8)
    assert len(lanes.rows[0]) <= 2 * LIMIT  # rows keep at most LIMIT columns, the rest is counted


def test_demo_offline_model_graph(tmp_path):
    """The main demo network as an offline model (fused device ops): residual block, LayerNorm, attention."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    model = demo.build_model(demo.MAIN.network, demo.MAIN.seed)
    path = tmp_path / "tinynet.onnx"
    onnx.save(model, str(path))
    x = np.zeros((1, 3, demo.IMAGE_SIZE, demo.IMAGE_SIZE), np.float32)
    dump_onnx(path, tmp_path / "golden", {demo.INPUT: x}, timestamp=demo.TIMESTAMP_US)
    sim = simulate(load_graph(path), open_golden(tmp_path / "golden"), str(tmp_path / "npu"), model_name="tinynet")
    g = load_graph(sim.model_json)
    lanes = layout(g)
    by_name = {n.name: lanes.draw(i) for i, n in enumerate(g.nodes)}
    assert by_name["/stem/conv/Conv/stem/relu/Relu"] == "●"
    assert by_name["/block1/conv1/Conv/block1/relu1/Relu"] == "├─●"  # residual: the stem output goes on
    assert by_name["/block1/Add"] == "●─┘"
    assert by_name["/attn/k/MatMul"] == "│ ├─┼─●"
    assert by_name["/attn/MatMul_1"] == "│ ●─┘"
    assert lanes.width == 4


def test_thousands_of_ops_lay_out_in_one_pass():
    n = 5000
    ops = [("n0", ["x"], ["t0"])]
    for i in range(1, n):  # a chain with a skip connection every third op and a fan-out every 50th
        ins = [f"t{i - 1}"] + ([f"t{i - 3}"] if i % 3 == 0 else []) + ([f"t{i - 50}"] if i % 50 == 0 else [])
        ops.append((f"n{i}", ins, [f"t{i}"]))
    g = graph(*ops)
    started = time.perf_counter()
    lanes = layout(g)
    seconds = time.perf_counter() - started
    assert len(lanes) == n and 2 <= lanes.width <= 6 and lanes.edges > n
    assert all(NODE in lanes.draw(i, 4) for i in range(0, n, 97))
    print(f"layout of {n} ops: {seconds * 1000:.0f} ms")  # measured, not asserted
