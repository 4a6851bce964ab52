"""Pass / fail thresholds: which rows count as an accuracy problem.

Defaults are msit's (a row is a precision error when cos < 0.99, red > 0.05, kl > 0.005,
rmse > 1.0 or mean_rel > 1.0). NaN cells never break a threshold (the reason column says why
they are NaN), with one rule of our own beyond them: a row whose NPU tensor holds more NaN/inf
than its golden tensor fails (a float16 overflow is an error whatever the metrics say). Rows that cannot meaningfully fail are exempt: layout-only ops (TransData),
network inputs (Data / RefData: a mismatch there is an input problem, reported by the advisor),
and device-only ops (GroundTruth "*": there is no golden tensor).

tpu-mlir's way (`--tolerance COS,EUCLID`, as its npz_tool compare takes it) replaces msit's
thresholds by two, cos and euclid_sim (a `--threshold` given beside it adds its own): they live in
task.json like any others. A euclid_sim threshold makes the judging tpu-mlir's: a row fails on them
exactly when its tpu_verdict is NOT_SIMILAR (neither EQUAL nor CLOSE, and not cos > COS and
euclid_sim > EUCLID, strictly, NaN not similar), never on a threshold the user did not ask for. The
same two values (0.99 and 0.90, tpu-mlir's defaults, when not set) turn each row's tpu_verdict into
SIMILAR or NOT_SIMILAR when the pair is neither EQUAL nor CLOSE.

Polygraphy's way (`--atol A --rtol R --check-error-stat S`, as `polygraphy run` takes them) replaces
them by its rule (compare/polytol.py): `pg_abs > A` and `pg_rel > R`, with elemwise `pg_mismatch > 0`,
broken together (a row fails only when every one is), NaN beyond.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare.columns import CSV_OF, LOWER_IS_WORSE, MSIT_DEFAULTS, THRESHOLD_KEYS, TPU_DEFAULTS
from accuscope.engine.compare.judgement import RowState, exempt, judge
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.statistics import MAGNITUDE, values_differ

if TYPE_CHECKING:
    from accuscope.engine.compare.polytol import Rule

# the metric table's, and the judgement's (which rows fail: judgement.py), here too
__all__ = ["LOWER_IS_WORSE", "MSIT_DEFAULTS", "THRESHOLD_KEYS", "TPU_DEFAULTS", "RowState", "exempt"]


@dataclass(frozen=True)
class Threshold:
    key: str
    op: str  # "<": fails below value; ">": fails above value
    value: float

    def broken(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return values < self.value if self.op == "<" else values > self.value

    def __str__(self) -> str:
        return f"{self.key} {self.op} {self.value:g}"


def _default_items() -> list[Threshold]:
    return [Threshold(k, default_op(k), v) for k, v in MSIT_DEFAULTS.items()]


@dataclass
class Thresholds:
    items: list[Threshold] = field(default_factory=_default_items)

    # ---- editing ------------------------------------------------------------------------------
    def get(self, key: str) -> Threshold | None:
        return next((t for t in self.items if t.key == key), None)

    def set(self, key: str, value: float | None, op: str | None = None) -> None:
        """Change, add (value given) or remove (value None) the threshold of one metric (a new item: a
        Threshold is never changed in place)."""
        key = resolve_key(key)
        current = self.get(key)
        if value is None:
            self.items = [t for t in self.items if t.key != key]
        elif current is not None:
            new = Threshold(key, op or current.op, float(value))
            self.items = [new if t is current else t for t in self.items]
        else:
            self.items = [*self.items, Threshold(key, op or default_op(key), float(value))]

    def edit(self, text: str) -> list[tuple[str, float | None]]:
        """Apply `NAME=VALUE ...` (spaces or commas between): only the named thresholds change (VALUE
        off removes one), the others stay. ValueError naming the bad part, before anything changes.
        Returns the changes made."""
        changes = parse_assignments(text)
        for key, value in changes:
            self.set(key, value)
        return changes

    def edited(self, text: str) -> Thresholds:
        """New thresholds: these with `NAME=VALUE ...` applied as `edit` does; these stay as they are
        (the app's edits: a worker holding these never sees them half-changed). ValueError as edit."""
        new = Thresholds(list(self.items))
        new.edit(text)
        return new

    def as_edit(self) -> str:
        """The `NAME=VALUE ...` text that `edit` turns the defaults into these thresholds with."""
        default = Thresholds()
        changed = [f"{t.key}={t.value:g}" for t in self.items
                   if (d := default.get(t.key)) is None or (d.op, d.value) != (t.op, t.value)]
        return " ".join(changed + [f"{t.key}=off" for t in default.items if self.get(t.key) is None])

    def __str__(self) -> str:
        """`cos < 0.99, red > 0.05, ...` (`none` without thresholds)."""
        return ", ".join(str(t) for t in self.items) or "none"

    def to_dict(self) -> dict:
        """For task.json: {"cos": {"fail_if": "<", "value": 0.99}, ...}."""
        return {t.key: {"fail_if": t.op, "value": t.value} for t in self.items}

    @classmethod
    def from_dict(cls, data: dict | None) -> Thresholds:
        """Inverse of to_dict; None gives the defaults, {} gives no thresholds at all."""
        if data is None:
            return cls()
        items = []
        for key, spec in data.items():
            if isinstance(spec, dict):
                op, value = spec.get("fail_if"), spec.get("value")
            else:  # tolerate a bare number
                op, value = None, spec
            if op not in (None, "<", ">"):
                raise ValueError(f"threshold {key}: fail_if must be '<' or '>', not {op!r}")
            if value is None:
                raise ValueError(f"threshold {key}: no value")
            key = resolve_key(key)
            items.append(Threshold(key, op or default_op(key), float(value)))
        return cls(items)

    # ---- evaluation ---------------------------------------------------------------------------
    def evaluate(self, table: ResultTable) -> RowState:
        """The table's RowState under these thresholds (judgement.judge); built once per change of either."""
        key = ("rowstate", tuple((t.key, t.op, t.value) for t in self.items))
        return table.derived(key, lambda: judge(table, self))

    def apply(self, table: ResultTable) -> RowState:
        """Write the table's judged columns (fail, the tpu_verdict ladder) from evaluate(table): the
        one place they are written. Cheap when nothing changed; returns the RowState."""
        state = self.evaluate(table)
        table.set_column("fail", state.fail)
        if state.tpu_verdict is not None:
            table.set_column("tpu_verdict", state.tpu_verdict)
        return state

    def set_tolerance(self, cos: float, euclid: float) -> None:
        """tpu-mlir's `--tolerance COS,EUCLID`: judge as its npz_tool, on these two alone (msit's other
        thresholds removed: the user asked for tpu-mlir's judging, not theirs)."""
        self.items = [t for t in self.items if t.key in TPU_DEFAULTS]
        self.set("cos", cos, "<")
        self.set("euclid_sim", euclid, "<")

    @property
    def ladder(self) -> bool:
        """Judged as tpu-mlir's npz_tool: a euclid_sim threshold (`--tolerance`) is set, so cos and
        euclid_sim fail a row exactly when its tpu_verdict is NOT_SIMILAR."""
        return self.get("euclid_sim") is not None

    def set_polygraphy(self, rule: Rule) -> None:
        """Polygraphy's `--atol A --rtol R --check-error-stat S`: judge as its comparator, on its rule alone
        (msit's thresholds removed, as set_tolerance does)."""
        self.items = [Threshold("pg_abs", ">", rule.atol), Threshold("pg_rel", ">", rule.rtol)]
        if rule.stat == "elemwise":
            self.items.append(Threshold("pg_mismatch", ">", 0))

    @property
    def polygraphy(self) -> bool:
        """Judged as Polygraphy's comparator (`--atol`/`--rtol`): its two tolerances are set."""
        return self.get("pg_abs") is not None and self.get("pg_rel") is not None

    def polygraphy_broken(self, table: ResultTable, free: np.ndarray) -> dict[str, np.ndarray]:
        """pg_abs, pg_rel (and pg_mismatch) as Polygraphy judges them: each broken where the rule fails."""
        from accuscope.engine.compare import polytol
        count = self.get("pg_mismatch")
        fails = polytol.broken(table, self.get("pg_abs").value, self.get("pg_rel").value,  # type: ignore[union-attr]
                               None if count is None else count.value, free)
        return {t.key: fails for t in self.items if t.key in polytol.COLUMNS}

    def tolerance_text(self) -> str:
        """`0.99,0.90` as `--tolerance` takes it."""
        return ",".join(f"{v:g}" for v in self.tolerance())

    def ladder_broken(self, table: ResultTable, verdict: np.ndarray, free: np.ndarray) -> dict[str, np.ndarray]:
        """cos and euclid_sim as tpu-mlir judges them: only NOT_SIMILAR rows break them (each the
        one it is not strictly above, NaN included), EQUAL and CLOSE never."""
        not_similar = (verdict == "NOT_SIMILAR") & free
        found = {}
        for key, value in zip(TPU_DEFAULTS, self.tolerance()):
            if self.get(key) is None:
                continue
            with np.errstate(invalid="ignore"):
                found[key] = not_similar & ~(table.numbers(key) > value)
        return found

    def tolerance(self) -> tuple[float, float]:
        """(cos, euclid_sim) for tpu-mlir's SIMILAR: the thresholds' values, else its defaults."""
        return tuple(t.value if (t := self.get(k)) is not None else v  # type: ignore[return-value]
                     for k, v in TPU_DEFAULTS.items())

    def tpu_verdicts(self, table: ResultTable) -> np.ndarray:
        """tpu-mlir's ladder per row: EQUAL and CLOSE as the comparison found them, else SIMILAR
        when cos > COS and euclid_sim > EUCLID (strictly, as tpu-mlir; NaN is not similar), else
        NOT_SIMILAR; "" for rows without a comparison (no golden tensor, unreadable, shapes differ)."""
        verdict = table.columns["tpu_verdict"].copy()
        cos, euclid = self.tolerance()
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

    def broken(self, table: ResultTable, i: int) -> list[str]:
        """Keys of the thresholds row i breaks (empty for exempt rows), for the detail view."""
        return self.evaluate(table).broken_keys(i)

    def broken_texts(self, table: ResultTable, i: int) -> list[str]:
        """What row i breaks, in words: `cos 0.912 < 0.99`, the NaN/inf rule, msprobe's recorded rules."""
        texts = []
        for key in self.broken(table, i):
            t = self.get(key)
            if key in RECORDED_KEYS and t is None:  # msprobe's rules on recorded statistics, checksums
                texts.append(recorded_text(table, key, i))
            elif t is None:  # the built-in NaN/inf rule
                texts.append(f"NaN/inf {table.columns['npu_nonfinite'][i]} on the NPU side, "
                             f"{max(table.columns['golden_nonfinite'][i], 0)} in golden")
            else:
                texts.append(f"{key} {table.numbers(key)[i]:.4g} {t.op} {t.value:g}")
        return texts

    def recorded(self, table: ResultTable) -> dict[str, np.ndarray]:
        """msprobe's rules on rows compared by recorded statistics: stat_mag above 0.5 (its double-check
        rule; a stat_mag threshold replaces the 0.5), checksums that differ (md5 mode), non-tensor values
        (arguments such as dim=1, p=0.1) that differ (its scalar-parameter check)."""
        found = {}
        if "stat_mag" in table.present and self.get("stat_mag") is None:
            with np.errstate(invalid="ignore"):
                found["stat_mag"] = table.numbers("stat_mag") > MAGNITUDE
        if "npu_md5" in table.present:
            npu, golden = table.codes("npu_md5"), table.codes("golden_md5")  # cached: read once
            found["npu_md5"] = npu.where(npu.values != "") & golden.where(golden.values != "") \
                & (npu.take(npu.values) != golden.take(golden.values))
        if "npu_value" in table.present:
            found["npu_value"] = values_differ(table.columns["npu_value"], table.columns["golden_value"])
        return found


RECORDED_KEYS = ("stat_mag", "npu_md5", "npu_value")  # what `broken` names for msprobe's recorded rules


def recorded_text(table: ResultTable, key: str, i: int) -> str:
    """How row i breaks one of the recorded-statistics rules (key in RECORDED_KEYS)."""
    c = table.columns
    if key == "stat_mag":
        return f"stat_mag {table.numbers(key)[i]:.4g} > {MAGNITUDE:g} (msprobe's double-check rule)"
    if key == "npu_value":
        return f"{table.columns['npu_dtype'][i]} value {c['npu_value'][i]} against {c['golden_value'][i]} in golden"
    return f"CRC-32 {c['npu_md5'][i]} against {c['golden_md5'][i]} in golden"


def default_op(key: str) -> str:
    return "<" if key in LOWER_IS_WORSE else ">"


def resolve_key(name: str, purpose: str = "for a threshold") -> str:
    """Short key for a short key or CSV name (case-insensitive); ValueError naming the choices (and
    `purpose`, what the metric was asked for)."""
    by_lower = {k.lower(): k for k in THRESHOLD_KEYS}
    by_lower.update({CSV_OF[k].lower(): k for k in THRESHOLD_KEYS})
    key = by_lower.get(name.strip().lower())
    if key is not None:
        return key
    import difflib  # only to suggest a spelling
    close = difflib.get_close_matches(name.strip().lower(), list(by_lower), n=1, cutoff=0.6)
    hint = f"; did you mean {by_lower[close[0]]}?" if close else ""
    raise ValueError(f"unknown metric '{name}' {purpose}{hint} "
                     f"(one of: {', '.join(THRESHOLD_KEYS)})")


def parse_assignments(text: str) -> list[tuple[str, float | None]]:
    """`cos=0.98 kl=off` (spaces or commas between) -> [(key, value), ...]; see parse_assignment."""
    return [parse_assignment(part) for part in text.replace(",", " ").split()]


def parse_assignment(text: str) -> tuple[str, float | None]:
    """`--threshold NAME=VALUE` -> (key, value); VALUE "off" or "none" removes that threshold."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"threshold '{text}': expected NAME=VALUE, e.g. cos=0.98")
    key = resolve_key(name)
    if value.strip().lower() in ("off", "none"):
        return key, None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"threshold '{text}': '{value.strip()}' is not a number") from None
    if number != number:
        raise ValueError(f"threshold '{text}': NaN is not a threshold")
    return key, number


def parse_tolerance(text: str) -> tuple[float, float]:
    """`0.99,0.90` -> (cos, euclid_sim), as tpu-mlir's `--tolerance`; ValueError naming the problem."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 2 or any(v != v for v in values):
        raise ValueError(f"'{text}': expected two numbers COS,EUCLID, e.g. 0.99,0.90")
    return values[0], values[1]
