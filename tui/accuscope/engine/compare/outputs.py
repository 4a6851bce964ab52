"""Which pairs are the network's outputs: every way to tell (the NPU side's model, the golden side's, the
last op of the NPU side's execution order, tpu-mlir's output casts), strongest first; comparison.plan
takes the first that names an output among the pairs."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from accuscope.engine.graphs.optypes import CONVERTER_OWN, walk_back
from accuscope.engine.sources.tensor import OUTPUT

if TYPE_CHECKING:
    from accuscope.engine.compare.pair import Pair
    from accuscope.engine.graphs.graph import Graph
    from accuscope.engine.sides.side import Side


def output_checks(npu: Side, npu_graph: Graph | None, golden_graph: Graph | None) -> list[Callable[[Pair], bool]]:
    """Whether a pair is one of the network's outputs, each way to tell, strongest first: the NPU
    side's model (its output ops, or its output values for a side that names tensors by value, as
    Polygraphy does), the golden side's (the pair's golden tensor is a network output, or the dump
    header names an output op), the last op of the NPU side. `plan` takes the first that names an
    output among the pairs: a model only adds, never leaves the outputs unknown."""
    checks: list[Callable[[Pair], bool]] = []
    if npu_graph is not None:
        names = {n.name for n in npu_graph.output_nodes}
        values = set(npu_graph.outputs)
        for tensor in npu_graph.outputs:  # an output cast to its storage type (tpu-mlir): the op before it too
            hit = npu_graph.producer(tensor)
            if hit is None or hit[0].type not in CONVERTER_OWN:
                continue
            for step, found in walk_back(npu_graph, tensor):
                if found is not None and found[0].type not in CONVERTER_OWN:
                    names.add(found[0].name)
                    values.add(step)
                    break
        om = npu_graph.is_device
        checks.append(lambda p: p.npu.io == OUTPUT and (
            (p.op.op_name in names and (om or not p.npu.tensor_name or p.npu.tensor_name in values or p.npu.op in values))
            or (not om and bool(p.npu.tensor_name) and p.npu.tensor_name in values)))
    if golden_graph is not None:
        gnames = {n.name for n in golden_graph.output_nodes}
        gvalues = set(golden_graph.outputs)
        by_header = {f.op_name for f in npu.ops if any(t.original_op and t.original_op[0] in gnames for t in f.outputs)}

        def is_output(p: Pair) -> bool:
            if p.npu.io != OUTPUT:
                return False
            if p.op.op_name in by_header:
                return True
            g = p.golden
            if g is None:
                return p.op.op_name in gnames
            hit = golden_graph.node(g.op)
            return g.tensor_name in gvalues or (hit is not None and hit.name in gnames and g.index < len(hit.outputs)
                                                and hit.outputs[g.index] in gvalues)
        checks.append(is_output)
    return checks + [last_op(npu)]


def last_op(npu: Side) -> Callable[[Pair], bool]:
    """The last op of the NPU side's execution order is an output; no op where that order is unknown."""
    caps = npu.caps
    if caps.step_based:  # a training step's last call is an optimizer update, not the network's output
        return lambda p: False
    if caps.ordered_by_timestamp and not all(t.timestamp for t in npu.tensors):
        # files named without the dump's timestamp ({op}.{k}.{timestamp}.npy) stand in name order: the last
        # name is no output (a verdict on it would be a guess; the model, --model, says which are)
        return lambda p: False
    if caps.network_outputs is not None:  # (tpu-mlir's output casts)
        names = caps.network_outputs([f.op_name for f in npu.ops])
        return lambda p: p.npu.io == OUTPUT and p.op.op_name in names
    last = npu.ops[-1].op_name if npu.ops else None
    return lambda p: p.npu.io == OUTPUT and p.op.op_name == last


