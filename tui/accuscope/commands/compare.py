"""`accuscope compare --npu PATH --golden PATH --out TASK_DIR`: whole-network comparison as a task."""
# lazy: app.main, commands.advise, commands.chainreport, engine.compare.shards, engine.diagnose.advisor,
# lazy: engine.tasks.rankrun
from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from ..engine.compare.inputs import build_spec, inputs
from ..engine.compare.judgement import Basis
from ..engine.compare.metrics import compiled_kernel
from ..engine.compare.pair import DEVICE_ONLY
from ..engine.compare.spec import CompareSpec
from ..engine.compare.summary import summarize
from ..engine.sides.registry import detect
from ..engine.sources.inputfile import shared_listings
from ..engine.sources.tensor import SourceError
from ..engine.tasks.taskrun import RunResult, ranked, run_comparison
from ..exitcode import ExitCode
from .answers import ranks_json, result_json
from .common import (
    add_inputs,
    add_source_options,
    err,
    out,
    said_verdict,
    show,
    verdict_exit,
    verdict_markup,
)


def register(p) -> None:
    p.description = ("Compare every tensor of the side under test (--npu) with its counterpart on "
                     "the reference side (--golden) and write a task folder (task.json, "
                     "MindStudio-compatible result CSV, fast typed copy). Either side may be any "
                     "source accuscope reads: an Ascend dump, an npy folder, .npz, Polygraphy JSON, "
                     "raw .bin. Exit 0: it ran; 1: with --fail-on-error, the verdict is not a pass "
                     "(it fails, or it is unknown: no network output compared, an unreadable input); "
                     "2: unusable input (including: nothing paired), an --out that cannot hold the task, "
                     "or the task is running; 3: a bug in accuscope; 130: cancelled (Ctrl+C or "
                     "SIGTERM; the previous result is kept).")
    p.add_argument("source", nargs="?", help="one file holding both sides: a Polygraphy JSON with two runners "
                                             "(the second is compared against the first), a tpu-mlir "
                                             "{name}_actual/_desired npz")
    add_inputs(p, "sides", optional=("npu", "golden"), repeated=("npu",))  # or one SOURCE holding both
    p.epilog = ("A chain of stages: --npu given several times, each LABEL=PATH or PATH, in pipeline order "
                "(--npu top=top_outputs.npz --npu tpu=tpu_outputs.npz --npu bmodel=model_outputs.npz), or a "
                "tpu-mlir work folder alone: each stage is compared with the reference and with the stage before, "
                "and the verdict names the stage and the op where the error enters (docs/chain.md).")
    add_comparison_options(p)
    p.add_argument("--tui", action="store_true", help="run inside the app: rows appear as they are compared")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="compare the ranks on Dask: tcp://HOST:8786 (a running `dask scheduler`; each rank runs "
                        "on a worker that sees its folders) or local:N (N worker processes here); "
                        "needs accuscope[cluster]")
    add_source_options(p)
    p.set_defaults(handler=run)


def add_comparison_options(p) -> None:
    """How a comparison is run and judged: the options of `compare` and `run`."""
    add_inputs(p, "judging")
    p.add_argument("--fail-on-error", action="store_true",
                   help="exit 1 when the verdict is not a pass: it fails, or it is unknown")
    p.add_argument("--workers", type=int, help="processes comparing pairs (default: all cores)")
    p.add_argument("--advisor", action="store_true", help="after the run, advise on it (as `accuscope advise`)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (the summary goes to stderr)")
    p.add_argument("--baseline", metavar="LABEL|PATH",
                   help="a chain of versions: the candidate that is the previous release (its label or path); the "
                        "ops whose error grew from it to the new one (the last other candidate) are named as "
                        "regressions (docs/chain.md)")


def spec_of(args, npu: str | None = None) -> CompareSpec:
    """The comparison `args` ask for; `npu`: the side under test, where --npu named a chain (its own stage)."""
    values = {i.name: getattr(args, i.name) for i in inputs("sides", "judging", "source")}
    values["npu"], values["golden"] = npu or _one(args.npu) or args.source, args.golden or args.source
    if not values["npu"] or not values["golden"]:
        raise SourceError("give both sides: --npu PATH --golden PATH (or one file holding both, such as a "
                          "Polygraphy JSON with two runners)")
    try:
        return build_spec(values)
    except SourceError:  # a side that cannot be read (one SOURCE holding both sides): it names itself
        raise
    except ValueError as exc:
        raise SourceError(f"--threshold: {exc}") from None


def _one(npu: list[str] | str | None) -> str | None:
    """The one side --npu names (the last, where it was given several times outside a chain)."""
    if isinstance(npu, list):
        return npu[-1] if npu else None
    return npu or None


def preflight(spec: CompareSpec) -> None:
    """What can be checked in a moment before the app opens: both sides and the models are there and
    readable as what they claim to be."""
    for flag, path in (("--npu", spec.npu), ("--golden", spec.golden)):
        fmt = detect(path)
        if fmt.is_model:
            raise SourceError(f"{flag} {path}: is a model ({fmt.what}), not dumped tensors")
    for flag, given in (("--model", spec.model), ("--npu-model", spec.npu_model),
                       ("--golden-model", spec.golden_model), ("--mapping", spec.mapping),
                       ("--custom-algorithms", spec.custom_dir)):
        if given and not os.path.exists(given):
            raise SourceError(f"{flag} {given}: no such file or folder")


def swapped_hint(spec: CompareSpec) -> str:
    """A device dump given as the reference and a framework dump as the side under test: say so."""
    try:
        npu, golden = detect(spec.npu), detect(spec.golden)
    except SourceError:
        return ""
    if golden.caps.device_dump and not npu.caps.device_dump:
        return (f"--golden is a device ({golden.kind}) dump and --npu a {npu.kind} source: swapped? the usual order is "
                f"--npu {spec.golden} --golden {spec.npu}")
    return ""


def run(args) -> int:
    from .chainreport import chain_of, compare_chain_and_report
    listings = ExitStack()  # the work-folder check and the format sniffs list the --npu folder once between them
    listings.enter_context(shared_listings())
    try:
        chain = chain_of(args.npu, args.baseline)
        spec = spec_of(args) if chain is None else None
        if chain is not None or args.tui:
            listings.close()
    except BaseException:
        listings.close()
        raise
    if chain is not None:
        if args.tui or args.cluster or args.source:
            raise SourceError("a chain of stages (--npu given several times, --baseline, a tpu-mlir work folder) "
                              "runs without --tui, --cluster or a SOURCE: run it, then open the task")
        return compare_chain_and_report(spec_of(args, chain.stages[-1].path), chain, args, advise_if_asked)
    assert spec is not None
    if args.cluster and args.tui:
        raise SourceError("--tui does not run on a cluster: run it without --tui, then open the task with "
                          f"`accuscope open {args.out}`")
    if args.tui:
        if not ranked(spec, one_source=bool(args.source)):
            preflight(spec)
        from ..app.main import run as run_app
        return run_app(str(Path(args.out).parent), compare=(spec, args.out))
    return compare_and_report(spec, args, warn_swapped=True, listings=listings)


def compare_and_report(spec: CompareSpec, args, warn_swapped: bool = False,
                       listings: ExitStack | None = None) -> int:
    """Run the comparison into args.out (taskrun.run_comparison, which picks the path), print what it
    did, advise if asked. With --json the summary goes to stderr and one JSON object (see
    `result_json`) to stdout. `warn_swapped`: say when the sides look swapped (`swapped_hint`).
    `listings`: the caller's shared_listings block, closed here once the sniffs are done."""
    one_source = bool(getattr(args, "source", None))
    with listings or ExitStack(), shared_listings():  # the rank search and the format sniffs list each
        rank_run = ranked(spec, getattr(args, "cluster", None), one_source)  # side's folder once between them
        hint = swapped_hint(spec) if warn_swapped and not rank_run else ""
    if rank_run:
        return compare_ranks_and_report(spec, args, one_source)
    if hint:
        err.print(f"[yellow]warning:[/] {show(hint)}", soft_wrap=True)
    return _compare_one_and_report(spec, args, one_source)


def _compare_one_and_report(spec: CompareSpec, args, one_source: bool) -> int:
    """One comparison, with a progress bar."""
    say = err.print if args.json else out.print
    cancel = threading.Event()
    bar = _progress_bar()
    bar_task = bar.add_task("", total=None) if bar is not None else None

    def planned(plan):
        say(f"{show(plan.npu.kind)} {show(spec.npu)} against {show(plan.golden.kind)} "
                  f"{show(spec.golden)}", soft_wrap=True)
        if spec.shards:  # shards.py (msprobe, YAML) only when asked for
            from ..engine.compare.shards import merged_line
            for role, side in (("NPU", plan.npu), ("golden", plan.golden)):
                if merged_line(side):
                    say(f"{role} side: {show(merged_line(side))}", soft_wrap=True)
        say(plan.coverage.line(len(plan.npu.ops)), soft_wrap=True)
        if bar is not None:
            bar.update(bar_task, total=plan.coverage.npu_paired)
            bar.start()

    def progress(p):
        if bar is not None:
            bar.update(bar_task, completed=p.done, description=show(p.what[-40:]))

    try:
        result = run_comparison(spec, args.out, workers=args.workers, cancel=cancel, one_source=one_source,
                                planned=planned, progress=progress, by_rank=False)
        assert isinstance(result, RunResult)
    except KeyboardInterrupt:
        cancel.set()
        if bar is not None:
            bar.stop()  # first: "cancelled" on a line of its own, not after the bar's
        say("\ncancelled: the previous result in the task folder, if any, is untouched")
        return ExitCode.INTERRUPTED
    finally:
        if bar is not None:
            bar.stop()
    compared = result.compared
    if compared is None:
        say("\ncancelled: the previous result in the task folder, if any, is untouched")
        return ExitCode.INTERRUPTED
    plan, table = compared
    summary = summarize(table, spec.thresholds, plan.coverage.basis)
    own = f" ({summary.device_only:,} the conversion's own ops)" if summary.device_only else ""
    say(f"rows {len(table):,} · failing {summary.failing:,} · not compared {summary.not_compared:,}{own} · "
              f"problems {len(plan.problems)} · open {show(args.out)}", soft_wrap=True)  # a path never broken
    say(verdict_markup(summary.verdict, table), soft_wrap=True)
    if summary.judged:
        say(show(summary.judged), soft_wrap=True)
    if summary.first_failing is not None:
        first = table.row(summary.first_failing)
        kind = f" ({show(first['type'])})" if first["type"] else ""  # a dump of npy files names no op type
        say(f"first failing: [bold]{show(first['tensor'])}[/]{kind} {show('; '.join(summary.broken))}", soft_wrap=True)
    warnings = plan.coverage.warnings
    for note in plan.coverage.notes:
        say(f"note: {show(note)}", soft_wrap=True)
    for w in warnings:
        say(f"[bold yellow]⚠ warning:[/] {show(w)}: the verdict covers only what was paired", soft_wrap=True)
    for p in plan.problems[:10]:
        say(f"  [red]✗[/] {show(str(p))}", soft_wrap=True)
    if len(plan.problems) > 10:
        say(f"  … {len(plan.problems) - 10} more problems (task.json lists them all)")
    unpaired = [p for p in plan.pairs if p.golden is None and p.ground_truth != DEVICE_ONLY]
    if unpaired:
        names = ", ".join(p.npu.name for p in unpaired[:5])
        more = f" … and {len(unpaired) - 5} more (the table's `x` rows, task.json)" if len(unpaired) > 5 else ""
        say(f"  unpaired NPU tensors: {show(names)}{show(more)}", soft_wrap=True)
    repaired = plan.coverage.repaired
    if repaired:
        say(f"re-paired {len(repaired):,} NPU tensors to the golden tensor their fused op's output stands for "
            "(identity paired a tensor before the fused ops; both cosines):", soft_wrap=True)
        for r in repaired[:10]:
            say(f"  {show(r.text())}", soft_wrap=True)
        if len(repaired) > 10:
            say(f"  … {len(repaired) - 10} more (task.json: coverage.repaired)")
    unused = plan.coverage.golden_unused
    if unused:
        reasons = Counter(why for _, why in unused)
        say(f"  unused golden tensors {len(unused):,}: " + "; ".join(f"{n:,} {show(why)}" for why, n in
                                                                           reasons.most_common()), soft_wrap=True)
    part, seconds = result.slowest
    say(f"took {sum(result.timings.values()):.1f} s (slowest part: {part} {seconds:.1f} s)")
    if not compiled_kernel():
        if os.environ.get("ACCUSCOPE_KERNEL") == "numpy":
            say("metrics ran on the numpy fallback, as ACCUSCOPE_KERNEL=numpy asks")
        else:
            say("[yellow]metrics ran on the numpy fallback[/] (the compiled kernel is not built); "
                      "reinstall accuscope where a C compiler is present for 2-3x faster comparisons")
    advice = advise_if_asked(args)
    if args.json:
        sys.stdout.write(json.dumps(result_json(args.out, plan, summary, table, advice), indent=1,
                                    ensure_ascii=False) + "\n")
    return verdict_exit(summary, args.fail_on_error)


def _progress_bar():
    """The progress bar on stderr when it is a terminal; None where it is not (a pipe, a log: a
    transient bar would draw nothing there), and then rich.progress is not imported either."""
    if not err.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    return Progress(TextColumn("comparing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    TextColumn("{task.description}"), console=err.console, transient=True)


def advise_if_asked(args):
    """--advisor: the advice on the task just written (printed unless --json); None without it."""
    if not args.advisor:
        return None
    from ..engine.diagnose.advisor import advise
    from .advise import print_advice
    advice = advise(args.out, workers=args.workers)
    assert advice is not None  # None only when cancelled, and no cancel event is passed
    if not args.json:
        print_advice(advice)
    return advice


def ranks_summary(spec: CompareSpec, run):
    """The judgement of a multi-rank run (rankrun.RanksRun); None for a columnar task (too large for one
    table). SourceError when no rank could be compared."""
    if not any(r["state"] == "done" for r in run.results.values()):
        first: dict = next(iter(run.results.values()), {})
        raise SourceError(f"{spec.npu}: no rank could be compared ({first.get('rel', '')}: {first.get('error', '')})")
    return summarize(run.table, spec.thresholds, Basis.from_coverage(run.coverage)) if run.table is not None else None


def compare_ranks_and_report(spec: CompareSpec, args, one_source: bool = False) -> int:
    """A multi-rank comparison: one line per rank as it lands, then the totals (see rankrun)."""
    say = err.print if args.json else out.print
    cancel = threading.Event()

    def planned(run):
        again = f", {len(run.resumed)} already compared (resumed)" if run.resumed else ""
        say(f"{len(run.leaves)} rank{'s' * (len(run.leaves) != 1)} of {show(spec.npu)} against {show(spec.golden)} on {show(run.where)}{again}",
            soft_wrap=True)
        for p in run.problems:
            say(f"  [red]✗[/] {show(p)}", soft_wrap=True)

    def landed(r):
        where = f" on {show(r.worker)}" if r.worker else ""
        if r.table is not None:
            failing = int(r.table.columns["fail"].sum())
            say(f"  {show(r.rank.label)}: {len(r.table):,} rows, {failing:,} failing{where} ({r.seconds:.1f} s)")
            for note in (r.coverage or {}).get("notes", []):  # pairing across implementations: what it could not map
                say(f"    note: {show(note)}", soft_wrap=True)
        else:
            say(f"  [red]✗[/] {show(r.rank.label)}: {r.state}: {show(r.error)}", soft_wrap=True)

    from ..engine.tasks.rankrun import RanksRun
    try:
        run = run_comparison(spec, args.out, workers=args.workers, cancel=cancel, cluster=args.cluster,
                             one_source=one_source, ranks_planned=planned, rank_done=landed, by_rank=True)
        assert isinstance(run, RanksRun)
    except KeyboardInterrupt:
        cancel.set()
        say("\ncancelled: the ranks already compared are kept; re-run to resume")
        return ExitCode.INTERRUPTED
    summary = ranks_summary(spec, run)
    done = [r for r in run.results.values() if r["state"] == "done"]
    not_done = len(run.results) - len(done)
    say(f"ranks {len(run.results)} · compared {len(done)} · not compared {not_done} · rows {run.rows:,} · "
        f"failing {run.failing:,} · open {show(args.out)}" + (" (columnar)" if run.table is None else ""), soft_wrap=True)
    if not_done:
        say(f"[bold yellow]⚠ warning:[/] {not_done} ranks not compared: re-run the same command to compare them "
            "(finished ranks are kept)", soft_wrap=True)
    if summary is not None:
        say(verdict_markup(summary.verdict, run.table), soft_wrap=True)
        if summary.judged:
            say(show(summary.judged), soft_wrap=True)
    else:
        say(said_verdict(*run.verdict), soft_wrap=True)
    advice = advise_if_asked(args)
    if args.json:
        sys.stdout.write(json.dumps(ranks_json(args.out, run, summary, advice), indent=1, ensure_ascii=False) + "\n")
    if summary is None:  # a columnar task (too large for one table): the verdict of its ranks, each judged alone
        return ExitCode.FINDINGS if args.fail_on_error and run.verdict[0] != "pass" else ExitCode.OK
    return verdict_exit(summary, args.fail_on_error)
