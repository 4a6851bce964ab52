"""Keypress latency while a comparison runs in the app (design target: handled within 100 ms).

Builds the synthetic dump pair of bench_compare.py (--gb per both sides), starts the app with that
comparison running in its worker, and presses `i` (inputs/outputs toggle) every 200 ms until the
comparison ends, timing each press until the screen state changed. Runs once the way the app does it
(pairs compared in worker processes) and once with the comparison inline in the app's worker
thread, to show why the app never does that.

    python benchmarks/bench_app.py [--gb 0.25] [--dir /tmp/accuscope-bench-app]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench_compare import build
from textual import events

from accuscope.app import taskscreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from accuscope.engine.compare import comparison as engine
from accuscope.engine.tasks.taskrun import run_task

TARGET = 0.100


async def measure(npu: str, golden: str, inline: bool) -> tuple[list[float], float]:
    """inline=True: the comparison in the app's worker thread, as the app did before it always
    used worker processes (kept to show why)."""
    taskscreen.run_task = (lambda *a, **k: run_task(*a, **{**k, "workers": 1})) if inline else run_task
    spec = engine.CompareSpec(npu, golden)
    with tempfile.TemporaryDirectory() as tmp:
        app = AccuscopeApp(Path(tmp), compare=(spec, Path(tmp) / "task"))
        latencies = []
        async with app.run_test(size=(160, 50)) as pilot:
            screen = app.screen
            while not screen.running:
                await pilot.pause(0.01)
            start = time.perf_counter()
            while screen.running:
                table = screen.query_one(OperatorTable)
                before = table.io_mode
                t0 = time.perf_counter()
                app.post_message(events.Key("i", "i"))  # as the terminal driver does
                while table.io_mode == before and screen.running:
                    await asyncio.sleep(0.001)
                if table.io_mode != before:
                    latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.2)
            return latencies, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=0.25)
    ap.add_argument("--dir", default="/tmp/accuscope-bench-app")
    args = ap.parse_args()
    npu, golden = build(args.dir, args.gb)
    for inline in (False, True):
        lat, took = asyncio.run(measure(npu, golden, inline))
        if not lat:
            print(f"inline={inline}: no keypress handled during the {took:.1f} s run")
            continue
        where = "inline in the worker thread" if inline else "in worker processes"
        print(f"comparison {where}: {took:.1f} s, {len(lat)} keypresses; latency median "
              f"{statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms "
              f"({max(lat) / TARGET:.2f}x the {TARGET * 1000:.0f} ms target)")


if __name__ == "__main__":
    main()
