"""The sensitivity ranking of a finished task, with no new runs: the ops by how far their own error
alone reaches the network outputs (where the advisor measured it) and by the error each one made by
itself (the advisor's re-run of its framework op on the NPU side's own inputs), with what broke,
whether it introduced or inherited its error, why (the two ONNX models' difference, when both are at
hand) and the network outputs' error; plus the framework op names to keep out of a conversion, as
onnxconverter-common's `node_block_list` and onnxruntime.quantization's `nodes_to_exclude` take them.

The advisor's own advice.json is reused when it was made for the task's current result; otherwise
the advisor runs (and caches its re-runs there)."""
# lazy: engine.precision.recipe
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from accuscope.engine.compare.judgement import NOISY
from accuscope.engine.compare.pair import golden_ops
from accuscope.engine.diagnose.advice import Advice, jsonable, saved_advice
from accuscope.engine.diagnose.advisor import OpMeasure, advise
from accuscope.engine.progress import OnProgress
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import Task, load_task

_ORIGIN_ORDER = {"introduced": 0, "inherited": 1}


@dataclass
class RankedOp:
    op: str  # the NPU side's op
    row: int | None  # its first output row in the task's table (where enter jumps)
    type: str
    chain: list[str]  # its framework op(s): what the converter lists name
    origin: str  # "introduced", "inherited" or "unknown"
    method: str  # "rerun", "reported" or "input-output" (OpOrigin.method)
    error: float  # its own error: the advisor's measure (max of 1 - isolated cos and isolated rel. error)
    isolated_cos: float | None
    isolated_red: float | None
    broken: list[str]
    minor: bool  # it breaks only mean_rel: large where golden values are near zero, not a wrong op
    output_cos_alone: float | None = None  # the network output's cos with only this op's error (advisor's reach)
    cause: str = ""  # modeldiff's cause of the first difference found ("fp16_range", "quantized", ...)
    changes: list[str] = field(default_factory=list)
    why: str = ""

    @property
    def blockable(self) -> bool:
        """Whether it belongs on a converter's block list: it made error of its own beyond mean_rel."""
        return self.origin == "introduced" and not self.minor and bool(self.chain)

    @property
    def broken_text(self) -> str:
        """What it breaks, in words: the thresholds, the share of NaN/inf it made, mean_rel only."""
        text = ", ".join(self.broken) or "—"
        if "npu_nonfinite" in self.broken:
            text += f" ({100 * self.error:.2g}% NaN/inf)"
        return text + (" (only mean_rel)" if self.minor else "")

    def to_dict(self) -> dict:
        return jsonable({"op": self.op, "row": self.row, "type": self.type, "framework_ops": self.chain,
                         "origin": self.origin, "method": self.method, "error": self.error,
                         "isolated_cos": self.isolated_cos, "isolated_red": self.isolated_red,
                         "broken": self.broken, "only_mean_rel": self.minor,
                         "output_cos_alone": self.output_cos_alone, "cause": self.cause,
                         "changes": self.changes, "why": self.why}, None)


@dataclass
class Ranking:
    folder: Path
    method: str  # "rerun", "reported" (the dump tool's own single-layer figures) or "input-output" (no framework
    # model: the weaker method)
    framework_model: str
    outcome: str  # the network outputs: "fail", "pass" or "unknown"
    verdict: str  # the advisor's verdict in words
    output_cos: list[float]
    output_red: list[float]
    ops: list[RankedOp]
    notes: list[str] = field(default_factory=list)

    def top(self, n: int | None = None) -> list[RankedOp]:
        return self.ops if n is None else self.ops[:max(0, n)]

    def block_list(self, n: int | None = None) -> list[str]:
        """Framework op names of the ops that introduced error, worst first (of the first n ranked)."""
        return list(dict.fromkeys(name for o in self.top(n) if o.blockable for name in o.chain))

    def recipe(self, n: int | None = None) -> dict | None:
        """The lists of the first n ranked as the converters take them with the user's model
        (precision.recipe.for_lists, written to TASK/sensitivity/): None without an ONNX framework
        model or without a name to list."""
        names = self.block_list(n)
        model = Path(self.framework_model or "")
        if self.method != "rerun" or not names or model.suffix.lower() != ".onnx" or not model.is_file():
            return None
        from accuscope.engine.precision.recipe import for_lists
        return for_lists(self.folder / "sensitivity", model, names)

    def to_dict(self, n: int | None = None, recipe: dict | None = None) -> dict:
        names = self.block_list(n)
        extra = {} if recipe is None else {
            "prepared": str(recipe["prepared"]) if recipe["prepared"] else None,
            "obstacles": recipe["obstacles"], "commands": recipe["commands"]}
        return jsonable({"task": str(self.folder), "method": self.method, "framework_model": self.framework_model,
                         "outcome": self.outcome, "verdict": self.verdict, "output_cos": self.output_cos,
                         "output_red": self.output_red, "ops": [o.to_dict() for o in self.top(n)],
                         "node_block_list": names, "nodes_to_exclude": names, **extra, "notes": self.notes}, None)


def sensitivity(task_folder: str | os.PathLike, framework_model: str | os.PathLike | None = None, *,
                advice: Advice | None = None, progress: OnProgress | None = None,
                workers: int | None = None) -> Ranking:
    """Rank the ops of a finished task. `advice`: the advice to rank (else advice.json when made
    for the current result and the same framework model, else the advisor runs). SourceError for an
    unusable task folder."""
    task = load_task(task_folder)
    if advice is None:
        advice = saved_advice(task.folder, task.doc, task.thresholds, framework_model)
    if advice is None:
        advice = advise(task, framework_model, progress=progress, workers=workers)  # its plan serves rank too
        if advice is None:  # only when cancelled, and nothing cancels here
            raise SourceError(f"{task_folder}: advising was cancelled")
    return rank(task, advice)


def rank(task: Task, advice: Advice) -> Ranking:
    """The ranking of an advice's failing ops on its task (reads both models when they are ONNX)."""
    measure = OpMeasure(task, advice.framework_model if advice.method == "rerun" else None)
    table, _ = task.result
    c = table.columns
    n = len(table)
    ranked = []
    for k, o in enumerate(advice.ops):
        row = o.rows[0] if o.rows and 0 <= o.rows[0] < n else None
        given = o.evidence.get("chain")  # the advisor's, else the row's golden ops
        chain = golden_ops(",".join(map(str, given)) if isinstance(given, list)
                           else c["golden_op"][row] if row is not None else "")
        given_reds = [x.get("red") for x in (o.isolated or {}).get("outputs", []) if isinstance(x, dict)]
        reds = [float(r) for r in given_reds if isinstance(r, (int, float)) and not math.isnan(r)]
        r = RankedOp(o.op, row, str(c["type"][row]) if row is not None else "", chain, o.origin, o.method,
                     measure.effect(o), o.isolated_cos, max(reds) if reds else None, list(o.broken),
                     bool(o.broken) and set(o.broken) <= NOISY, why=o.why)
        alone = o.evidence.get("output_cos_alone")
        r.output_cos_alone = float(alone) if isinstance(alone, (int, float)) else None
        if r.origin == "introduced" and r.method == "rerun":
            found = measure.changes(o)  # most telling cause first
            r.changes = [d.text for d in found]
            r.cause = found[0].cause if found else ""
        ranked.append((k, r))
    # like the advisor: how far an op's own error alone reaches the outputs first (where it measured
    # that), then the error each op made by itself; the weak method's output-versus-input errors mostly
    # measure amplification, so among those execution order stays
    measured = ("rerun", "reported")  # an op's own error: a re-run's, or the dump tool's (RKNN's single cos)
    ranked.sort(key=lambda kr: (kr[1].minor, _ORIGIN_ORDER.get(kr[1].origin, 2), kr[1].method not in measured,
                                kr[1].output_cos_alone is None, kr[1].output_cos_alone or 0.0,
                                -kr[1].error if kr[1].method in measured else kr[0]))
    verdict = next((f for f in advice.findings if f.rule == "verdict"), None)
    outcome = {"error": "fail", "info": "pass"}.get(verdict.severity, "unknown") if verdict else "unknown"
    ev = verdict.evidence if verdict else {}
    notes = list(advice.notes) + measure.notes
    if advice.method == "reported":
        notes.insert(0, "no framework model to re-run ops from: the ranking uses the dump tool's own single-layer "
                        "figures (RKNN's error_analysis.txt) where it gives them, else the weaker input/output method")
    elif advice.method != "rerun":
        notes.insert(0, "no framework model to re-run ops from: the ranking uses the weaker input/output method "
                        "(an op's output error beyond its worst input's; ops that amplify error get blamed)")
    return Ranking(Path(task.folder), advice.method, advice.framework_model, outcome,
                   verdict.title if verdict else "no verdict", _floats(ev.get("output_cos")),
                   _floats(ev.get("output_red")), [r for _, r in ranked], notes)


def _floats(v) -> list[float]:
    return [float(x) if isinstance(x, (int, float)) else math.nan for x in v] if isinstance(v, list) else []
