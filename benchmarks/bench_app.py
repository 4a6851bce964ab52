"""Keypress latency while a comparison runs in the app (design target: handled within 100 ms).

Builds the synthetic dump pair of bench_compare.py (--gb per both sides), starts the app with that
comparison running in its worker, and presses `i` (inputs/outputs toggle) every 200 ms until the
comparison ends, timing each press until the screen state changed. Runs once the way the app does it
(pairs compared in worker processes) and once with the comparison inline in the app's worker
thread, to show why the app never does that.

    python benchmarks/bench_app.py [--gb 0.25] [--dir /tmp/accuscope-bench-app]

--first-frame instead times the whole process from start to its first frame (design target 1 s):
`accuscope open TASK` in a pseudo-terminal of 80x24, from the fork until the screen written to it
shows the task's first table row, for the demo's main task and for a task of --rows rows (default
1M), each alone and while another process keeps a core busy, alternating, medians of --rounds;
with --base-tui DIR (another checkout's tui folder) the same from there, in the same rounds.

    python benchmarks/bench_app.py --first-frame [--rows 1000000] [--rounds 5] [--base-tui DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from bench_compare import build
from textual import events

from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.tasks import taskrun
from accuscope.engine.tasks.taskrun import run_task

TARGET = 0.100


async def measure(npu: str, golden: str, inline: bool) -> tuple[list[float], float]:
    """inline=True: the comparison in the app's worker thread, as the app did before it always
    used worker processes (kept to show why)."""
    taskrun.run_task = (lambda *a, **k: run_task(*a, **{**k, "workers": 1})) if inline else run_task
    spec = CompareSpec(npu, golden)
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


FRAME_TARGET = 1.0
_ESCAPE = re.compile(rb"\x1b(?:\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")


def first_frame(cmd: list[str], env: dict, marker: str, timeout: float = 60.0) -> float:
    """Seconds from forking `cmd` in an 80x24 pseudo-terminal until its output shows `marker`
    (escape sequences removed); the process is then killed."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is 80x24 before anything reads its size
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    seen, want = b"", marker.encode()
    try:
        while time.perf_counter() - start < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(fd, 1 << 16)
            except OSError:  # the child closed the terminal: it ended without the marker
                break
            if want in _ESCAPE.sub(b"", seen):
                return time.perf_counter() - start
        raise RuntimeError(f"no {marker!r} on the screen of {' '.join(cmd)}: {_ESCAPE.sub(b'', seen)[-400:]!r}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def big_task(folder: Path, rows: int) -> Path:
    """A saved task of `rows` rows (bench_optable's transformer-like table), built once."""
    from bench_optable import build_table

    from accuscope.engine.compare import judgement
    from accuscope.engine.compare.thresholds import Thresholds
    from accuscope.engine.tasks.task import save_task
    task = folder / f"task-{rows}"
    if not (task / "task.json").exists():
        table = build_table(rows)
        judgement.apply(table, Thresholds())
        save_task(task, {"npu": "bench", "golden": "bench"}, table, Thresholds())
    return task


def first_frames(args) -> None:
    """Whole-process start to first frame: the demo's main task and a --rows task, alone and with a
    core kept busy, this tree (and --base-tui) alternating round by round."""
    from accuscope.engine.demo.workspace import MAIN, build_workspace
    from accuscope.engine.tasks.task import load_task
    root = Path(args.dir)
    demo = root / "demo"
    if not (demo / MAIN.name / "task.json").exists():
        build_workspace(demo)
    tasks = {"demo": demo / MAIN.name, f"{args.rows:,} rows": big_task(root, args.rows)}
    # the status line's row count ("rows 112/112 · ..."): drawn once the table is loaded in the task screen
    markers = {name: f"/{len(load_task(folder).table):,} " for name, folder in tasks.items()}
    here = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tui"))
    trees = {"this tree": here, **({"base": os.path.abspath(args.base_tui)} if args.base_tui else {})}
    # as installed: bytecode cached (PYTHONDONTWRITEBYTECODE made each start compile 460 modules, 0.5 s),
    # in a folder of its own, so the trees compared are not written into
    env0 = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TEXTUAL_DRIVER", "PYTHONDONTWRITEBYTECODE")}
    env0["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "accuscope-bench-pycache")
    runs = {}
    for tree, tui in trees.items():
        for name, folder in tasks.items():
            cmd = [sys.executable, "-P", "-m", "accuscope.cli", "--workspace", str(root / "ws"), "open", str(folder)]
            runs[(tree, name)] = (cmd, {**env0, "PYTHONPATH": tui, "TERM": "xterm-256color"}, markers[name])
    for cmd, env, marker in runs.values():  # byte-compile and warm the page cache
        first_frame(cmd, env, marker)
    times: dict = {(k, busy): [] for k in runs for busy in (False, True)}
    for _ in range(args.rounds):
        for busy in (False, True):
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                for key, (cmd, env, marker) in runs.items():
                    times[(key, busy)].append(first_frame(cmd, env, marker))
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
    print(f"first frame at 80x24, whole process (`accuscope open`), {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; medians of {args.rounds} alternating rounds (target {FRAME_TARGET:.0f} s)")
    for (tree, name), _ in runs.items():
        quiet, busy = (statistics.median(times[((tree, name), b)]) for b in (False, True))
        print(f"  {tree:10s} {name:12s} {quiet:5.2f} s, with a core kept busy {busy:5.2f} s")
    if args.base_tui:
        for name in tasks:
            for busy in (False, True):
                r = statistics.median(b / t for b, t in zip(times[(("base", name), busy)], times[(("this tree", name), busy)]))
                print(f"  base / this tree, {name}{', a core busy' if busy else ''}: {r:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=0.25)
    ap.add_argument("--dir", default="/tmp/accuscope-bench-app")
    ap.add_argument("--first-frame", action="store_true", help="time process start to the first frame instead")
    ap.add_argument("--rows", type=int, default=1_000_000, help="--first-frame: rows of the large task")
    ap.add_argument("--rounds", type=int, default=5, help="--first-frame: alternating rounds")
    ap.add_argument("--base-tui", help="--first-frame: another checkout's tui folder, timed in the same rounds")
    args = ap.parse_args()
    if args.first_frame:
        first_frames(args)
        return
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
