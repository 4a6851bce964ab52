"""Tasks built from a result table alone, for the advisor's rules."""
from __future__ import annotations

from pathlib import Path

from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.tasks.task import save_task


def table_task(folder: Path, out_cos: float, out_red: float = 0.4, is_output: bool = True,
                mid: tuple[float, float] = (0.95, 0.3)) -> Path:
    """A task holding only a result table (no dumps named): input -> conv1 -> relu (the output)."""
    rows = [("Data", "image", "output", 1.0, 0.0, False),
            ("Conv2D", "conv1", "input", 0.9999, 0.001, False), ("Conv2D", "conv1", "output", *mid, False),
            ("Relu", "relu", "input", *mid, False), ("Relu", "relu", "output", out_cos, out_red, is_output)]
    table = ResultTable.from_rows([
        {"type": t, "npu_op": op, "golden_op": op, "tensor": f"{op}:{io}:0", "io": io, "cos": cos, "red": red,
         "npu_dtype": "float16", "npu_nonfinite": 0, "golden_nonfinite": 0, "is_output": out}
        for t, op, io, cos, red, out in rows])
    save_task(folder, {"model": None}, table, Thresholds())
    return folder
