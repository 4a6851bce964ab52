"""A precision search set up from an opened task (the app's advisor starts one): the framework
model as the reference, the conversion the task's candidate went through (int8 when its model holds
quantization ops, else fp16), the inputs the task's reference dump was run on, and the folder
TASK/precision-{fp16|int8}."""
from __future__ import annotations

import os
from pathlib import Path

from accuscope.engine.precision.convert import recognise
from accuscope.engine.precision.evaluate import Target, parse_target
from accuscope.engine.precision.spec import PrecisionSpec
from accuscope.engine.sources.inputfile import json_loads
from accuscope.engine.sources.npyfile import user_npy
from accuscope.engine.sources.tensor import SourceError, sanitize
from accuscope.engine.tasks.task import TaskFolder


def spec_from_task(task: TaskFolder, framework_model: str | os.PathLike,
                   targets: list[Target] | None = None) -> PrecisionSpec:
    """The search for `task`, as the caller opened it (the paths its task.json records, found where it
    now is); SourceError when the task has no ONNX reference dump with its inputs (an `accuscope run`
    task has)."""
    folder = task.folder
    golden, npu = task.path("golden"), task.path("npu")
    if golden is None:
        raise SourceError(f"{folder}: the task names no reference dump (a task made by `accuscope run` has one)")
    doc = _dump_doc(golden)
    inputs = {}
    for name in doc.get("inputs") or {}:
        path = Path(golden) / f"{sanitize(name)}.0.{doc.get('timestamp')}.npy"
        inputs[name] = user_npy(str(path), f"reference dump's input {name!r}")
    if not inputs:
        raise SourceError(f"{folder}: the reference dump names no model input")
    to = "int8" if recognise(Path(npu) / "model.onnx" if npu else "").startswith("int8") else "fp16"
    return PrecisionSpec(str(framework_model), to, str(Path(folder) / f"precision-{to}"),
                         targets or [parse_target("cos=0.99")], inputs)


def _dump_doc(golden: Path) -> dict:
    path = Path(golden) / "dump.json"
    try:
        doc = json_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise SourceError(f"{path}: no ONNX Runtime dump of the reference (a task made by `accuscope run` has one)") from None
    return doc if isinstance(doc, dict) else {}

