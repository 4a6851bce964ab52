"""A task's per-op metric as Model Explorer node data, keyed by the framework ONNX model's nodes.

Model Explorer (`model-explorer MODEL.onnx --node_data_paths FILE`, ONNX through the
model-explorer-onnx adapter) colours a graph's nodes from a JSON file
`{graph_id: {"results": {node_id: {"value": v}}, "thresholds": [...] | "gradient": [...]}}`.
The adapter's graph id is the ONNX graph's name and a node's id its name (`<node_I>` for the
unnamed node at position I of graph.node). Each compared op's output rows give one value, the
worst of them; a device op fused from several framework ops (its golden_op column lists them, from
the fusion / original-op attributes the pairing used) gives that value to each of them, and a
framework op reached by several device ops keeps the worst. Thresholds colour a node red past the
task's threshold for the metric (cos fails low, errors fail high); a metric the task has no
threshold for gets a green-to-red gradient. A value made NaN by NaN/inf on the NPU side is the
worst the scale holds (-1.79e308 for a metric failing low, +1.79e308 for one failing high), in red;
an infinite metric (SQNR of identical tensors) is +-1.79e308 too, JSON having no inf.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.pair import golden_ops
from accuscope.engine.compare.thresholds import default_op, resolve_key
from accuscope.engine.graphs.onnxgraph import need
from accuscope.engine.sides.registry import load_graph
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import Task, load_task

PASS, FAIL = "#a5d6a7", "#e53935"  # light green, red
WORST = sys.float_info.max


@dataclass
class Overlay:
    graph_id: str
    metric: str
    doc: dict  # what the JSON file holds
    failing: int  # nodes whose ops fail (the task's judgement: judgement.py)
    missing: list[str] = field(default_factory=list)  # framework op names the model does not have

    @property
    def nodes(self) -> int:
        return len(self.doc[self.graph_id]["results"])


def explorer_ids(model: str | Path) -> tuple[str, dict[str, str]]:
    """The graph id Model Explorer's ONNX adapter gives the model's main graph, and the node id it
    gives each node, by accuscope's node name and by each output tensor name."""
    onnx = need("onnx", "reading ONNX models")
    graph = load_graph(model)
    if not graph.runnable:
        raise SourceError(f"{model}: not an ONNX model ({graph.kind}); Model Explorer overlays key ONNX nodes")
    proto = onnx.load(str(model), load_external_data=False).graph
    by_tensor = {}
    for position, n in enumerate(proto.node):
        for out in n.output:
            if out:
                by_tensor[out] = n.name or f"<node_{position}>"
    ids = dict(by_tensor)
    for node in graph.nodes:
        produced = [by_tensor[o] for o in node.outputs if o in by_tensor]
        if produced:
            ids[node.name] = produced[0]
    return proto.name, ids


def overlay(task: Task, model: str | Path, metric: str = "cos") -> Overlay:
    """Node data of `metric` over `task`'s compared output rows, keyed by `model`'s node ids.
    SourceError for a metric the task lacks, or when no compared op is a node of the model."""
    try:
        key = resolve_key(metric, purpose="to colour the graph by")
    except ValueError as e:
        raise SourceError(f"--metric: {e}") from None
    table, thresholds = task.result
    if key not in table.metric_keys:
        raise SourceError(f"--metric {metric}: {task.folder} has no {key} values "
                          f"(its metrics: {', '.join(table.metric_keys)})")
    graph_id, ids = explorer_ids(model)
    low = default_op(key) == "<"
    threshold = thresholds.get(key)
    c, values = table.columns, table.numbers(key)
    state = judgement.evaluate(table, thresholds)
    broken_nf, skip, fails = state.nonfinite, state.exempt, state.fail
    worse = min if low else max
    results: dict[str, float] = {}
    red: set[str] = set()
    failing: set[str] = set()
    missing: dict[str, None] = {}
    for r in np.flatnonzero((c["io"] == "output") & ~skip):
        chain = golden_ops(c["golden_op"][r])
        value, nonfinite = float(values[r]), bool(broken_nf[r])
        if nonfinite:
            value = -WORST if low else WORST
        elif np.isnan(value):
            continue  # not compared (shapes differ, unreadable): nothing to colour
        elif np.isinf(value):
            value = math.copysign(WORST, value)  # SQNR of identical tensors: JSON has no inf
        for name in chain:
            node = ids.get(name)
            if node is None:
                missing.setdefault(name)
                continue
            results[node] = worse(results.get(node, value), value)
            if nonfinite:
                red.add(node)
            if fails[r]:  # counted by the judgement (judgement.py): NaN/inf, any threshold, never noise alone
                failing.add(node)
    if not results:
        raise SourceError(f"{task.folder}: none of its compared ops is a node of {model} (graph "
                          f"{graph_id or 'without a name'}); is it the model the golden side ran?")
    data: dict = {"name": f"accuscope {key}",
                  "results": {n: ({"value": v, "bgColor": FAIL} if n in red else {"value": v})
                              for n, v in results.items()}}
    if threshold is not None:
        t = threshold.value
        data["thresholds"] = ([{"value": float(np.nextafter(t, -np.inf)), "bgColor": FAIL},
                               {"value": WORST, "bgColor": PASS}] if low else
                              [{"value": t, "bgColor": PASS}, {"value": WORST, "bgColor": FAIL}])
    else:
        data["gradient"] = [{"stop": 0, "bgColor": FAIL if low else PASS}, {"stop": 1, "bgColor": PASS if low else FAIL}]
    return Overlay(graph_id, key, {graph_id: data}, len(failing), list(missing))


def task_overlay(folder: str | Path, metric: str = "cos", model: str | Path | None = None) -> tuple[Overlay, Path]:
    """overlay() of the task folder, keyed by `model` or else the task's framework ONNX model (see
    Task.framework_model); SourceError naming what is missing when there is none."""
    task = load_task(folder)
    if model is not None:
        path = Path(user_path(os.path.expanduser(model), "framework model file"))
    else:
        found, _ = task.framework_model
        if found is None:
            raise SourceError(f"{folder}: no framework ONNX model to key the overlay by (none in task.json "
                              "framework_model or model, no golden/model.onnx beside the golden dump); give "
                              "--framework-model FILE.onnx")
        path = found
    return overlay(task, path, metric), path
