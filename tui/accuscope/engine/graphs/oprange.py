"""Operator selection: a `start,end,step` range over op sequence ids, or an explicit op list."""
from __future__ import annotations

from dataclasses import dataclass

from accuscope.engine.sources.tensor import SourceError


@dataclass(frozen=True)
class OpRange:
    start: int
    end: int  # -1: the last op
    step: int

    @classmethod
    def parse(cls, text: str, op_count: int | None = None) -> OpRange:
        """`start,end,step` (1-based ids; end -1 = last op; 1 <= step < op count)."""
        parts = [p.strip() for p in text.split(",")]
        try:
            start, end, step = (int(p) for p in parts)
        except ValueError:
            raise SourceError(f"range {text!r}: expected three integers start,end,step (e.g. 1,-1,1)") from None
        if start < 1:
            raise SourceError(f"range {text!r}: start must be 1 or more")
        if end != -1 and end < start:
            raise SourceError(f"range {text!r}: end must be -1 (last op) or at least start")
        if step < 1 or (op_count is not None and op_count > 1 and step >= op_count):
            raise SourceError(f"range {text!r}: step must be at least 1 and below the op count ({op_count})")
        return cls(start, end, step)

    def keeps(self, seq_id: int, last: int) -> bool:
        end = last if self.end == -1 else self.end
        if seq_id == self.start or seq_id == end:
            return True
        return self.start <= seq_id <= end and (seq_id - self.start) % self.step == 0

    def __str__(self) -> str:
        return f"{self.start},{self.end},{self.step}"
