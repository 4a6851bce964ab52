"""`accuscope compare --npu PATH --golden PATH --out TASK_DIR`: whole-network comparison as a task."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..engine import compare as engine
from ..engine.metrics import compiled_kernel
from ..engine.taskrun import run_task
from ..engine.thresholds import Thresholds, parse_assignment
from ..engine.tensor import SourceError
from .common import add_source_options, err, out

EXIT_OK, EXIT_FAILURES, EXIT_UNUSABLE = 0, 1, 2


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare an NPU dump with a golden dump, operator by operator",
                       description="Compare every NPU-side tensor with its golden tensor and write a task "
                                   "folder (task.json, MindStudio-compatible result CSV, fast typed copy). "
                                   "Exit 0: it ran; 1: with --fail-on-error, some row breaks a threshold; "
                                   "2: unusable input.")
    p.add_argument("--npu", required=True, help="Ascend dump file or folder (any level of the dump tree)")
    p.add_argument("--golden", required=True, help="npy folder, .npz, .bin or Polygraphy JSON")
    p.add_argument("--model", help="offline model JSON (atc --mode=1), ONNX or prototxt, for op mapping")
    p.add_argument("--out", required=True, help="task folder to write (a previous result there is replaced "
                                                "only once the new one is complete)")
    p.add_argument("--algorithms", type=_names, help="comma-separated metrics (short keys, CSV names or "
                                                     "plugin names); default: all, plugins included")
    p.add_argument("--range", dest="op_range", help="start,end,step over op sequence ids (end -1 = last)")
    p.add_argument("--ops", type=_names, help="comma-separated op names to compare")
    p.add_argument("--custom-algorithms", help="folder with algorithm/alg_<Name>.py metric plugins")
    p.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                   help="override a threshold, e.g. cos=0.98 (repeatable)")
    p.add_argument("--fail-on-error", action="store_true", help="exit 1 when any row breaks a threshold")
    p.add_argument("--workers", type=int, help="processes comparing pairs (default: all cores)")
    p.add_argument("--tui", action="store_true", help="run inside the app: rows appear as they are compared")
    p.add_argument("--advisor", action="store_true", help="after the run, advise on it (as `accuscope advise`)")
    add_source_options(p)
    p.set_defaults(handler=run)


def spec_of(args) -> engine.CompareSpec:
    thresholds = Thresholds()
    for text in args.threshold:
        try:
            thresholds.set(*parse_assignment(text))
        except ValueError as exc:
            raise SourceError(f"--threshold: {exc}") from None
    return engine.CompareSpec(args.npu, args.golden, args.model, args.algorithms, args.op_range, args.ops,
                              args.custom_algorithms, thresholds, args.pick, args.run, args.shape, args.dtype)


def run(args) -> int:
    spec = spec_of(args)
    if args.tui:
        from ..app.main import run as run_app
        run_app(str(Path(args.out).parent), compare=(spec, args.out))
        return EXIT_OK
    cancel = threading.Event()
    bar = Progress(TextColumn("comparing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   TextColumn("{task.description}"), console=err, transient=True)
    bar_task = bar.add_task("", total=None)

    def planned(plan):
        matched = sum(1 for p in plan.pairs if p.golden is not None)
        out.print(f"{len(plan.pairs):,} tensors of {len(plan.npu.files):,} ops; {matched:,} with a golden "
                  f"counterpart, {len(plan.pairs) - matched:,} without; {len(plan.unmatched_golden):,} golden "
                  f"tensors unused")
        bar.update(bar_task, total=matched)
        bar.start()

    try:
        result = run_task(spec, args.out, lambda p, _rows: bar.update(
            bar_task, completed=p.done, description=escape(p.current[-40:])), cancel, args.workers, planned)
    except KeyboardInterrupt:
        cancel.set()
        out.print("cancelled: the previous result in the task folder, if any, is untouched")
        return 130
    finally:
        bar.stop()
    table, plan = result.table, result.plan
    fails = np.flatnonzero(table.columns["fail"])
    out.print(f"rows {len(table):,} · failing {len(fails):,} · problems {len(plan.problems)} · "
              f"open {escape(args.out)}")
    if len(fails):
        first = table.row(int(fails[0]))
        broken = ", ".join(f"{k} {first[k]:.6g}" for k in ("cos", "red", "kl", "rmse", "mean_rel")
                           if k in first and isinstance(first[k], float) and not np.isnan(first[k]))
        out.print(f"first failing: [bold]{escape(first['tensor'])}[/] ({escape(first['type'])}) {broken}")
    for p in plan.problems[:10]:
        out.print(f"  [red]✗[/] {escape(str(p))}", soft_wrap=True)
    if len(plan.problems) > 10:
        out.print(f"  … {len(plan.problems) - 10} more problems (task.json lists them all)")
    part, seconds = result.slowest
    out.print(f"took {sum(result.timings.values()):.1f} s (slowest part: {part} {seconds:.1f} s)")
    if not compiled_kernel():
        out.print("[yellow]metrics ran on the numpy fallback[/] (the compiled kernel is not built); "
                  "reinstall accuscope where a C compiler is present for 2-3x faster comparisons")
    if args.advisor:
        from ..engine.advisor import advise
        from .advise import print_advice
        print_advice(advise(args.out, workers=args.workers))
    return EXIT_FAILURES if args.fail_on_error and len(fails) else EXIT_OK
