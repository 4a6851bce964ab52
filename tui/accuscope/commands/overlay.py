"""`accuscope overlay TASK_DIR --out node_data.json`: a task's metric on the graph in Model Explorer."""
from __future__ import annotations

import json
from pathlib import Path

from ..engine.export.overlay import task_overlay
from ..engine.sources.outputfile import write_text
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import unwritable
from ..exitcode import ExitCode
from .common import out, show


def register(p) -> None:
    p.description = ("Write a task's per-op metric as Model Explorer node data, keyed by the "
                     "framework ONNX model's node ids (a fused device op colours every framework "
                     "op it was fused from), so `model-explorer MODEL.onnx --extensions "
                     "model_explorer_onnx --node_data_paths FILE` (pip install "
                     "model-explorer-onnx) shows where the error is on the graph. Nodes past the "
                     "task's threshold are red; a metric without a threshold gets a gradient. "
                     "Exit 0: written; 2: unusable task, no framework model, or a metric the "
                     "task lacks.")
    p.add_argument("task", metavar="TASK_DIR")
    p.add_argument("--out", required=True, metavar="FILE.json", help="node data file to write")
    p.add_argument("--metric", default="cos", help="metric to show (short key or CSV name; default cos)")
    p.add_argument("--framework-model", metavar="FILE.onnx",
                   help="the ONNX model Model Explorer shows (default: the task's framework model)")
    p.set_defaults(handler=run)


def run(args) -> int:
    result, model = task_overlay(args.task, args.metric, args.framework_model)
    path = Path(args.out)
    try:
        write_text(path, json.dumps(result.doc, indent=1, ensure_ascii=False) + "\n")
    except OSError as e:
        raise unwritable(e, path) or SourceError(f"{path}: cannot write: {e.strerror or e}") from None
    out.print(f"wrote {show(str(path))}: {result.metric} of {result.nodes:,} nodes of graph "
              f"{show(result.graph_id)} ({result.failing:,} failing) in {show(str(model))}", soft_wrap=True)
    if result.missing:
        names = ", ".join(result.missing[:5]) + (f" … and {len(result.missing) - 5} more" if len(result.missing) > 5
                                                 else "")
        out.print(f"[yellow]not in the model:[/] {len(result.missing):,} framework op names: {show(names)}",
                  soft_wrap=True)
    out.print(f"view it: model-explorer {show(str(model))} --extensions model_explorer_onnx "
              f"--node_data_paths {show(str(path))}", soft_wrap=True)
    return ExitCode.OK
