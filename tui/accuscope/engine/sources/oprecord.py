"""One operator of a side (`OpRecord`): its name and type and its input and output tensors, whatever
format wrote it. An Ascend dump file is one (`ascend.read_dump_file`, its header's facts kept); every
other format's tensors are grouped into them by op name (`sides.side.Side.ops`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from accuscope.engine.sources.names import DumpName
from accuscope.engine.sources.tensor import Tensor


@dataclass
class OpRecord:
    """One operator: its facts and its lazily loaded input/output tensors. `name`, `version`,
    `attrs` and `problem` are an Ascend dump file's (its parsed file name, header and damage)."""

    path: str
    name: DumpName | None
    op_name: str = ""
    op_type: str = ""
    version: str = ""
    dump_time: int = 0
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    problem: str = ""

    @property
    def timestamp(self) -> int:
        return self.name.timestamp if self.name else self.dump_time

    @property
    def tensors(self) -> list[Tensor]:
        return self.inputs + self.outputs
