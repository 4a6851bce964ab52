"""The metric table as the app shows it: the op table has a column for every metric, headed by its
label, and the task screen's help names every metric (Pilot, text on screen)."""
from __future__ import annotations

import numpy as np

from accuscope.app.app import AccuscopeApp
from accuscope.app.dialogs import HelpScreen
from accuscope.engine.compare.columns import METRIC_TABLE
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.demo.workspace import MAIN
from appkit import drive, screen_text
from support.metrics import every_cell
from support.optable import lines, run


def test_the_op_table_has_a_column_for_every_metric():
    x = np.linspace(-1, 1, 100)
    cells = every_cell(x, x * 1.01)
    table = ResultTable.from_rows([dict(index=0, npu_op="a", golden_op="a", tensor="a:output:0", **cells)])

    async def test(pilot, w, app):
        assert set(w.columns) >= {m.key for m in METRIC_TABLE}
        header = lines(w)[0]
        for m in METRIC_TABLE:
            assert f" {m.title}" in header or header.startswith(m.title), m.title
    run(test, size=(480, 8), table=table)


def test_the_help_names_every_metric(ws):
    async def script(pilot):
        await pilot.press("?")
        assert isinstance(pilot.app.screen, HelpScreen)
        seen = screen_text(pilot.app)
        for _ in range(40):  # j scrolls the help down to its end
            await pilot.press("j")
            seen += screen_text(pilot.app)
        missing = [m.key for m in METRIC_TABLE if m.key not in seen]
        assert not missing, missing
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
