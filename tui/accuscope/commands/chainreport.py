"""A chain of stages from the command line (`compare --npu A=.. --npu B=..`, `run REF S1 S2 ...`,
`--baseline`): the stages named, the comparisons run (engine/tasks/chainrun.py), one line per
comparison, the chain's verdict, `--json`, and the exit code under `--fail-on-error`."""
from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import NamedTuple

from ..engine.compare.chain import failing_count
from ..engine.compare.summary import summarize
from ..engine.tasks.chainrun import Stage, baseline_label, is_chain, own_stage, parse_stages, run_chain
from ..exitcode import ExitCode
from .answers import chain_json, result_json
from .common import VERDICT_MARKS, err, out, show, verdict_markup


class Chain(NamedTuple):
    stages: list[Stage]
    baseline: str | None  # the baseline's label (a version comparison), None for a pipeline


def chain_of(npu: list[str] | str | None, baseline: str | None) -> Chain | None:
    """The chain `--npu` (given several times, labelled, or a tpu-mlir work folder) and `--baseline` name;
    None for one side under test, compared as ever."""
    values = [npu] if isinstance(npu, str) else list(npu or [])
    if not values or (len(values) == 1 and baseline is None and "=" not in values[0]
                      and not os.path.exists(values[0])):
        return None  # one side not on this host (a --cluster's workers hold it), or not at all: compared as ever
    stages = parse_stages(values)
    if not is_chain(stages, baseline) and stages[0].path == values[0]:
        return None
    return Chain(stages, baseline_label(stages, baseline))


def compare_chain_and_report(spec, chain: Chain, args, advise: Callable, reference: str | None = None) -> int:
    """Run the chain into args.out and say what it found: a line per comparison, each stage's verdict,
    the chain's verdict with the stage and op where the error enters (or the regressions); with
    --advisor, the advice from the stage where the error enters (`advise(args)`: compare.advise_if_asked;
    diagnose.chainadvice).
    `reference`: what to call the golden side (run: the reference model, not its dump)."""
    say = err.print if args.json else out.print
    say(f"a chain of {len(chain.stages)} stages against {show(reference or spec.golden)}: "
        + " -> ".join(show(s.label) for s in chain.stages)
        + (f" (baseline: {show(chain.baseline)})" if chain.baseline else ""), soft_wrap=True)
    cancel = threading.Event()

    def compared(label: str, against: str, result) -> None:
        table, plan = result.table, result.plan
        failing = failing_count(table, spec.thresholds)
        say(f"  {show(label)} against {show(against)}: rows {len(table):,} · failing {failing:,} · "
            f"paired {plan.coverage.npu_paired:,} of {plan.coverage.npu_total:,} "
            f"({sum(result.timings.values()):.1f} s)", soft_wrap=True)

    try:
        run = run_chain(spec, chain.stages, args.out, baseline=chain.baseline, workers=args.workers,
                        cancel=cancel, compared=compared)
    except KeyboardInterrupt:
        cancel.set()
        say("\ncancelled: the comparisons already made are kept; re-run to compare again")
        return ExitCode.INTERRUPTED
    j = run.judgement
    if j is None:
        say("\ncancelled: the comparisons already made are kept; re-run to compare again")
        return ExitCode.INTERRUPTED
    for s in j.stages:
        say(f"{show(s.label)}: {verdict_markup(s.verdict, run.against_reference[s.label].table)}", soft_wrap=True)
    for p in run.problems:
        say(f"  [yellow]⚠[/] {show(p)}", soft_wrap=True)
    say(f"[bold]chain[/] {VERDICT_MARKS[j.outcome]} {show(j.line())}", soft_wrap=True)
    for c in j.regressions[1:5]:
        say(f"  regressed: {show(c.op)} ({show(c.tensor)}), error {c.baseline:.4g} -> {c.now:.4g}", soft_wrap=True)
    say(f"open {show(args.out)} (the {show(own_stage(chain.stages, chain.baseline))} stage; the others under "
        f"stages/ and steps/)", soft_wrap=True)
    own = run.against_reference[own_stage(chain.stages, chain.baseline)].compared
    assert own is not None  # a judged chain compared every stage to its end (run_chain)
    advice = advise(args)
    if args.json:
        plan, table = own
        summary = summarize(table, spec.thresholds, plan.coverage.basis)
        doc = {**result_json(args.out, plan, summary, table, advice), **chain_json(run)}
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return ExitCode.FINDINGS if args.fail_on_error and j.outcome != "pass" else ExitCode.OK
