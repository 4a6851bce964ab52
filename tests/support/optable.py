"""Helpers of test_optable.py that other tests use too."""
from __future__ import annotations

import asyncio
import math

from textual.app import App, ComposeResult

from accuscope.app.optable import OperatorTable
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds

nan = math.nan
TYPES = ["Conv2D", "Relu", "Add", "MatMul", "TransData"]
INVALID = 21  # could not be compared
EXEMPT_BAD = 4  # TransData with a terrible cos: exempt, never failing


def _rows(n: int = 40) -> list[dict]:
    rows = []
    for i in range(n):
        typ = TYPES[i % 5]
        op = f"net/block{i // 4}/{typ.lower()}_{i}"
        io = "input" if i % 4 == 0 else "output"
        rows.append(dict(type=typ, npu_op=op, golden_op=op, tensor=f"{op}:{io}:0", shape="[1, 8, 4]",
                         op_seq=i, npu_dtype="DT_FLOAT16", golden_dtype="float32",
                         cos=0.999 + i * 1e-5, red=0.001, kl=1e-4, max_abs=3e-6 if i == 3 else 0.01,
                         mean_abs=0.001, rmse=0.002, max_rel=0.03, mean_rel=0.002, acc_rel=0.5))
    rows[7]["cos"] = 0.5
    rows[13]["kl"] = 0.02
    rows[27]["red"] = 0.2
    rows[EXEMPT_BAD]["cos"] = 0.1
    rows[INVALID].update({k: nan for k in ("cos", "red", "kl", "max_abs", "mean_abs", "rmse", "max_rel",
                                          "mean_rel", "acc_rel")})
    rows[INVALID]["reason"] = "npu tensor file is truncated"
    rows[2]["max_rel"] = math.inf
    return rows


def _table(n: int = 40) -> ResultTable:
    return ResultTable.from_rows(_rows(n))


class Host(App):
    def __init__(self, table: ResultTable | None = None, thresholds: Thresholds | None = None):
        super().__init__()
        self.table = table if table is not None else _table()
        self.thresholds = thresholds
        self.messages: list[tuple[str, int | None]] = []

    def compose(self) -> ComposeResult:
        yield OperatorTable()

    def on_mount(self) -> None:
        widget = self.query_one(OperatorTable)
        widget.load(self.table, self.thresholds or Thresholds())
        widget.focus()

    def on_operator_table_highlighted(self, message: OperatorTable.Highlighted) -> None:
        self.messages.append(("highlighted", message.row))

    def on_operator_table_selected(self, message: OperatorTable.Selected) -> None:
        self.messages.append(("selected", message.row))


def run(test, size=(100, 24), table: ResultTable | None = None, thresholds: Thresholds | None = None):
    """Run `await test(pilot, widget, app)` inside a host app of the given size."""
    async def main():
        app = Host(table, thresholds)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await test(pilot, app.query_one(OperatorTable), app)
    asyncio.run(main())


def lines(widget: OperatorTable) -> list[str]:
    return [widget.render_line(y).text for y in range(widget.scrollable_content_region.height)]
