"""What the advisor says, kept in `advice.json`: findings (rule, severity, the row and op to jump to,
what to do next, evidence), per-op origins (introduced / inherited), and the result they were made
for, so a reopened task shows them without advising again."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope import __version__
from accuscope.engine.compare.results import text_array
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sources.inputfile import open_user_file, read_json_object
from accuscope.engine.sources.outputfile import atomic_file
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import ADVICE_JSON
from accuscope.engine.tasks.taskdoc import TaskDoc

FORMAT = 1
MS_RULES = ("ms.fp16_overflow", "ms.input_mismatch", "ms.all_pass", "ms.output_fails", "ms.local_deviation")

EVIDENCE_SHOWN = ("cos", "cos_before", "cos_after", "red_before", "red_after", "isolated_cos",  # evidence_text's
                  "rerun_vs_golden_cos", "worst_input_cos", "output_cos", "npu_nonfinite", "golden_nonfinite", "saturated", "rows_below",
                  "output_error", "worst_input_error", "transform", "mean", "std", "failing_ops", "inherited",
                  "unknown")


# ------------------------------------------------------------------ what the advisor says


# the findings the advice itself reads (rules/verdict.py and rules/coverage.py make them): a verdict on
# the outputs and what the comparison covered come before the cause
VERDICT, COVERAGE = "verdict", "coverage"

@dataclass
class Finding:
    """One piece of advice. `row` is the table row (position in the task's table) to jump to,
    None when the finding is about no particular row; `evidence` holds the numbers behind it."""

    rule: str  # "ms.fp16_overflow", ..., "introduced", "nonfinite_origin", "preprocess", ...
    severity: str  # "error", "warning" or "info"
    title: str
    text: str  # what it means and what to do next
    row: int | None = None
    op: str = ""
    tensor: str = ""
    evidence: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        return "mindstudio" if self.rule.startswith("ms.") else "accuscope"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "title": self.title, "text": self.text,
                "row": self.row, "op": self.op, "tensor": self.tensor, "evidence": jsonable(self.evidence)}

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        row = d.get("row")
        return cls(str(d.get("rule", "")), str(d.get("severity", "info")), str(d.get("title", "")),
                   str(d.get("text", "")), row if isinstance(row, int) else None, str(d.get("op") or ""),
                   str(d.get("tensor") or ""), dict(d.get("evidence") or {}))


@dataclass
class OpOrigin:
    """Whether a failing op introduced its error or inherited it."""

    op: str  # NPU op name
    rows: list[int]  # the op's output rows (where the TUI shows the origin)
    origin: str  # "introduced", "inherited" or "unknown"
    method: str  # "rerun" (framework op re-run on the NPU inputs), "reported" (the dump tool's own single-layer
    # figure: RKNN's) or "input-output" (the weaker one)
    isolated_cos: float | None = None  # worst cosine of an NPU output against the re-run
    broken: list[str] = field(default_factory=list)  # thresholds the isolated comparison breaks
    why: str = ""
    evidence: dict = field(default_factory=dict)
    isolated: dict | None = None  # oprerun.Isolated.to_dict(), the cached re-run

    def to_dict(self) -> dict:
        return {"op": self.op, "rows": self.rows, "origin": self.origin, "method": self.method,
                "isolated_cos": self.isolated_cos, "broken": self.broken, "why": self.why,
                "evidence": jsonable(self.evidence), "isolated": jsonable(self.isolated, None)}

    @classmethod
    def from_dict(cls, d: dict) -> OpOrigin:
        iso = d.get("isolated_cos")
        return cls(str(d.get("op", "")), [int(r) for r in d.get("rows") or []], str(d.get("origin", "unknown")),
                   str(d.get("method", "")), float(iso) if isinstance(iso, (int, float)) else None,
                   [str(b) for b in d.get("broken") or []], str(d.get("why") or ""), dict(d.get("evidence") or {}),
                   d.get("isolated") if isinstance(d.get("isolated"), dict) else None)


@dataclass
class Advice:
    folder: Path
    findings: list[Finding]
    ops: list[OpOrigin]
    method: str  # "rerun", "reported" or "input-output": how origins were judged (OpOrigin.method)
    framework_model: str = ""
    framework_source: str = ""  # where the framework model was found
    notes: list[str] = field(default_factory=list)
    task: dict = field(default_factory=dict)  # which result was advised on: csv, saved, rows, thresholds
    created: str = ""
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    stage: str = ""  # a chain task's: the stage where the error enters ("" where none does; chainadvice.py)
    advised: str = ""  # a chain task's: the sub-task advised on, relative to it ("." its own; "" not a chain)
    written: bool = False  # whether advice.json was written by this call (not saved in the file)

    @property
    def primary(self) -> Finding | None:
        """The finding to show first (findings are sorted: severity, execution order, cause first)."""
        return self.findings[0] if self.findings else None

    @property
    def cause(self) -> Finding | None:
        """What the advisor says first after its verdict on the model (the op that matters)."""
        return next((f for f in self.findings if f.rule not in (VERDICT, COVERAGE)), None)

    @property
    def verdict(self) -> Finding | None:
        """The MindStudio rule that matched (first match wins)."""
        return next((f for f in self.findings if f.rule in MS_RULES), None)

    def by_rule(self, rule: str) -> list[Finding]:
        return [f for f in self.findings if f.rule == rule]

    def origin_of(self, op: str) -> OpOrigin | None:
        return next((o for o in self.ops if o.op == op), None)

    @property
    def introduced(self) -> list[OpOrigin]:
        """Ops that introduced error, in execution order."""
        return [o for o in self.ops if o.origin == "introduced"]

    def is_current(self, doc: TaskDoc, thresholds: Thresholds | None = None) -> bool:
        """Whether this advice was made for the task's current result (task.json) and thresholds."""
        now = fingerprint(doc, thresholds)
        return all(self.task.get(k) == v for k, v in now.items())

    def columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-row columns for the table: `origin` (text) and `iso_cos` (float, NaN where none)."""
        origin = text_array([""] * n)
        iso = np.full(n, math.nan)
        for o in self.ops:
            for r in o.rows:
                if 0 <= r < n:
                    origin[r] = o.origin
                    iso[r] = math.nan if o.isolated_cos is None else o.isolated_cos
        return {"origin": origin, "iso_cos": iso}

    def to_dict(self) -> dict:
        return {"format": FORMAT, "tool_version": __version__, "created": self.created,
                "seconds": round(self.seconds, 3), "timings": {k: round(v, 3) for k, v in self.timings.items()},
                "task": self.task, "method": self.method, "framework_model": self.framework_model,
                "framework_source": self.framework_source, "notes": self.notes,
                "findings": [f.to_dict() for f in self.findings], "ops": [o.to_dict() for o in self.ops],
                **({"chain": {"stage": self.stage or None, "advised": self.advised}} if self.advised else {})}

    @classmethod
    def from_dict(cls, folder: Path, d: dict) -> Advice:
        chain = d.get("chain")
        chain = chain if isinstance(chain, dict) else {}
        return cls(Path(folder), [Finding.from_dict(f) for f in d.get("findings") or [] if isinstance(f, dict)],
                   [OpOrigin.from_dict(o) for o in d.get("ops") or [] if isinstance(o, dict)],
                   str(d.get("method", "")), str(d.get("framework_model") or ""),
                   str(d.get("framework_source") or ""), [str(n) for n in d.get("notes") or []],
                   dict(d.get("task") or {}), str(d.get("created") or ""), float(d.get("seconds") or 0.0),
                   dict(d.get("timings") or {}), str(chain.get("stage") or ""), str(chain.get("advised") or ""))


def evidence_text(ev: dict) -> str:
    """The numbers behind a finding on one line (`cos 0.9523 · mean 0.5 · re-ran a → b`)."""
    parts = []
    for key in EVIDENCE_SHOWN:
        v = ev.get(key)
        if v is None or v == []:
            continue
        if isinstance(v, float):
            v = f"{v:.4f}" if key.endswith("cos") or "cos_" in key else f"{v:.4g}"
        elif isinstance(v, list):
            v = "(" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + ")"
        parts.append(f"{key.replace('_', ' ')} {v}")
    if ev.get("chain") and len(ev["chain"]) > 1:
        parts.append("re-ran " + " → ".join(ev["chain"]))
    return " · ".join(parts)


# ------------------------------------------------------------------ reading and writing


def load_advice(folder: str | os.PathLike) -> Advice | None:
    """The advice saved in a task folder; None when there is none, SourceError when unreadable."""
    path = Path(folder) / ADVICE_JSON
    if not path.is_file():
        return None
    doc = read_json_object(path, f"{path}: no such file")
    if doc.get("format") != FORMAT:
        raise SourceError(f"{path}: not an advice file of format {FORMAT}")
    return Advice.from_dict(Path(folder), doc)


def saved_advice(folder: str | os.PathLike, doc: TaskDoc, thresholds: Thresholds | None,
                 framework_model: str | os.PathLike | None = None) -> Advice | None:
    """The advice saved in the task folder when it was made for this result and thresholds (and,
    when given, this framework model); None otherwise, an unreadable advice.json included (the
    caller advises again, which rewrites it)."""
    made_for = saved_fingerprint(folder)
    if made_for is not None and any(made_for.get(k) != v for k, v in fingerprint(doc, thresholds).items()):
        return None  # stale: known from the file's head, without reading its ops (40 MB for 1M rows)
    try:
        advice = load_advice(folder)
    except SourceError:
        return None
    if advice is None or not advice.is_current(doc, thresholds):
        return None
    if doc.chain and not advice.advised:  # a chain task advised as one comparison (before chainadvice.py)
        return None
    if framework_model is not None and Path(advice.framework_model or "") != Path(framework_model):
        return None
    return advice


HEAD_BYTES = 65536  # advice.json's "task" member comes before its findings and ops (Advice.to_dict)
_TASK_MEMBER = '\n "task": '


def saved_fingerprint(folder: str | os.PathLike) -> dict | None:
    """The fingerprint (`task`) of the advice saved in `folder`, read from the file's head alone;
    None when there is none or the head does not hold it as save_advice writes it (the caller then
    reads the whole file)."""
    try:
        with open_user_file(Path(folder) / ADVICE_JSON, ADVICE_JSON) as fh:  # a FIFO there: no fingerprint, no wait
            head = fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except (OSError, SourceError):
        return None
    at = head.find(_TASK_MEMBER)
    if at < 0:
        return None
    try:
        task, _ = json.JSONDecoder().raw_decode(head, at + len(_TASK_MEMBER))
    except ValueError:
        return None
    return task if isinstance(task, dict) else None


def save_advice(advice: Advice) -> Path:
    path = advice.folder / ADVICE_JSON
    with atomic_file(path) as fh:
        json.dump(advice.to_dict(), fh, indent=1, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    return path


def fingerprint(doc: TaskDoc, thresholds: Thresholds | None = None) -> dict:
    """Which result (task.json's csv and saved) and thresholds an advice was made for."""
    th = thresholds.to_dict() if thresholds is not None else doc.thresholds
    return {"csv": doc.csv, "saved": doc.saved, "thresholds": th}


def jsonable(value, digits: int | None = 6):
    """Plain JSON: NaN/inf floats become None, numpy scalars Python ones, floats rounded to
    `digits` decimals (None: kept exact)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, digits) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return value if digits is None else round(value, digits)
    return value
