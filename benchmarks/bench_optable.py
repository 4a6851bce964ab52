"""The operator table widget at 50,000 rows against the design targets, in one run.

Targets (shared/design.md): first frame under 1 s for a 50k-row task; sort / filter / search
under 100 ms at 50k rows. Measured in a headless host app (App.run_test, 160x50):

  first frame   app start -> the table's first data line rendered, and -> run_test ready;
                with --task also load_task() of a saved 50k-row task folder before it
  operations    each widget API call alone (best and median of several rounds), and the call plus
                rendering every line of the widget afterwards (what a keypress costs before the
                terminal write); pilot.pause() alone is printed for reference (textual's idle wait)

    python benchmarks/bench_optable.py [--rows 50000] [--rounds 7] [--task]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import numpy as np
from textual.app import App, ComposeResult

from accuscope.app.optable import OperatorTable
from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import NUMERIC_METRICS
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds

TYPES = ["Conv2D", "Relu", "Add", "MatMul", "TransData", "Data", "Cast", "Softmax", "LayerNorm",
         "BatchMatMulV2", "Mul", "GeLU"]
FIRST_FRAME_TARGET = 1.0
OPERATION_TARGET = 0.100


def build_table(n: int, seed: int = 0) -> ResultTable:
    """A result like a transformer's: long op names, ~3% failing rows, some NaN, some reasons."""
    rng = np.random.default_rng(seed)
    types = rng.choice(TYPES, n)
    ops = n // 2
    names = [f"model/encoder/layer_{i // 40}/block_{(i // 8) % 5}/{types[i]}_{i}" for i in range(n)]
    slot = np.where(np.arange(n) % 3 == 0, "input", "output")
    cols = {
        "type": types.tolist(), "npu_op": names, "golden_op": names,
        "tensor": [f"{names[i]}:{slot[i]}:{i % 2}" for i in range(n)],
        "op_seq": (np.arange(n) * ops // n).tolist(), "shape": ["[1,128,768]"] * n,
        "npu_dtype": ["DT_FLOAT16"] * n, "golden_dtype": ["float32"] * n,
    }
    for key in NUMERIC_METRICS:
        cols[key] = rng.random(n) * 1e-3
    cols["cos"] = 1 - rng.random(n) ** 8 * 0.05
    cols["kl"] = rng.random(n) * 1e-3
    nan = rng.random(n) < 0.01
    for key in NUMERIC_METRICS:
        cols[key][nan] = np.nan
    cols["reason"] = np.where(nan, "golden tensor missing", "").tolist()
    cols["Plug"] = [f"{v:.4g}" for v in rng.random(n)]
    return ResultTable.from_columns(cols, custom=["Plug"])


class Timed(OperatorTable):
    first_line_at: float | None = None

    def render_line(self, y: int):
        strip = super().render_line(y)
        if y > 0 and self.first_line_at is None and len(self.view):
            self.first_line_at = time.perf_counter()
        return strip


class Host(App):
    def __init__(self, table: ResultTable, thresholds: Thresholds, loader=None):
        super().__init__()
        self.table, self.thresholds, self.loader = table, thresholds, loader

    def compose(self) -> ComposeResult:
        yield Timed()

    def on_mount(self) -> None:
        if self.loader is not None:
            self.table, self.thresholds = self.loader()
        widget = self.query_one(Timed)
        widget.load(self.table, self.thresholds)
        widget.focus()


def line(label: str, seconds: float, target: float) -> str:
    return f"  {label:<46} {seconds * 1000:8.1f} ms   {seconds / target:6.3f} x target ({target * 1000:.0f} ms)"


async def first_frame(table: ResultTable, thresholds: Thresholds, loader=None) -> tuple[float, float]:
    start = time.perf_counter()
    app = Host(table, thresholds, loader)
    async with app.run_test(size=(160, 50)) as pilot:
        ready = time.perf_counter()
        widget = app.query_one(Timed)
        while widget.first_line_at is None:
            await pilot.pause()
        return widget.first_line_at - start, ready - start


async def operations(table: ResultTable, thresholds: Thresholds, rounds: int) -> list[tuple[str, list, list]]:
    app = Host(table, thresholds)
    results = []
    async with app.run_test(size=(160, 50)) as pilot:
        widget = app.query_one(Timed)
        await pilot.pause()

        height = widget.scrollable_content_region.height

        def render_all():
            for y in range(height):
                widget.render_line(y)

        async def measure(label, call, reset=None):
            alone, with_frame = [], []
            for _ in range(rounds):
                if reset is not None:
                    reset()
                    await pilot.pause()
                t0 = time.perf_counter()
                call()
                t1 = time.perf_counter()
                render_all()
                t2 = time.perf_counter()
                alone.append(t1 - t0)
                with_frame.append(t2 - t0)
                await pilot.pause()
            results.append((label, alone, with_frame))

        pauses = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await pilot.pause()
            pauses.append(time.perf_counter() - t0)
        results.append(("(pilot.pause() alone, for reference)", pauses, pauses))
        await measure("render all lines (no change)", lambda: None)

        unsort = lambda: widget.sort(None)  # noqa: E731
        unfilter = lambda: widget.clear_filter()  # noqa: E731
        await measure("sort cos ascending", lambda: widget.sort("cos"), unsort)
        await measure("sort max_abs descending", lambda: widget.sort("max_abs", True), unsort)
        await measure("sort type (text)", lambda: widget.sort("type"), unsort)
        await measure("sort Plug (plugin column)", lambda: widget.sort("Plug"), unsort)
        await measure("filter cos < 0.99", lambda: widget.set_filter("cos < 0.99"), unfilter)
        await measure('filter cos < 0.999 and type == "Conv2D"',
                      lambda: widget.set_filter('cos < 0.999 and type == "Conv2D"'), unfilter)
        await measure('filter "block_3" in name', lambda: widget.set_filter('"block_3" in name'), unfilter)
        await measure("clear filter", widget.clear_filter, lambda: widget.set_filter("cos < 0.99"))
        widget.sort("cos")
        await measure("filter while sorted by cos", lambda: widget.set_filter("kl > 5e-4"), unfilter)
        widget.sort(None)
        await measure("search layer_1000/ (from the top)", lambda: widget.search("layer_1000/"),
                      lambda: widget.move_to(0))
        await measure("search next (n)", lambda: widget.search_next())
        await measure("next failing (!)", widget.next_failing)
        await measure("toggle io (i)", widget.toggle_io)
        await measure("toggle invalid rows (x)", widget.toggle_invalid)
        await measure("cursor down (j, one row)", widget.action_cursor_down)
        await measure("page down", widget.action_page_down)
        await measure("load() again (thresholds applied)", lambda: widget.load(table, thresholds))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--task", action="store_true", help="also time load_task() of a saved task folder")
    args = parser.parse_args()

    t0 = time.perf_counter()
    table = build_table(args.rows)
    thresholds = Thresholds()
    judgement.apply(table, thresholds)
    print(f"{args.rows:,} rows built in {time.perf_counter() - t0:.2f} s; "
          f"{int(table.columns['fail'].sum()):,} failing with the default thresholds")

    print("first frame (160x50):")
    asyncio.run(first_frame(build_table(200), Thresholds()))  # warm imports, CSS parsing
    rendered, ready = asyncio.run(first_frame(table, thresholds))
    print(line("app start -> first table line rendered", rendered, FIRST_FRAME_TARGET))
    print(line("app start -> run_test ready", ready, FIRST_FRAME_TARGET))
    if args.task:
        from accuscope.engine.tasks.task import load_task, save_task
        with tempfile.TemporaryDirectory(prefix="accuscope-bench-optable-") as folder:
            save_task(folder, {"npu": "bench", "golden": "bench"}, table, thresholds)

            def loader():
                task = load_task(folder)
                return task.table, task.thresholds
            rendered, _ = asyncio.run(first_frame(table, thresholds, loader))
            print(line("load_task + app start -> first table line", rendered, FIRST_FRAME_TARGET))

    print(f"operations at {args.rows:,} rows (best / median of {args.rounds}; alone, then with rendering "
          f"all {50 - 2} lines):")
    for label, alone, with_frame in asyncio.run(operations(table, thresholds, args.rounds)):
        best, median = min(alone), statistics.median(alone)
        framed = statistics.median(with_frame)
        print(f"  {label:<42} {best * 1000:7.1f} / {median * 1000:7.1f} ms   + render {framed * 1000:7.1f} ms"
              f"   {framed / OPERATION_TARGET:6.3f} x target")


if __name__ == "__main__":
    main()
