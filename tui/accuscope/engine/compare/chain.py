"""A chain of sides: one reference, candidates in pipeline order (ONNX -> top -> tpu -> bmodel; fp32 ->
ORT-optimised -> fp16) or as versions (a baseline release and a new one), judged as one.

Nothing here compares tensors: a chain is today's pair comparisons (tasks/chainrun.py runs them into
sub-tasks of the chain task), each stage against the reference and against the stage before, and this
module reads their judged tables (`judgement.evaluate`, `judgement.verdict`: the only calls into the
judgement, kept in `row_state` and `_verdict`) to say:

- **where the error enters**: the first stage, in pipeline order, holding a row that
  1. fails against the reference (the judgement's `fail`: thresholds, NaN/inf, noise rules),
  2. fails its own step too, against the stage before (the step's table; the first stage's step is its
     comparison with the reference itself), and
  3. has an error (`expected.error`: max(1 - cos, red)) against the reference beyond EXCESS_LIMIT
     (expected.py's factor) times the error the stage before already had there, and beyond the noise
     the stage's own precision allows (PRECISION_NOISE by its dtype, at least expected.FLOOR): the
     error carried in from earlier stages is that stage's expected error, as the third side's is;
  the op named is that stage's earliest such row in execution order. Only a chain that does not pass
  names an entry (a passing chain names no stage; one whose verdict is unknown, its outputs not known,
  may); where it fails and no step shows its own error (a
  drift that grows a little at every stage), the entry is the first failing stage's first failing
  row, marked `own` False.
- **regressions** (versions: `baseline` names the previous release, the last other candidate is the
  new one): the ops whose error against the reference grew beyond EXCESS_LIMIT times the baseline's,
  above the run-to-run noise (the larger of expected.SIGNIFICANT and the precision's noise), worst
  (largest growth) first; improvements the other way round.

The chain's verdict: without a baseline, "fail" when any stage fails against the reference, else
"unknown" when any is unknown, else "pass"; with one, the new release's verdict, "fail" also when an
op regressed. `--fail-on-error` exits 1 exactly when it is not a pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.expected import EXCESS_LIMIT, FLOOR, SIGNIFICANT, error
from accuscope.engine.compare.results import ResultTable

if TYPE_CHECKING:
    from accuscope.engine.compare.judgement import Basis, RowState, Verdict
    from accuscope.engine.compare.thresholds import Thresholds

# the error a tensor of this dtype carries by rounding alone (its unit roundoff; an int8 step of a
# symmetric scale is 1/127 of the range): below it an error is the precision's, not a stage's fault
PRECISION_NOISE = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "int8": 2.0 ** -7, "uint8": 2.0 ** -8,
                   "int4": 2.0 ** -3}


@dataclass(frozen=True)
class StageTables:
    """One candidate of the chain, compared: `table` against the reference, `step` against the stage
    before (`before`: its label; the previous stage in a pipeline, the baseline for the new release;
    "" for the first stage, whose step is `table` itself). `step` is None where no step was run."""

    label: str
    table: ResultTable
    basis: Basis | None = None
    step: ResultTable | None = None
    before: str = ""


@dataclass(frozen=True)
class Entry:
    """Where the error enters: the stage, the op and tensor (the stage's names), its error against the
    reference there and at the stage before (`previous`: that stage's label, "" for the reference)."""

    stage: str
    op: str
    tensor: str
    row: int  # in the stage's table against the reference
    cos: float
    red: float
    previous: str
    previous_cos: float  # NaN where the stage before has no such row; 1 for the reference itself
    previous_red: float  # 0 for the reference itself
    own: bool = True  # its own step shows it; False: the first failing row of a drift no step shows alone

    def line(self) -> str:
        """`enters at bmodel: LayerNorm_12, cos 0.77 against tpu's 0.9999` (red, the relative euclidean
        distance, where it says more than cos: a scale gone wrong keeps the direction)."""
        before = "the reference" if not self.previous else f"{self.previous}'s"
        by_red = not (1.0 - self.cos >= self.red) and self.red == self.red
        now = f"red {_num(self.red)}" if by_red else f"cos {_cos(self.cos)}"
        prev = _num(self.previous_red) if by_red else "1" if not self.previous else _cos(self.previous_cos)
        how = "" if self.own else " (no stage's own step breaks the thresholds: the error grew over the stages)"
        return f"enters at {self.stage}: {self.op}, {now} against {before} {prev}{how}"

    def to_dict(self) -> dict:
        return {"stage": self.stage, "op": self.op, "tensor": self.tensor, "cos": _json(self.cos),
                "red": _json(self.red), "previous": self.previous or None, "previous_cos": _json(self.previous_cos),
                "previous_red": _json(self.previous_red), "own": self.own}


@dataclass(frozen=True)
class Change:
    """An op whose error against the reference changed between the baseline and the new release."""

    op: str
    tensor: str
    baseline: float  # the error (max(1 - cos, red)) in the baseline
    now: float  # and in the new release

    def to_dict(self) -> dict:
        return {"op": self.op, "tensor": self.tensor, "baseline": _json(self.baseline), "now": _json(self.now)}


@dataclass(frozen=True)
class StageJudgement:
    """One stage's part: its verdict against the reference, its failing rows, the rows its own step
    adds beyond the noise (`own`: rows of its table against the reference)."""

    label: str
    verdict: Verdict
    failing: int
    own: tuple[int, ...]
    before: str = ""  # the stage its step is against ("": the reference)


@dataclass(frozen=True)
class ChainJudgement:
    outcome: str  # pass, fail, unknown
    stages: tuple[StageJudgement, ...]
    entered: Entry | None
    baseline: str | None = None
    now: str | None = None
    regressions: tuple[Change, ...] = field(default_factory=tuple)
    improvements: tuple[Change, ...] = field(default_factory=tuple)

    def line(self) -> str:
        """The chain's verdict in one line: `fail: enters at tpu: ...`, `pass: all 3 stages meet ...`."""
        if self.baseline is not None:
            if self.regressions:
                worst = self.regressions[0]
                head = (f"{len(self.regressions):,} op{'s' * (len(self.regressions) != 1)} regressed from "
                        f"{self.baseline} to {self.now} (worst: {worst.op}, error {_num(worst.baseline)} -> "
                        f"{_num(worst.now)})")
                if self.entered is not None and self.entered.op != worst.op:
                    head += f"; it {self.entered.line()}"
            else:
                head = f"no op regressed from {self.baseline} to {self.now}"
            better = f"; {len(self.improvements):,} got better" if self.improvements else ""
            return f"{self.outcome}: {head}{better}"
        if self.entered is not None:
            return f"{self.outcome}: {self.entered.line()}"
        n = len(self.stages)
        if self.outcome == "pass":
            return f"pass: {'all ' if n > 1 else ''}{n} stage{'s' * (n != 1)} meet the thresholds; no error enters"
        return f"{self.outcome}: " + "; ".join(f"{s.label} {s.verdict.outcome}" for s in self.stages)


def judge_chain(stages: list[StageTables], thresholds: Thresholds, baseline: str | None = None) -> ChainJudgement:
    """The chain's judgement (see the module's text). `baseline`: the label of the previous release
    among `stages` (a version comparison), None for a pipeline."""
    keyed = [row_keys(s.table) for s in stages]
    states = [row_state(s.table, thresholds) for s in stages]
    verdicts = [_verdict(s.table, thresholds, s.basis) for s in stages]
    labels = [s.label for s in stages]
    judged, entry = [], None
    for k, s in enumerate(stages):
        b = labels.index(s.before) if s.before in labels else None
        own = _own_rows(s, stages[b] if b is not None else None, keyed[b] if b is not None else None, states[k],
                        thresholds)
        judged.append(StageJudgement(s.label, verdicts[k], int(states[k].fail.sum()), tuple(own), s.before))
    if baseline is not None:
        b = labels.index(baseline)
        n = max(k for k in range(len(stages)) if k != b)
        regressions, improvements = _changes(stages[b].table, stages[n].table, keyed[b], states[n])
        outcome = "fail" if regressions else verdicts[n].outcome
        if outcome != "pass":
            entry = _entry(stages, judged, states, keyed, only=n)
        return ChainJudgement(outcome, tuple(judged), entry, baseline, labels[n], tuple(regressions),
                              tuple(improvements))
    outcomes = {v.outcome for v in verdicts}
    outcome = "fail" if "fail" in outcomes else "unknown" if "unknown" in outcomes or not verdicts else "pass"
    if outcome != "pass":
        entry = _entry(stages, judged, states, keyed)
    return ChainJudgement(outcome, tuple(judged), entry)


def row_state(table: ResultTable, thresholds: Thresholds) -> RowState:
    """The judgement of one stage's table (judgement.evaluate): what chain.py and chainview.py read."""
    return judgement.evaluate(table, thresholds)


def _verdict(table: ResultTable, thresholds: Thresholds, basis: Basis | None) -> Verdict:
    return judgement.verdict(table, thresholds, basis)


def entered_rows(stages: list[StageTables], judged: ChainJudgement, k: int) -> list[str]:
    """Per row of stage k's table against the reference: the label of the first stage whose own step adds
    that row's error (the same reference op and tensor: row_key), "" where none does."""
    first: dict[str, str] = {}
    for s, sj in zip(stages, judged.stages):
        for r in sj.own:
            first.setdefault(row_key_of(s.table, r), s.label)
    table = stages[k].table
    return [first.get(row_key_of(table, r), "") for r in range(len(table))]


def failing_count(table: ResultTable, thresholds: Thresholds) -> int:
    """How many of the table's rows fail (the judgement's `fail`)."""
    return int(row_state(table, thresholds).fail.sum())


def failing_ops(table: ResultTable, thresholds: Thresholds) -> list[str]:
    """The ops of the table's failing rows, in execution order, each once: those a step compares."""
    c = table.columns
    rows = np.flatnonzero(row_state(table, thresholds).fail)
    return list(dict.fromkeys(str(c["npu_op"][r]) for r in sorted(rows, key=lambda r: int(c["index"][r]))))


def row_key(golden_op: str, tensor: str, npu_op: str) -> str:
    """What a row stands for across the stages' tables against one reference: the reference's op and the
    tensor's place on it (`:output:0`), whatever each stage calls its own op."""
    return golden_op + (tensor[len(npu_op):] if tensor.startswith(npu_op) else "")


def row_keys(table: ResultTable) -> dict[str, int]:
    """Row key (row_key) -> the first row holding it, over the rows paired with the reference."""
    c = table.columns
    out: dict[str, int] = {}
    for r in range(len(table)):
        g = str(c["golden_op"][r])
        if g and g != "*":
            out.setdefault(row_key(g, str(c["tensor"][r]), str(c["npu_op"][r])), r)
    return out


def row_key_of(table: ResultTable, r: int) -> str:
    """Row r's key (row_key), whatever it was paired with."""
    c = table.columns
    return row_key(str(c["golden_op"][r]), str(c["tensor"][r]), str(c["npu_op"][r]))


def _errors(table: ResultTable) -> np.ndarray:
    return np.asarray(error(table.numbers("cos"), table.numbers("red")), dtype=np.float64)


def noise_of(dtype: str) -> float:
    """The error a tensor of `dtype` carries by its precision alone (PRECISION_NOISE; FLOOR for fp32)."""
    return max(PRECISION_NOISE.get(str(dtype).lower().replace("torch.", ""), FLOOR), FLOOR)


def _own_rows(stage: StageTables, before: StageTables | None, before_keys: dict[str, int] | None,
              state: RowState, thresholds: Thresholds) -> list[int]:
    """Rows of `stage`'s table against the reference that its own step adds (see the module's text),
    in execution order."""
    table = stage.table
    rows = np.flatnonzero(state.fail)
    if not len(rows):
        return []
    errs = _errors(table)
    step_fail: dict[str, bool] | None = None
    if before is not None and stage.step is not None:
        step_state = row_state(stage.step, thresholds)
        tensors = stage.step.columns["tensor"]
        step_fail = {}
        for r in range(len(stage.step)):
            step_fail[str(tensors[r])] = step_fail.get(str(tensors[r]), False) or bool(step_state.fail[r])
    prev_errs = _errors(before.table) if before is not None else None
    own = []
    for r in rows.tolist():
        carried = 0.0
        if before is not None and before_keys is not None and prev_errs is not None:
            p = before_keys.get(row_key_of(table, r))
            carried = float(prev_errs[p]) if p is not None else np.nan
            if step_fail is not None and not step_fail.get(str(table.columns["tensor"][r]), False):
                continue  # its step against the stage before holds: the error came with its input
        limit = max(EXCESS_LIMIT * carried if carried == carried else 0.0, noise_of(table.columns["npu_dtype"][r]))
        if errs[r] > limit or np.isnan(errs[r]):  # NaN: a NaN/inf row, failing by the judgement's rule
            own.append(r)
    order = table.columns["index"]
    return sorted(own, key=lambda r: int(order[r]))


def _entry(stages: list[StageTables], judged: list[StageJudgement], states: list[RowState],
           keyed: list[dict[str, int]], only: int | None = None) -> Entry | None:
    """The first stage with rows of its own (see the module's text), else the first failing stage's first
    failing row (own False); `only`: that stage alone (a new release against its baseline)."""
    order = [only] if only is not None else range(len(stages))
    for k in order:
        if judged[k].own:
            return _entry_at(stages, keyed, k, judged[k].own[0], True)
    for k in order:
        first = states[k].first_failing
        if first is not None:
            return _entry_at(stages, keyed, k, first, False)
    return None


def _entry_at(stages: list[StageTables], keyed: list[dict[str, int]], k: int, r: int, own: bool) -> Entry:
    table = stages[k].table
    c = table.columns
    previous, prev_cos, prev_red = "", 1.0, 0.0
    labels = [s.label for s in stages]
    if stages[k].before in labels:
        b = labels.index(stages[k].before)
        before = stages[b]
        p = keyed[b].get(row_key_of(table, r))
        previous = before.label
        prev_cos, prev_red = (float(before.table.numbers("cos")[p]), float(before.table.numbers("red")[p])) \
            if p is not None else (np.nan, np.nan)
    return Entry(stages[k].label, str(c["npu_op"][r]), str(c["tensor"][r]), r, float(table.numbers("cos")[r]),
                 float(table.numbers("red")[r]), previous, prev_cos, prev_red, own)


def _changes(base: ResultTable, now: ResultTable, base_keys: dict[str, int],
             now_state: RowState) -> tuple[list[Change], list[Change]]:
    """Ops whose error grew (regressions) or shrank (improvements) between the releases beyond
    EXCESS_LIMIT times, above the run-to-run noise; each list worst (largest ratio, to two digits) first,
    then in execution order. Output rows only (an op's input row is its producer's output)."""
    eb, en = _errors(base), _errors(now)
    grown: list[tuple[float, int, Change]] = []
    better: list[tuple[float, int, Change]] = []
    c = now.columns
    for r in range(len(now)):
        if now_state.exempt[r] or str(c["io"][r]).startswith("input"):  # an input row: its producer's output
            continue
        b = base_keys.get(row_key_of(now, r))
        if b is None or np.isnan(en[r]) or np.isnan(eb[b]):
            continue
        noise = max(SIGNIFICANT, noise_of(c["npu_dtype"][r]), noise_of(base.columns["npu_dtype"][b]))
        was, is_ = float(eb[b]), float(en[r])
        change = Change(str(c["npu_op"][r]), str(c["tensor"][r]), was, is_)
        order = int(c["index"][r])
        if is_ >= noise and is_ > EXCESS_LIMIT * max(was, FLOOR):
            grown.append((-_rounded(is_ / max(was, FLOOR)), order, change))
        elif was >= noise and was > EXCESS_LIMIT * max(is_, FLOOR):
            better.append((-_rounded(was / max(is_, FLOOR)), order, change))
    return ([t[2] for t in sorted(grown, key=lambda t: t[:2])], [t[2] for t in sorted(better, key=lambda t: t[:2])])


def _rounded(ratio: float) -> float:
    """A growth to two significant digits: an error carried on unchanged from the op that made it grows by
    the same ratio, and then the op that made it (earlier in execution order) comes first."""
    return float(f"{ratio:.2g}")


def _num(x: float) -> str:
    return "nan" if x != x else f"{x:.4g}"


def _cos(x: float) -> str:
    return "nan" if x != x else f"{x:.4f}"


def _json(x: float) -> float | None:
    return None if x != x or x in (float("inf"), float("-inf")) else float(x)
