"""Pairs that check themselves (compare/repair.py) on a model whose golden chain is Mul `scale` ->
Add `bias`: a disagreeing pair is re-paired to the chain's golden tensor only where the NPU side
could have folded it, never to a golden tensor the NPU side computed itself."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.repair import similarity
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.thresholds import Thresholds

TS = 1700000000000000


def scale_bias(path) -> None:
    h, T = onnx.helper, onnx.TensorProto
    graph = h.make_graph([h.make_node("Mul", ["x", "two"], ["s"], name="scale"),
                          h.make_node("Add", ["s", "one"], ["out"], name="bias")], "chain",
                         [h.make_tensor_value_info("x", T.FLOAT, [64])],
                         [h.make_tensor_value_info("out", T.FLOAT, [64])],
                         [h.make_tensor("two", T.FLOAT, [], [2.0]), h.make_tensor("one", T.FLOAT, [], [1.0])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def sides(tmp_path, npu_tensors: dict[str, Callable[[dict[str, np.ndarray]], np.ndarray]]):
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    golden = {"scale": x * 2, "bias": x * 2 + 1}
    for side, tensors in (("npu", {k: v(golden) for k, v in npu_tensors.items()}), ("golden", golden)):
        (tmp_path / side).mkdir()
        for k, (op, arr) in enumerate(tensors.items()):
            np.save(tmp_path / side / f"{op}.0.{TS + k}.npy", arr)
    scale_bias(tmp_path / "m.onnx")
    p = plan(CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"), golden_model=str(tmp_path / "m.onnx")))
    table = execute(p, workers=1)
    assert table is not None
    return p, {table.columns["npu_op"][i]: (table.columns["golden_op"][i], table.columns["how"][i])
               for i in range(len(table))}


def test_a_fold_the_npu_side_shows_is_re_paired(tmp_path):
    """The NPU's `scale` holds the bias's output and it has no `bias` of its own: the Add was folded."""
    p, rows = sides(tmp_path, {"scale": lambda g: g["bias"]})
    assert rows["scale"] == ("bias", "fused: Add folded into Mul")
    assert len(p.coverage.repaired) == 1


def test_a_golden_tensor_the_npu_side_computed_itself_is_no_fold(tmp_path):
    """The NPU ran `bias` itself (its row pairs with golden `bias`), so its `scale` holding bias-like values
    is an error at `scale`, not a fold: the row stays paired by identity and fails."""
    p, rows = sides(tmp_path, {"scale": lambda g: g["bias"], "bias": lambda g: g["bias"]})
    assert rows["scale"] == ("scale", "name")
    assert rows["bias"] == ("bias", "name")
    assert not p.coverage.repaired


def test_similarity_is_the_metrics_cosine_and_euclidean_similarity():
    x = np.arange(1, 9, dtype=np.float32)
    cos, euclid = similarity(x, x * 2)
    norm = float(np.linalg.norm(x.astype(np.float64)))
    assert abs(cos - 1) < 1e-12 and abs(euclid - (1 - norm / (1.5 * norm + 1e-7))) < 1e-12
    assert all(v != v for v in similarity(x, np.zeros(8, np.float32)))  # a side all zero: undefined
    assert all(v != v for v in similarity(np.where(x > 4, np.nan, x), x))  # NaN: undefined


def test_a_fold_that_only_the_users_thresholds_see_is_re_paired(tmp_path):
    """A bias small enough that the identity pair agrees by cosine and euclidean similarity (AGREE) but
    breaks the threshold the verdict judges by (red 0.005): the value check uses the verdict's own rules,
    so the row is re-paired to the fused chain's output (which passes them) rather than failed."""
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    folded = x * 2 + 0.01  # the NPU's `scale` holds scale + a small bias: the Add was folded into it
    golden = {"scale": x * 2, "bias": folded.copy()}
    for side, tensors in (("npu", {"scale": folded}), ("golden", golden)):
        (tmp_path / side).mkdir()
        for k, (op, arr) in enumerate(tensors.items()):
            np.save(tmp_path / side / f"{op}.0.{TS + k}.npy", arr)
    scale_bias(tmp_path / "m.onnx")
    cos, euclid = similarity(folded, golden["scale"])
    red = float(np.linalg.norm(folded - golden["scale"]) / np.linalg.norm(golden["scale"]))
    assert cos > 0.99 and euclid > 0.99 and 0.005 < red < 0.05  # only the user's red=0.005 sees it
    thresholds = Thresholds()
    thresholds.set("red", 0.005)
    for spec_thresholds, paired in ((Thresholds(), "scale"), (thresholds, "bias")):
        p = plan(CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"), golden_model=str(tmp_path / "m.onnx"),
                             thresholds=spec_thresholds))
        table = execute(p, workers=1)
        assert table is not None
        assert table.columns["golden_op"][0] == paired
        assert not table.columns["fail"].any()
