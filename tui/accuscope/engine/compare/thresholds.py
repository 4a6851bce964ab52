"""Pass / fail thresholds: the user's limits, as data (which rows they fail is judgement.py's to decide,
by the rules below: this module decides nothing and imports no judging).

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

from accuscope.engine.compare.columns import CSV_OF, LOWER_IS_WORSE, MSIT_DEFAULTS, THRESHOLD_KEYS, TPU_DEFAULTS

if TYPE_CHECKING:
    from accuscope.engine.compare.polytol import Rule

# the metric table's, here too
__all__ = ["LOWER_IS_WORSE", "MSIT_DEFAULTS", "THRESHOLD_KEYS", "TPU_DEFAULTS"]


@dataclass(frozen=True)
class Threshold:
    key: str
    op: str  # "<": fails below value; ">": fails above value
    value: float

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

    def signature(self) -> tuple[tuple[str, str, float], ...]:
        """(key, op, value) of each threshold, in order: all a judgement under them depends on (what
        judgement.evaluate and verdict cache theirs under, with the table's version)."""
        return tuple((t.key, t.op, t.value) for t in self.items)

    # ---- the ways of judging (judgement.py judges by them) ------------------------------------
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

    def judge_text(self) -> str:
        """The real tool whose rule judges every compared tensor, as its command line says it:
        `npz_tool compare --tolerance 0.99,0.9` (ladder) or `polygraphy run --atol 1e-05 --rtol 1e-05`
        (polygraphy, the default's values: an output's own are in its row's broken text)."""
        if self.polygraphy:
            return f"polygraphy run --atol {self.get('pg_abs').value:g} --rtol {self.get('pg_rel').value:g}"  # type: ignore[union-attr]  # polygraphy: both set
        return f"npz_tool compare --tolerance {self.tolerance_text()}"

    def tolerance_text(self) -> str:
        """`0.99,0.90` as `--tolerance` takes it."""
        return ",".join(f"{v:g}" for v in self.tolerance())

    def tolerance(self) -> tuple[float, float]:
        """(cos, euclid_sim) for tpu-mlir's SIMILAR: the thresholds' values, else its defaults."""
        return tuple(t.value if (t := self.get(k)) is not None else v  # type: ignore[return-value]
                     for k, v in TPU_DEFAULTS.items())


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
