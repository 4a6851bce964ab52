"""MsprobeMapping's bookkeeping over several ranks' plans: each name once, counted once, a rank that
pairs a name otherwise listed (the first kept), N/A only where msprobe would pair a namesake."""
from __future__ import annotations

from types import SimpleNamespace as NS

from accuscope.engine.compare.crossmap import NO_COUNTERPART
from accuscope.engine.export.msprobemap import UNPAIRED, MsprobeMapping, module_path

CALL, BENCH = "Cell.fc1.Dense.forward.0", "Module.fc1.Linear.forward.0"


def plan(target: str) -> NS:
    """One rank: fc1's input paired with `target`, its output with its namesake, a Tensor.to call unpaired
    (its namesake on the bench side) and a MindSpore primitive unpaired (none)."""
    golden = [NS(tensor_name=n, op=n.rsplit(".", 2)[0]) for n in (f"{BENCH}.input.0", f"{BENCH}.input.9",
                                                                   f"{CALL}.output.0", "Tensor.to.0.forward.input.0")]
    by = {t.tensor_name: t for t in golden}
    op = NS(op_name=CALL)
    pairs = [NS(npu=NS(tensor_name=f"{CALL}.input.0"), golden=by[target], op=op, how="name_variants"),
             NS(npu=NS(tensor_name=f"{CALL}.output.0"), golden=by[f"{CALL}.output.0"], op=op, how="tensor"),
             NS(npu=NS(tensor_name="Tensor.to.0.forward.input.0"), golden=None, op=NS(op_name="Tensor.to.0.forward"),
                how=""),
             NS(npu=NS(tensor_name="Primitive.Shape.0.forward.output.0"), golden=None, op=op, how="")]
    return NS(golden=NS(tensors=golden), pairs=pairs)


def test_ranks_merge_into_one_mapping():
    found = MsprobeMapping()
    found.add(plan(f"{BENCH}.input.0"))
    found.add(plan(f"{BENCH}.input.0"))
    found.add(plan(f"{BENCH}.input.9"))
    assert found.data == {f"{CALL}.input.0": f"{BENCH}.input.0", "Tensor.to.0.forward.input.0": NO_COUNTERPART}
    assert found.cells == {"fc1.Dense": "fc1.Linear"} and found.same == 3
    assert found.rules == {"name_variants": 1, UNPAIRED: 1}
    assert found.conflicts == [f"{CALL}.input.0: {BENCH}.input.0 (kept) or {BENCH}.input.9"]
    assert module_path("Cell.layers.0.attention.qkv.Dense.backward.2") == "layers.0.attention.qkv.Dense"
    assert module_path("Mint.matmul.0.forward") is None
