"""The Ascend op vocabulary (one place) and the `op:io:k` tensor name (one parser)."""
from accuscope.engine.compare.judgement import exempt
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.graphs.graph import Graph, Node
from accuscope.engine.graphs.optypes import EXEMPT_TYPES, INSERTED, LAYOUT_ONLY, walk_back
from accuscope.engine.sources.names import TensorName, parse_tensor_name
from support.narrow import present


def _graph():
    nodes = [Node("data", "Data", 0, 0, [], ["x"]),
             Node("trans", "TransData", 1, 1, ["x"], ["x5hd"]),
             Node("cast", "Cast", 2, 2, ["x5hd"], ["x16"]),
             Node("conv", "Conv2D", 3, 3, ["x16", "w"], ["y"]),
             Node("loop_a", "TransData", 4, 4, ["loop_b:0"], ["loop_a:0"]),
             Node("loop_b", "Cast", 5, 5, ["loop_a:0"], ["loop_b:0"])]
    return Graph("g", "om", "g.json", nodes, [], ["y"], {"w"})


def test_walk_back_goes_through_inserted_ops_to_the_first_framework_producer():
    g = _graph()
    steps = [(t, hit[0].name if hit else None) for t, hit in walk_back(g, "x16")]
    assert steps == [("x16", "cast"), ("x5hd", "trans"), ("x", "data")]
    assert [(t, hit) for t, hit in walk_back(g, "w")] == [("w", None)]  # a weight has no producer
    assert [present(hit)[0].name for _, hit in walk_back(g, "y")] == ["conv"]  # not inserted: one step
    assert len(list(walk_back(g, "loop_a:0"))) == 3  # a cycle in a damaged graph ends


def test_cast_is_walked_through_but_its_row_is_judged():
    assert "Cast" in INSERTED and "Cast" not in LAYOUT_ONLY and "Cast" not in EXEMPT_TYPES
    table = ResultTable.from_columns({"type": ["TransData", "Cast", "Data", "Conv2D"],
                                      "tensor": [f"op{k}:output:0" for k in range(4)]}, [], [])
    assert exempt(table).tolist() == [True, False, True, False]


def test_tensor_names_parse_one_way():
    assert parse_tensor_name("conv1:output:0") == TensorName("conv1", "output", 0)
    assert parse_tensor_name("a:b:input:12") == TensorName("a:b", "input", 12)  # colons in the op name
    assert str(TensorName("x", "input", 1)) == "x:input:1"
    for other in ("conv1", "conv1:output", "conv1:output:x", ":output:0", "conv1:weight:0", "c:output:٣"):
        assert parse_tensor_name(other) is None, other
