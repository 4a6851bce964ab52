"""The one judgement of a result table: which rows fail and why, which break only noise-prone
metrics, the first failing row, and the verdict on the network outputs (or on a training step).

Every surface reads it (`evaluate(table, thresholds)` builds it once per change of the table or the
thresholds; `apply` writes its fail and tpu_verdict columns): compare's summary and `--json`, `show`,
`advise`, the task screen and the browser, the report, the overlay, the graph badges, retest, precision
and sensitivity. None decides again. thresholds.py holds the user's thresholds as data; every rule that
reads them is here.

The rules, in order:
- a row breaks a threshold when its metric is past it (NaN never breaks one); msprobe's recorded
  rules (stat_mag, checksums, non-tensor values that differ), tpu-mlir's ladder (with
  `--tolerance`) and Polygraphy's rule (with `--atol`/`--rtol`: compare/polytol.py, NaN failing
  there, no noise) are thresholds too;
- a row whose NPU tensor holds more NaN/inf than its golden tensor fails whatever the metrics say;
- exempt rows never fail: layout-only ops, network inputs, device-only ops;
- **noise**: a row that breaks only relative-error metrics (`NOISY`: mean_rel, max_rel, acc_rel and
  the relative-error ratios) while its norm-relative error passes (red, or cos where red is not
  judged) is *noisy*, not failing. A relative error divides by each golden element: where golden
  values sit near zero (a probability of 6e-4, a mask, a cancelled gradient) it is large while the
  tensor as a whole agrees. That the norm-relative error passes is the evidence: the elements that
  blow the relative error up carry a negligible share of the tensor's magnitude (an absolute floor
  derived from the tensor's own scale). MindStudio and msit count such a row as failing; accuscope
  keeps the raw value in the CSV (msaccucmp's number) and reports it as noise;
- **noise at the scale of the computation** (compare/noisefloor.py): a failing row whose reference
  values sit at the noise floor of the operation that made them (a gradient zero in exact arithmetic,
  a cancellation) and whose error is within that floor is noisy too: judged against the floor, not
  against values that carry no signal;
- **the precision's own noise** (with a third side, `--expected`: compare/expected.py): a failing row
  whose error is at most twice what the reference at the candidate's precision gives is *expected*:
  it still fails (the user's thresholds say so), but the precision itself explains it; so is an
  overflow (NaN/inf) the reference at that precision shares;
- the first failing row is the earliest failing one in execution order (the `index` column), the
  earliest beyond its expected error when the third side says some are;
- the verdict is on the network outputs (the `is_output` rows that are not device-only and were
  compared): fail when one fails, pass when all pass, unknown when none was compared; a training
  step (msprobe) has no network output: it is judged on every compared row; judged as tpu-mlir's
  npz_tool (`--tolerance`), on every compared tensor, as npz_tool itself passes a comparison only when
  no tensor it compares is NOT_SIMILAR; so too as Polygraphy (`--atol`/`--rtol`), which judges every
  output its results hold. With a third side the verdict names its cause: "precision"
  when every failing output is expected, else "implementation";
- a pass needs every input read: a side's tensor that could not be read (truncated, corrupt) or a
  shard merged without the other side's shape leaves a row unjudged, so such a run is "unknown",
  never "pass" (`Basis.unread`); coverage notes (golden tensors unused, outputs fused away) never
  change the verdict: they are said beside it.

The verdict is the one value every surface reads: compare's summary and `--json`, the exit code
under `--fail-on-error` (1 exactly when the verdict is not "pass"), advise's first finding, the
report, the app's summary line and the overlay. `Basis` is what the verdict needs beyond the table
and the thresholds, read from the comparison's coverage (compare) or task.json's copy of it (every
other surface), so that all of them give the same answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare import noisefloor, polytol
from accuscope.engine.compare.columns import TPU_DEFAULTS
from accuscope.engine.compare.expected import SIGNIFICANT, error, within
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.statistics import MAGNITUDE, values_differ
from accuscope.engine.graphs.optypes import EXEMPT_TYPES

if TYPE_CHECKING:
    from accuscope.engine.compare.thresholds import Threshold, Thresholds

# relative error divides by each golden element: near-zero golden values make it large by themselves
NOISY = frozenset({"mean_rel", "max_rel", "acc_rel", "rel_0.1%", "rel_0.5%"})
# what says the tensor as a whole agrees: its error relative to its norm (red), else its direction (cos);
# msit's defaults where the user set no such threshold
WHOLE_LIMITS = {"red": 0.05, "cos": 0.99}


@dataclass(frozen=True, eq=False)
class RowState:
    """What the judgement says about every row of a table: masks over all rows, decided once per
    change of the table or the thresholds (evaluate). The op table, graph, summary, CSV
    (through the fail column apply() writes), CLI, report, overlay and advisor read it; none decides
    it again."""

    fail: np.ndarray  # breaks a threshold or the NaN/inf rule, is not exempt and is not only noise
    not_compared: np.ndarray  # has a reason and no metric value (unreadable, no golden, shapes differ)
    exempt: np.ndarray  # never fails: layout-only ops, network inputs, device-only ops
    nonfinite: np.ndarray  # the NPU tensor holds more NaN/inf than the golden one
    broken: dict[str, np.ndarray]  # threshold key -> rows breaking it (exempt rows never do)
    tpu_verdict: np.ndarray | None  # tpu-mlir's ladder per row; None without the column
    noisy: np.ndarray  # breaks only noise-prone relative-error metrics while the tensor agrees: not failing
    first_failing: int | None  # the earliest failing row in execution order (beyond its expected error, if any is)
    expected: np.ndarray  # failing rows within EXCESS_LIMIT times the third side's error: the precision's own
    device_only: np.ndarray  # not compared because the conversion inserted the op (a quantize, a cast, a weight
    # reshape): no counterpart by construction, nothing wrong; the rest of not_compared is worth a look
    first_beyond: int | None = None  # the earliest row, failing or not, past EXCESS_LIMIT times its expected error
    # with an error of its own (expected.SIGNIFICANT): where the implementation starts to add error
    floor: np.ndarray | None = None  # of noisy: reference values at the noise floor of their computation, the
    # error within it (noisefloor.py: a gradient zero in exact arithmetic, the calls carrying it on)

    def broken_keys(self, i: int) -> list[str]:
        """Keys of the thresholds row i breaks, then npu_nonfinite for the NaN/inf rule."""
        keys = [k for k, mask in self.broken.items() if mask[i]]
        return keys + ["npu_nonfinite"] if self.nonfinite[i] and not self.exempt[i] and "npu_nonfinite" not in keys \
            else keys


@dataclass(frozen=True)
class Verdict:
    """The verdict on the network outputs, or on a training step's calls."""

    outcome: str  # "pass", "fail" or "unknown"
    scope: str  # "outputs", "step" (a training step's calls) or "tensors" (every compared tensor, as npz_tool)
    judged: tuple[int, ...]  # the rows the verdict is on (outputs compared; a step's compared rows)
    failing: tuple[int, ...]  # those of them that fail
    worst: int | None  # the failing row that decides (NaN/inf first, then the largest error), else None
    why: str = ""  # for "unknown": why nothing could be judged
    outputs: int = 0  # output rows found (compared or not)
    cause: str = ""  # with a third side (--expected): "precision" (every failing output within its expected
    # error) or "implementation"; "" without one or when nothing fails

    def line(self, tensor_names=None) -> str:
        """The verdict in one line, as every surface states it: `pass: 2 network outputs meet the thresholds`,
        `fail: 1 of 2 network outputs breaks the thresholds (worst: out:output:0)`, `unknown: why`.
        `tensor_names`: the table's tensor column, to name the worst row."""
        if self.outcome == "unknown":
            return f"unknown: {self.why}"
        what = "network output" if self.scope == "outputs" else "compared tensor"
        of = " of the step" if self.scope == "step" else ""
        n = len(self.judged)
        if self.outcome == "pass":
            return (f"pass: {'all ' if n > 1 else ''}{n:,} {what}{'s' * (n != 1)}{of} meet{'s' * (n == 1)} "
                    "the thresholds")
        worst = f" (worst: {tensor_names[self.worst]})" if tensor_names is not None and self.worst is not None else ""
        return (f"fail: {len(self.failing):,} of {n:,} {what}{'s' * (n != 1)}{of} break{'s' * (len(self.failing) == 1)} "
                f"the thresholds{worst}")


@dataclass(frozen=True)
class Basis:
    """What the verdict rests on beyond the table and the thresholds: whether the rows are a training
    step's calls (no network output) and what could not be read (a pass cannot cover it). Made from
    the comparison's coverage (`from_coverage`: its task.json form), so every surface judges alike."""

    step: bool = False
    unread: int = 0  # inputs that left rows unjudged: unreadable tensors, shards merged without the other's shape
    first_unread: str = ""  # the first of them, as its problem says it

    @classmethod
    def from_coverage(cls, meta: dict | None) -> Basis:
        """From Coverage.to_meta() (task.json's `coverage`); {} or None: a run that said nothing."""
        meta = meta or {}
        unread = [str(u) for u in (meta.get("unread") or []) if u]
        count = meta.get("unread_count")
        return cls(meta.get("step") is True, count if isinstance(count, int) and count >= len(unread) else len(unread),
                   unread[0] if unread else "")


def evaluate(table: ResultTable, thresholds: Thresholds) -> RowState:
    """The table's RowState under `thresholds` (judge), built once per change of either: kept with the
    table (ResultTable.derived: until its data change) under the thresholds' values, so equal thresholds
    share it."""
    return table.derived(("rowstate", thresholds.signature()), lambda: judge(table, thresholds))


def apply(table: ResultTable, thresholds: Thresholds) -> RowState:
    """Write the table's judged columns (fail, the tpu_verdict ladder) from evaluate(table, thresholds):
    the one place they are written. Cheap when nothing changed; returns the RowState."""
    state = evaluate(table, thresholds)
    table.set_column("fail", state.fail)
    if state.tpu_verdict is not None:
        table.set_column("tpu_verdict", state.tpu_verdict)
    return state


def broken_keys(table: ResultTable, thresholds: Thresholds, i: int) -> list[str]:
    """Keys of the thresholds row i breaks (empty for exempt rows), then npu_nonfinite for the NaN/inf
    rule: the detail view's, the advisor's."""
    return evaluate(table, thresholds).broken_keys(i)


def broken_texts(table: ResultTable, thresholds: Thresholds, i: int) -> list[str]:
    """What row i breaks, in words, every surface's (show, the report, the advisor, the workbook): `cos 0.912 <
    0.99` (the limit an output's own where Polygraphy gives it one), the NaN/inf rule, msprobe's recorded rules."""
    texts = []
    for key in broken_keys(table, thresholds, i):
        t = thresholds.get(key)
        if key in RECORDED_KEYS and t is None:  # msprobe's rules on recorded statistics, checksums
            texts.append(recorded_text(table, key, i))
        elif t is None:  # the built-in NaN/inf rule
            texts.append(f"NaN/inf {table.columns['npu_nonfinite'][i]} on the NPU side, "
                         f"{max(table.columns['golden_nonfinite'][i], 0)} in golden")
        else:
            limit = polytol.limit(table, key, i, t.value)
            texts.append(f"{key} {distinct(table.numbers(key)[i], limit)} {t.op} {limit:.10g}")
    return texts


def distinct(v: float, threshold: float) -> str:
    """v with enough digits not to read as the threshold it breaks (cos 0.98996 < 0.99, not 0.99 < 0.99)."""
    for digits in (4, 6, 8, 10, 12):
        text = f"{v:.{digits}g}"
        if float(text) != threshold and (float(text) < threshold) == (v < threshold):
            return text
    return repr(float(v))


def judge(table: ResultTable, thresholds: Thresholds) -> RowState:
    """The table's RowState under `thresholds` (call evaluate: it caches this)."""
    n = len(table)
    free = ~exempt(table) if n else np.ones(0, dtype=bool)
    broken = {t.key: past(t, table.numbers(t.key)) & free for t in thresholds.items}
    ladder = tpu_verdicts(table, thresholds) if "tpu_verdict" in table.present else None
    if ladder is not None and thresholds.ladder:
        broken.update(ladder_broken(table, thresholds, ladder, free))
    if thresholds.polygraphy:
        broken.update(polygraphy_broken(table, thresholds, free))
    broken.update({k: mask & free for k, mask in recorded(table, thresholds).items()})
    nonfinite = nonfinite_rows(table)
    breaks = nonfinite & free
    for mask in broken.values():
        breaks = breaks | mask
    noisy = _noisy(table, thresholds, broken, breaks & ~nonfinite) if n else np.zeros(0, dtype=bool)
    floor = noisefloor.at_floor(table, breaks & ~nonfinite & ~noisy) if n and not thresholds.polygraphy \
        else np.zeros(n, dtype=bool)  # Polygraphy's rule is its own: no floor
    noisy = noisy | floor
    fail = breaks & ~noisy
    keys = table.metric_keys
    no_value = np.logical_and.reduce([np.isnan(table.columns[k]) for k in keys]) if keys and n \
        else np.ones(n, dtype=bool)
    reason = table.codes("reason")
    expected = fail & within(table.numbers("excess")) if "excess" in table.present \
        else np.zeros(n, dtype=bool)
    rows = np.flatnonzero(fail & ~expected) if (fail & ~expected).any() else np.flatnonzero(fail)
    first = int(rows[np.argmin(table.columns["index"][rows])]) if len(rows) else None
    beyond = np.flatnonzero(past_noise(table) & free) if "excess" in table.present else np.zeros(0, dtype=int)
    first_beyond = int(beyond[np.argmin(table.columns["index"][beyond])]) if len(beyond) else None
    not_compared = reason.where(reason.values != "") & no_value
    state = RowState(fail, not_compared, ~free, nonfinite, broken, ladder, noisy, first, expected,
                     not_compared & table.columns["is_npu_only"], first_beyond, floor)
    for mask in (state.fail, state.not_compared, state.exempt, state.nonfinite, state.noisy, state.expected,
                 state.device_only, ladder, state.floor, *broken.values()):
        if mask is not None:
            mask.flags.writeable = False  # read by all, changed by none
    return state


def past(threshold: Threshold, values: np.ndarray) -> np.ndarray:
    """Where `values` are past `threshold` (NaN never is)."""
    with np.errstate(invalid="ignore"):
        return values < threshold.value if threshold.op == "<" else values > threshold.value


def tpu_verdicts(table: ResultTable, thresholds: Thresholds) -> np.ndarray:
    """tpu-mlir's ladder per row: EQUAL and CLOSE as the comparison found them, else SIMILAR
    when cos > COS and euclid_sim > EUCLID (strictly, as tpu-mlir; NaN is not similar: the thresholds'
    tolerance()), else NOT_SIMILAR; "" for rows without a comparison (no golden tensor, unreadable,
    shapes differ)."""
    verdict = table.columns["tpu_verdict"].copy()
    cos, euclid = thresholds.tolerance()
    with np.errstate(invalid="ignore"):
        similar = (table.numbers("cos") > cos) & (table.numbers("euclid_sim") > euclid)
    ladder = np.isin(verdict, ("EQUAL", "CLOSE"))
    # compared: metrics computed, or NaN/inf kept them from it (NaN for tpu-mlir: not similar)
    compared = np.isfinite(table.numbers("euclid_sim")) | (
        np.maximum(table.columns["npu_nonfinite"], table.columns["golden_nonfinite"]) > 0)
    verdict[compared & ~ladder & similar] = "SIMILAR"
    verdict[compared & ~ladder & ~similar] = "NOT_SIMILAR"
    verdict[~compared & ~ladder] = ""
    return verdict


def ladder_broken(table: ResultTable, thresholds: Thresholds, verdict: np.ndarray,
                  free: np.ndarray) -> dict[str, np.ndarray]:
    """cos and euclid_sim as tpu-mlir judges them (`thresholds.ladder`): only NOT_SIMILAR rows break them
    (each the one it is not strictly above, NaN included), EQUAL and CLOSE never."""
    not_similar = (verdict == "NOT_SIMILAR") & free
    found = {}
    for key, value in zip(TPU_DEFAULTS, thresholds.tolerance()):
        if thresholds.get(key) is None:
            continue
        with np.errstate(invalid="ignore"):
            found[key] = not_similar & ~(table.numbers(key) > value)
    return found


def polygraphy_broken(table: ResultTable, thresholds: Thresholds, free: np.ndarray) -> dict[str, np.ndarray]:
    """pg_abs, pg_rel (and pg_mismatch) as Polygraphy judges them (`thresholds.polygraphy`): each broken
    where its rule (compare/polytol.py) fails."""
    count = thresholds.get("pg_mismatch")
    fails = polytol.broken(table, thresholds.get("pg_abs").value, thresholds.get("pg_rel").value,  # type: ignore[union-attr]
                           None if count is None else count.value, free)
    return {t.key: fails for t in thresholds.items if t.key in polytol.COLUMNS}


RECORDED_KEYS = ("stat_mag", "npu_md5", "npu_value")  # what `recorded` names for msprobe's recorded rules


def recorded(table: ResultTable, thresholds: Thresholds) -> dict[str, np.ndarray]:
    """msprobe's rules on rows compared by recorded statistics: stat_mag above 0.5 (its double-check
    rule; a stat_mag threshold replaces the 0.5), checksums that differ (md5 mode), non-tensor values
    (arguments such as dim=1, p=0.1) that differ (its scalar-parameter check)."""
    found = {}
    if "stat_mag" in table.present and thresholds.get("stat_mag") is None:
        with np.errstate(invalid="ignore"):
            found["stat_mag"] = table.numbers("stat_mag") > MAGNITUDE
    if "npu_md5" in table.present:
        npu, golden = table.codes("npu_md5"), table.codes("golden_md5")  # cached: read once
        found["npu_md5"] = npu.where(npu.values != "") & golden.where(golden.values != "") \
            & (npu.take(npu.values) != golden.take(golden.values))
    if "npu_value" in table.present:
        found["npu_value"] = values_differ(table.columns["npu_value"], table.columns["golden_value"])
    return found


def recorded_text(table: ResultTable, key: str, i: int) -> str:
    """How row i breaks one of the recorded-statistics rules (key in RECORDED_KEYS)."""
    c = table.columns
    if key == "stat_mag":
        return f"stat_mag {table.numbers(key)[i]:.4g} > {MAGNITUDE:g} (msprobe's double-check rule)"
    if key == "npu_value":
        return f"{table.columns['npu_dtype'][i]} value {c['npu_value'][i]} against {c['golden_value'][i]} in golden"
    return f"CRC-32 {c['npu_md5'][i]} against {c['golden_md5'][i]} in golden"


def _noisy(table: ResultTable, thresholds: Thresholds, broken: dict[str, np.ndarray],
           candidates: np.ndarray) -> np.ndarray:
    """Rows of `candidates` whose broken thresholds are all noise-prone while the tensor as a whole
    agrees: its red within the red threshold (msit's 0.05 when none is set), or, where red was not
    computed, its cos within the cos threshold (0.99)."""
    only_noisy = candidates.copy()
    for key, mask in broken.items():
        if key not in NOISY:
            only_noisy &= ~mask
    if not only_noisy.any():
        return only_noisy
    return only_noisy & _agrees(thresholds, table.numbers("red"), table.numbers("cos"))


def _agrees(thresholds: Thresholds, red: np.ndarray, cos: np.ndarray) -> np.ndarray:
    """Whether each tensor as a whole agrees: red within the red threshold (msit's 0.05 when none is
    set), or, where red was not computed, cos within the cos threshold (0.99)."""
    limit = {k: (t.value if (t := thresholds.get(k)) is not None else v) for k, v in WHOLE_LIMITS.items()}
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(red), cos >= limit["cos"], red <= limit["red"])


def past_noise(table: ResultTable) -> np.ndarray:
    """Rows past EXCESS_LIMIT times their expected error with an error worth naming (SIGNIFICANT)."""
    cos, red = table.numbers("cos"), table.numbers("red")
    own = error(cos, red)
    excess = table.numbers("excess")
    with np.errstate(invalid="ignore"):
        return ~within(excess) & ~np.isnan(excess) & ((own >= SIGNIFICANT) | np.isinf(excess))  # inf: an overflow of its own


def nonfinite_rows(table: ResultTable) -> np.ndarray:
    """Rows whose NPU tensor has more NaN/inf than the golden one (counts of -1: unknown)."""
    npu, golden = table.columns["npu_nonfinite"], table.columns["golden_nonfinite"]
    return npu > np.maximum(golden, 0)


def exempt(table: ResultTable) -> np.ndarray:
    """Rows that are never flagged: layout-only ops, network inputs, device-only ops."""
    types = table.codes("type")  # the distinct types checked, not every row's
    return types.where(np.isin(types.values, sorted(EXEMPT_TYPES))) | table.columns["is_npu_only"]


def compared(table: ResultTable) -> np.ndarray:
    """Rows with a comparison result: a metric, a statistic, a checksum or two values, not only a reason."""
    c = table.columns
    done = np.zeros(len(table), dtype=bool)
    for key in table.metric_keys:
        done |= ~np.isnan(table.numbers(key))
    for key in ("npu_md5", "tpu_verdict"):
        if key in table.present:
            done |= c[key] != ""
    if "npu_value" in table.present:
        done |= (c["npu_value"] != "") & (c["golden_value"] != "")
    return done


def value_rows(table: ResultTable) -> np.ndarray:
    """Rows of a non-tensor argument or output (compared as values: statistics.values_differ)."""
    if "npu_value" not in table.present:
        return np.zeros(len(table), dtype=bool)
    return (table.columns["npu_value"] != "") | (table.columns["golden_value"] != "")


def badness(table: ResultTable, r: int) -> float:
    """How far a row is from agreeing: the larger of 1 - cos and the relative euclidean distance."""
    found = float(error(table.columns["cos"][r], table.columns["red"][r]))
    return 0.0 if np.isnan(found) else found


def verdict(table: ResultTable, thresholds: Thresholds, basis: Basis | None = None) -> Verdict:
    """The verdict (see the module's docstring): on the outputs, a training step's calls (`basis.step`)
    or every compared tensor (tpu-mlir's ladder); "unknown" instead of a pass where `basis` says an
    input could not be read. Cached per table version, thresholds and basis."""
    basis = basis or Basis()
    key = ("verdict", basis, thresholds.signature())
    return table.derived(key, lambda: _unread(_verdict(table, evaluate(table, thresholds), basis.step,
                                                       thresholds.ladder or thresholds.polygraphy), basis))


def combined(parts: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """The verdict of parts judged one by one where no merged table exists (a columnar task's ranks:
    each rank's label -> its own verdict's outcome and line, ("", why) for a rank not compared): "fail"
    when one fails, "unknown" when one was not compared or could not be judged, else "pass"; with its line."""
    failing = [k for k, (o, _) in parts.items() if o == "fail"]
    unsure = [k for k, (o, _) in parts.items() if o not in ("fail", "pass")]
    n = len(parts)
    if failing:
        return "fail", f"fail: {len(failing):,} of {n:,} ranks fail, each judged alone ({failing[0]}: {parts[failing[0]][1]})"
    if unsure:
        return "unknown", (f"unknown: {len(unsure):,} of {n:,} ranks were not compared or could not be judged "
                           f"({unsure[0]}: {parts[unsure[0]][1]})")
    return ("pass", f"pass: all {n:,} ranks pass, each judged alone") if n else ("unknown", "unknown: no rank was compared")


def _unread(v: Verdict, basis: Basis) -> Verdict:
    """A pass turned "unknown" when an input could not be read: the rows it left unjudged may fail."""
    if v.outcome != "pass" or not basis.unread:
        return v
    return Verdict("unknown", v.scope, v.judged, v.failing, None,
                   f"{basis.unread:,} input{'s' * (basis.unread != 1)} could not be read, so their rows were not "
                   f"judged (first: {basis.first_unread}); everything that was judged passes", v.outputs)


def _verdict(table: ResultTable, state: RowState, step: bool, every: bool) -> Verdict:
    c = table.columns
    done = compared(table) | state.nonfinite
    if step or every:
        scope = "step" if step else "tensors"
        calls = np.flatnonzero(done & ~state.exempt) if every and not step else np.flatnonzero(done)
        if not len(calls):
            return Verdict("unknown", scope, (), (), None, "no row holds a statistic, a checksum or a metric")
        failing_rows = np.flatnonzero(state.fail & done)
        first = state.first_failing if state.first_failing is not None and done[state.first_failing] else \
            (int(failing_rows[0]) if len(failing_rows) else None)
        cause = "" if not len(failing_rows) or "excess" not in table.present else \
            ("precision" if state.expected[failing_rows].all() else "implementation")
        return Verdict("fail" if len(failing_rows) else "pass", scope, tuple(calls.tolist()),
                       tuple(failing_rows.tolist()), first, cause=cause)
    outputs = np.flatnonzero(c["is_output"] & ~c["is_npu_only"])
    judged = [int(r) for r in outputs if done[r]]
    if not judged:
        why = ("no row is a network output (give the model, --model, so its outputs are known)" if not len(outputs)
               else f"the output rows were not compared ({c['tensor'][outputs[0]]}: "
                    f"{c['reason'][outputs[0]] or 'no value'})")
        return Verdict("unknown", "outputs", (), (), None, why, len(outputs))
    failing = [r for r in judged if state.fail[r]]
    worst = min(failing, key=lambda i: (not state.nonfinite[i], bool(state.expected[i]), -badness(table, i))) \
        if failing else None
    cause = "" if not failing or "excess" not in table.present else \
        ("precision" if all(state.expected[r] for r in failing) else "implementation")
    return Verdict("fail" if failing else "pass", "outputs", tuple(judged), tuple(failing), worst,
                   outputs=len(outputs), cause=cause)


def pair_broken(thresholds: Thresholds, metrics) -> list[str]:
    """What one pair's metrics (metrics.PairMetrics, outside any table: a re-test) break, by the same
    rules as a table's rows: the thresholds, the NaN/inf rule, and nothing when it is only noise."""
    return values_broken(thresholds, metrics.values, metrics.npu_nonfinite, metrics.golden_nonfinite)


def cells_broken(thresholds: Thresholds, cells: dict) -> list[str]:
    """What one row's computed cells (a comparison's, before its table exists: the value check of a pair
    by identity, compare/repair.py) break, by the same rules as pair_broken."""
    values = {k: v for k, v in cells.items() if isinstance(v, float)}
    return values_broken(thresholds, values, int(cells.get("npu_nonfinite", 0) or 0),
                         int(cells.get("golden_nonfinite", 0) or 0))


def values_broken(thresholds: Thresholds, values: dict, npu_nonfinite: int, golden_nonfinite: int) -> list[str]:
    """The thresholds one pair's metric values break, then npu_nonfinite for the NaN/inf rule; none when
    it breaks only noise-prone metrics while the tensor as a whole agrees (the table's rules, one pair)."""
    keys = [t.key for t in thresholds.items
            if bool(past(t, np.array([values.get(t.key, np.nan)], dtype=np.float64))[0])]
    if npu_nonfinite > max(golden_nonfinite, 0):
        return keys + ["npu_nonfinite"]
    if keys and set(keys) <= NOISY and _agrees(thresholds, np.array([values.get("red", np.nan)]),
                                                 np.array([values.get("cos", np.nan)]))[0]:
        return []
    return keys
