"""The (NPU, golden) tensor pair of one op of a task, ready for its detail (opdetail)."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from accuscope.engine.compare.metrics import CHUNK
from accuscope.engine.diagnose.opdetail import (
    TOP_DEFAULT,
    ChunkSource,
    OpDetail,
    PairInfo,
    detail_tensors,
    tensor_source,
)
from accuscope.engine.sources.names import parse_tensor_name
from accuscope.engine.sources.tensor import INPUT, OUTPUT, SourceError, Tensor, sanitize
from accuscope.engine.tasks.task import Task, load_task


@dataclass
class OpPair:
    npu: Tensor
    golden: Tensor
    info: PairInfo

    def detail(self, top: int = TOP_DEFAULT, **kw) -> OpDetail | None:
        return detail_tensors(self.npu, self.golden, top=top, info=self.info, **kw)

    def source(self, chunk: int = CHUNK) -> ChunkSource:
        return tensor_source(self.npu, self.golden, chunk)


def open_op(task: Task | str | os.PathLike, op: str, io: str | None = None, index: int | None = None) -> OpPair:
    """The (NPU, golden) tensor pair of one op of a task (a folder, or a Task already opened: the
    op screen asks for tensor after tensor, and the Task's plan serves them all): input or output
    `index` (default: output 0). `op` is an NPU op name as in the result's NPUDump column, or a
    TensorIndex (`name:output:0`). SourceError (with close matches) when the op, the tensor or the
    dumps cannot be found."""
    task = task if isinstance(task, Task) else load_task(task)
    folder = task.folder
    plan = _plan(task)
    named = parse_tensor_name(op)
    if named and io is None and index is None:
        op, io, index = named
    io = io or OUTPUT
    index = 0 if index is None else index
    if io not in (INPUT, OUTPUT):
        raise SourceError(f"tensor kind must be input or output, not {io!r}")
    table, _ = task.result
    known = list(dict.fromkeys(str(o) for o in table.columns["npu_op"])) if len(table) else []
    if known and op not in known:
        found = [k for k in known if sanitize(k) == sanitize(op)]
        if not found:
            close = difflib.get_close_matches(op, known, n=5, cutoff=0.6)
            hint = f"; close matches: {', '.join(close)}" if close else f"; the task has {len(known)} ops"
            raise SourceError(f"op {op!r} is not in the task {folder}{hint}")
        op = found[0]
    dump_op = plan.npu.find_op(op)
    if dump_op is None:
        raise SourceError(f"{plan.spec.npu}: op not in the dump: {op}")
    of_op = [p for p in plan.pairs if p.op is dump_op]
    pairs = [p for p in of_op if p.npu.io == io and p.npu.index == index]
    if not pairs:
        have = {kind: sorted(p.npu.index for p in of_op if p.npu.io == kind) for kind in (INPUT, OUTPUT)}
        text = ", ".join(f"{kind}s {_span(v)}" for kind, v in have.items())
        raise SourceError(f"{op} has no {io} {index} (index out of range; it has {text})")
    pair = pairs[0]
    name = pair.npu.name
    if pair.npu.problem:
        raise SourceError(f"{name}: {pair.npu.problem}")
    if pair.golden is None:
        raise SourceError(f"{name} has no golden counterpart: {pair.reason or 'not mapped'}")
    if pair.golden.problem:
        raise SourceError(f"{name}: golden {pair.golden.op}: {pair.golden.problem}")
    if pair.npu.size != pair.golden.size:
        raise SourceError(f"{name}: shape {list(pair.npu.shape)} of the NPU tensor does not match shape "
                          f"{list(pair.golden.shape)} of golden {pair.golden.op}")
    t, g = pair.npu, pair.golden
    info = PairInfo(pair.op.op_name, t.io, t.index, pair.ground_truth, pair.op.op_type, t.source, g.source,
                    t.dtype_name or str(t.dtype), g.dtype_name or str(g.dtype))
    return OpPair(t, g, info)


def _plan(task: Task):
    """The plan of all the task's pairs; SourceError when the task has no result to detail."""
    doc = task.doc
    if not len(task.result[0]) and doc.state in ("failed", "cancelled", "running"):
        why = f": {doc.error}" if doc.error else ""
        raise SourceError(f"{task.folder}: the task {doc.state if doc.state != 'running' else 'is still running'}"
                          f"{why}; it has no result to detail")
    return task.plan


def _span(values: list[int]) -> str:
    if not values:
        return "none"
    return f"0..{values[-1]}" if values == list(range(len(values))) else ",".join(map(str, values))
