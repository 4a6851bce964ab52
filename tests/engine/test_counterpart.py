"""The golden tensors offered for one NPU tensor in the app's counterpart picker (compare/counterpart.py),
ranked on the real cross-framework msprobe fixture (tests/fixtures/msprobe/cross: MindSpore against
PyTorch, --match structure) and on tensors made here."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import counterpart
from accuscope.engine.compare.comparison import plan
from accuscope.engine.compare.pair import Pair
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.tensor import Tensor

CROSS = Path(__file__).parents[1] / "fixtures" / "msprobe" / "cross"
NORM, NORM_PT = "Primitive.layer_norm.LayerNorm.0.forward", "Functional.layer_norm.0.forward"
QKV, QKV_PT = "Cell.layers.0.attention.qkv.Dense.forward.0", "Module.layers.0.self_attention.query_key_value.Linear.forward.0"


@pytest.fixture(scope="module")
def cross():
    return plan(CompareSpec(str(CROSS / "ms"), str(CROSS / "pt"), match="structure"))


def test_an_unpaired_tensor_is_offered_its_calls_counterpart_first_then_alike_tensors(cross):
    found = counterpart.candidates(cross.pairs, cross.golden.tensors, f"{NORM}:input:1")
    assert len(found) == len(cross.golden.tensors)  # every golden tensor, best first
    # its call's input:0 is paired with Functional.layer_norm.0 (the API table): that call first, alike first
    assert [c.name for c in found[:2]] == [f"{NORM_PT}:input:2", f"{NORM_PT}:input:3"]
    assert {c.match for c in found[:6]} == {counterpart.SAME_CALL}
    assert {c.tensor.op for c in found[:6]} == {NORM_PT}
    after = found[6:]
    tiers = [counterpart.TIERS.index(c.match) for c in after]
    assert tiers == sorted(tiers) and after[0].match == counterpart.SHAPE_DTYPE
    assert all(c.tensor.shape == (8,) and c.dtype_text == "float32" for c in after if c.match == counterpart.SHAPE_DTYPE)
    assert not any(c.current for c in found)  # unpaired: no current counterpart


def test_a_paired_tensor_marks_its_current_counterpart(cross):
    found = counterpart.candidates(cross.pairs, cross.golden.tensors, f"{QKV}:input:1")
    current = [c.name for c in found if c.current]
    assert current == [f"{QKV_PT}:input:1"]
    assert found[0].name == current[0]  # same call, same shape and dtype
    assert counterpart.candidates(cross.pairs, cross.golden.tensors, "no.such.call:input:0") == []


def test_the_filter_keeps_names_holding_every_word(cross):
    found = counterpart.candidates(cross.pairs, cross.golden.tensors, f"{NORM}:input:1")
    kept = counterpart.narrowed(found, "LAYER_NORM.0 input:2")
    assert [c.name for c in kept] == [f"{NORM_PT}:input:2"]
    assert counterpart.narrowed(found, "") == found
    assert all(c.shape_text == "3x8" for c in counterpart.narrowed(found, "3x8"))


def tensor(op: str, index: int, shape: tuple, dtype: str, io: str = "output") -> Tensor:
    return Tensor(op, io, index, np.dtype(dtype), shape, "mem")


def test_tiers_same_shape_and_dtype_then_shape_then_size_nearest_first():
    npu = tensor("n", 0, (2, 3), "float32")
    golden = [tensor("far", 0, (2, 3), "float32"), tensor("a", 0, (3, 2), "float32"), tensor("b", 0, (2, 3), "float16"),
              tensor("home", 0, (4,), "float32"), tensor("near", 0, (2, 3), "float32"), tensor("odd", 0, (7,), "int8")]
    pairs = [Pair(npu, golden[3], None, "home", "structure")]  # type: ignore[arg-type]
    found = counterpart.candidates(pairs, golden, "n:output:0")
    assert [c.name for c in found] == ["home:output:0", "near:output:0", "far:output:0", "b:output:0", "a:output:0",
                                       "odd:output:0"]
    assert [c.match for c in found] == [counterpart.SAME_CALL, counterpart.SHAPE_DTYPE, counterpart.SHAPE_DTYPE,
                                        counterpart.SHAPE, counterpart.SIZE, counterpart.OTHER]
    assert found[0].current
