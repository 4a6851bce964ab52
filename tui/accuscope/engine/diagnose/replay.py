"""Headlines verified by replaying the conversion: when the candidate of an `accuscope run` task is
a conversion accuscope can make again (fp16 by onnxconverter-common, int8 by onnxruntime's
quantizer), the advisor's top-ranked ops are converted again one at a time with that op kept in
fp32, each replay is run on the task's own inputs, and the op whose exclusion helps the network
outputs most is the headline, with the gain measured ("kept in fp32: output cos 0.888 -> 0.929").

The estimate the advisor ranks by (an op's own error added to an otherwise exact run, see reach.py)
predicts what excluding the op does only where errors add up; where quantization errors interact
(PP-OCRv4 det int8: the estimated first op, kept out, moves the output from cos 0.96429 to 0.96432)
only a replay says. A replay counts only where it reproduces the candidate: the conversion with no
op kept must give the candidate's own outputs (cos >= REPRODUCES against them), else the settings
differ (per-channel scales, calibration, another block list) and the ranking stays "estimated",
with that reason.

Cost: one conversion and one run per op (0.6-1.0 s each on PP-OCRv4 det, 2 cores), cached in
TASK/replay.json by the reference model's hash, the conversion and the inputs."""
# lazy: engine.compare.lifetime, engine.compare.metrics, engine.precision.convert, engine.precision.evaluate,
# lazy: engine.precision.fromtask, engine.runs.onnxmodel
from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope.engine.diagnose.advice import VERDICT
from accuscope.engine.diagnose.rules.drift import DRIFT
from accuscope.engine.diagnose.rules.introduced import INTRODUCED
from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.sources.inputfile import json_loads, user_path
from accuscope.engine.sources.outputfile import write_text
from accuscope.engine.sources.tensor import SourceError

BUDGET = 8  # ops replayed one at a time, by default
REPRODUCES = 0.99999  # output cos of the replay with no op kept against the candidate's own outputs
CACHE = "replay.json"
FORMAT = 1


@dataclass
class Kept:
    op: str  # the candidate's op name, as the task's rows give it
    golden_op: str  # the reference's node the converter is told to keep
    output_cos: float  # the worst network output's cos with this op kept in fp32

    def to_dict(self) -> dict:
        return {"op": self.op, "golden_op": self.golden_op, "output_cos": _num(self.output_cos)}


@dataclass
class Verification:
    """What replaying the conversion measured (`replayed` False: why not, in `reason`)."""

    to: str = ""  # "fp16" or "int8"
    replayed: bool = False
    reason: str = ""
    full_cos: float = math.nan  # the replay with no op kept, against the reference outputs
    reproduces_cos: float = math.nan  # that replay against the candidate's own outputs
    candidate_cos: float = math.nan  # the candidate's own outputs against the reference's
    how: str = ""  # the converter and settings replayed
    kept: list[Kept] = field(default_factory=list)  # best first
    together: list[str] = field(default_factory=list)  # the ops that help, kept together
    together_cos: float = math.nan
    cached: int = 0
    seconds: float = 0.0

    @property
    def best(self) -> Kept | None:
        return self.kept[0] if self.kept and self.gain(self.kept[0]) > 0 else None

    def gain(self, k: Kept) -> float:
        """How much of the output error (1 - cos) keeping `k` removes, as a fraction."""
        error = 1.0 - self.full_cos
        return (k.output_cos - self.full_cos) / error if error > 0 else 0.0

    def to_dict(self) -> dict:
        return {"to": self.to, "replayed": self.replayed, "reason": self.reason, "full_cos": _num(self.full_cos),
                "reproduces_cos": _num(self.reproduces_cos), "candidate_cos": _num(self.candidate_cos), "how": self.how,
                "kept": [k.to_dict() for k in self.kept],
                "together": self.together, "together_cos": _num(self.together_cos), "cached": self.cached,
                "seconds": round(self.seconds, 3)}

    @classmethod
    def from_dict(cls, d: dict) -> Verification:
        kept = [Kept(str(k.get("op", "")), str(k.get("golden_op", "")), _float(k.get("output_cos")))
                for k in d.get("kept") or [] if isinstance(k, dict)]
        return cls(str(d.get("to", "")), bool(d.get("replayed")), str(d.get("reason", "")), _float(d.get("full_cos")),
                   _float(d.get("reproduces_cos")), _float(d.get("candidate_cos")), str(d.get("how", "")), kept, [str(x) for x in d.get("together") or []],
                   _float(d.get("together_cos")), int(d.get("cached") or 0), float(d.get("seconds") or 0.0))


def _num(v: float):
    return None if v is None or math.isnan(v) else round(float(v), 9)


def _float(v) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def verify(task, ops: list[tuple[str, str]], budget: int = BUDGET, cancel: threading.Event | None = None,
           progress: OnProgress | None = None) -> Verification:
    """Replay the conversion of `task`'s candidate once per op of `ops` ((candidate op, reference
    node) best-estimated first, the first `budget`), each with only that op kept in fp32 (`progress`:
    replays done). Never raises for a task that cannot be replayed: the Verification says why."""
    start = time.perf_counter()
    try:
        setup = _Setup.of(task)
    except SourceError as exc:
        return Verification(reason=str(exc), seconds=time.perf_counter() - start)
    v = Verification(to=setup.to, candidate_cos=_worst_cos(setup.candidate, setup.golden), how=setup.how)
    cache = setup.cache()
    wanted = [(op, g) for op, g in dict.fromkeys(ops) if g][:budget]
    try:
        full = setup.measure([], cache)
        v.full_cos, v.reproduces_cos = full
        if not v.reproduces_cos >= REPRODUCES:
            v.reason = (f"converting the reference again to {setup.to} ({setup.how}) gives output cos "
                        f"{v.reproduces_cos:.6f} against the candidate's own outputs: the candidate was made with "
                        "other settings, so excluding an op cannot be replayed")
            return v
        v.replayed = True
        v.kept = sorted(_each(setup, wanted, cache, cancel, progress), key=lambda k: -k.output_cos)
        v.kept.sort(key=lambda k: -k.output_cos)
        helping = [k for k in v.kept if v.gain(k) > 0.01]
        if len(helping) > 1:
            v.together = [k.golden_op for k in helping[:3]]
            v.together_cos = setup.measure(v.together, cache)[0]
    except Exception as exc:  # noqa: BLE001 - converters and onnxruntime raise their own types
        v.replayed, v.reason = False, f"the replay failed: {type(exc).__name__}: {str(exc)[:300]}"
    finally:
        v.cached = setup.hits
        setup.save(cache)
        v.seconds = time.perf_counter() - start
    return v


def _each(setup: _Setup, wanted: list[tuple[str, str]], cache: dict, cancel: threading.Event | None,
          progress: OnProgress | None) -> list[Kept]:
    """One replay per op. Those not cached run in a pool of processes, one per core (the converters are
    not thread-safe: they set the root logger's level and the warning filters; each process converts
    and runs its own), in this process where one core or one replay is all there is."""
    todo = [g for _, g in wanted if g not in cache]
    workers = min(os.cpu_count() or 1, len(todo))
    pooled: set[str] = set()  # replayed now, in the pool: no cache hits
    if workers > 1 and not (cancel is not None and cancel.is_set()):
        pooled = _in_pool(setup, todo, cache, workers, cancel, progress, len(wanted))
    done: list[Kept] = []
    for op, golden in wanted:
        if cancel is not None and cancel.is_set():
            break
        cos = _float(cache[golden][0]) if golden in pooled else setup.measure([golden], cache)[0]
        done.append(Kept(op, golden, cos))
        if progress is not None:
            progress(Progress(len(done), len(wanted), "replaying"))
    return done


def _in_pool(setup: _Setup, todo: list[str], cache: dict, workers: int, cancel: threading.Event | None,
             progress: OnProgress | None, total: int) -> set[str]:
    """The replays of `todo` (one op kept each) in `workers` processes (lifetime.process_context: the
    safe path, ended with this process), their results into `cache` as they finish; the ops replayed."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from accuscope.engine.compare.lifetime import process_context
    state = (setup.reference.SerializeToString(), setup.to, setup.feeds, setup.golden, setup.candidate)
    with ProcessPoolExecutor(workers, mp_context=process_context(), initializer=_worker_start,
                             initargs=(os.getpid(), state)) as pool:
        pending = {pool.submit(_replay_one, golden): golden for golden in todo}
        replayed: set[str] = set()
        while pending:
            if cancel is not None and cancel.is_set():
                for f in pending:
                    f.cancel()
                break
            finished, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for f in finished:
                golden = pending.pop(f)
                cache[golden] = list(f.result())
                replayed.add(golden)
                if progress is not None:
                    progress(Progress(len(replayed), total, "replaying"))
    return replayed


_WORKER: dict = {}  # a pool process's reference model, inputs and outputs to measure against


def _worker_start(main_pid: int, state: tuple) -> None:
    import onnx

    from accuscope.engine.compare.lifetime import die_with_parent
    die_with_parent(main_pid)
    model, to, feeds, golden, candidate = state
    _WORKER.update(reference=onnx.load_model_from_string(model), to=to, feeds=feeds, golden=golden,
                   candidate=candidate)


def _replay_one(golden_op: str) -> tuple[float, float]:
    w = _WORKER
    return conversion_cos(w["reference"], w["to"], [golden_op], w["feeds"], w["golden"], w["candidate"], threads=1)


def conversion_cos(reference, to: str, keep: list[str], feeds: dict, golden: list, candidate: list,
                   threads: int = 0) -> tuple[float, float]:
    """(worst output cos against the reference's outputs, against the candidate's) of the reference
    converted to `to` with `keep` kept in fp32, run on `feeds` (with `threads` onnxruntime threads: one
    in a pool process, the pool being one per core)."""
    from accuscope.engine.precision.convert import convert
    from accuscope.engine.precision.evaluate import run_outputs
    outputs = run_outputs(convert(reference, to, keep), feeds, threads)
    return _worst_cos(outputs, golden), _worst_cos(outputs, candidate)


def replayable(task) -> str:
    """The conversion `verify` would replay ("fp16" / "int8"), or "" (cheap: reads the candidate
    model's node types only)."""
    from accuscope.engine.precision.convert import recognise
    npu = task.path("npu")
    return recognise(npu / "model.onnx") if npu is not None else ""


class _Setup:
    """The reference as the converters take it, the inputs, the outputs to measure against."""

    def __init__(self, task, fw: Path, to: str, feeds: dict[str, np.ndarray]):
        from accuscope.engine.precision.convert import prepare
        from accuscope.engine.precision.evaluate import run_outputs
        self.folder, self.to, self.feeds, self.hits = Path(task.folder), to, feeds, 0
        self.how = {"fp16": "onnxconverter-common, keep_io_types", "int8": "onnxruntime quantize_dynamic, QInt8 weights"}[to]
        self.reference = prepare(fw)
        self.golden = run_outputs(self.reference, feeds)
        candidate = task.path("npu") / "model.onnx"
        import onnx
        self.candidate = run_outputs(onnx.load(user_path(candidate, "candidate model")), feeds)
        digest = hashlib.sha256(self.reference.SerializeToString())
        digest.update(to.encode())
        for k in sorted(feeds):
            digest.update(k.encode())
            digest.update(np.ascontiguousarray(feeds[k]).tobytes())
        digest.update(hashlib.sha256(candidate.read_bytes()).digest())
        self.key = digest.hexdigest()

    @classmethod
    def of(cls, task) -> _Setup:
        from accuscope.engine.precision.fromtask import spec_from_task
        from accuscope.engine.runs.onnxmodel import prepare_inputs
        to = replayable(task)
        if not to:
            raise SourceError("the candidate is not a conversion accuscope can make again (an fp16 model from "
                              "onnxconverter-common or an int8 one from onnxruntime's quantizer, run by `accuscope run`)")
        if to == "int8-static":
            raise SourceError("the candidate was quantized statically (QuantizeLinear/DequantizeLinear): replaying it "
                              "needs its calibration data, which the task does not record")
        fw, _ = task.framework_model
        if fw is None or fw.suffix.lower() != ".onnx":
            raise SourceError("no ONNX reference model to convert again (the task's framework model)")
        spec = spec_from_task(task, fw)
        from accuscope.engine.precision.convert import prepare
        feeds = {k: v[0] for k, v in prepare_inputs(prepare(fw), str(fw), spec.inputs, False, 0, None).items()}
        return cls(task, fw, to, feeds)

    def measure(self, keep: list[str], cache: dict) -> tuple[float, float]:
        """(worst output cos against the reference, against the candidate) of the conversion
        with `keep` kept in fp32."""
        key = "\n".join(sorted(keep))
        if key in cache:
            self.hits += 1
            got = cache[key]
            return _float(got[0]), _float(got[1])
        got = conversion_cos(self.reference, self.to, keep, self.feeds, self.golden, self.candidate)
        cache[key] = list(got)
        return got

    def cache(self) -> dict:
        try:
            doc = json_loads((self.folder / CACHE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != self.key:
            return {}
        runs = doc.get("runs")
        return {k: v for k, v in runs.items() if isinstance(v, list) and len(v) == 2} if isinstance(runs, dict) else {}

    def save(self, cache: dict) -> None:
        import json
        try:
            write_text(self.folder / CACHE, json.dumps({"format": FORMAT, "key": self.key, "to": self.to,
                                                        "runs": cache}, indent=1))
        except OSError:
            pass  # a cache we cannot write costs the next run time, nothing else


def _worst_cos(outputs: list[np.ndarray], against: list[np.ndarray]) -> float:
    from accuscope.engine.compare.metrics import compare_arrays
    values = [compare_arrays(np.asarray(o), np.asarray(g), kl=False).values.get("cos", math.nan)
              for o, g in zip(outputs, against)]
    finite = [x for x in values if not math.isnan(x)]
    return min(finite) if finite and len(finite) == len(values) else math.nan


# ------------------------------------------------------------------ what the advice says with it

def ranked_ops(findings: list, origins: list, golden_op_of: Callable[[int], str]) -> list[tuple[str, str]]:
    """(candidate op, reference node) to replay, best-estimated first: the introduced-op finding's
    op and its runners-up, then every other op that introduced error."""
    intro = next((f for f in findings if f.rule == INTRODUCED), None)
    names = ([intro.op, *intro.evidence.get("also", [])] if intro is not None else [])
    rows = {o.op: o.rows for o in origins if o.rows}
    names += [o.op for o in origins if o.origin == "introduced"]
    return [(op, golden_op_of(rows[op][0])) for op in dict.fromkeys(names) if op in rows]


def revise(findings: list, v: Verification, row_of: Callable[[str], int | None]) -> list:
    """`findings` with the introduced-op finding (and the drift one) told by the measured replays:
    the headline is the op whose exclusion helped most; where the conversion could not be replayed
    the ranking says it is estimated, and why."""
    from dataclasses import replace
    out = []
    for f in findings:
        ev = {**f.evidence}
        if f.rule == INTRODUCED:
            if not v.replayed:
                ev["ranking"] = "estimated"
                f = replace(f, text=f"{f.text} Ranking estimated: {v.reason}.", evidence=ev)
            elif v.best is not None:
                best = v.best
                ev.update(ranking="verified", verified=v.to_dict(), estimated_op=f.op)
                row = row_of(best.op)
                moved = "" if best.op == f.op else f" (the estimate ranked {f.op} first)"
                text = (f"Converted to {v.to} again with only {best.op} ({best.golden_op}) kept in fp32, the output "
                        f"goes from cos {v.full_cos:.4f} to {best.output_cos:.4f}: {_pct(v.gain(best))} of its error "
                        f"removed, the most of the {len(v.kept)} ops replayed{moved}. {_others(v)}{_together(v)}"
                        f"Keep it in fp32 (node_block_list / nodes_to_exclude {best.golden_op}), then compare again.")
                f = replace(f, title=f"{best.op}: kept in fp32, output cos {v.full_cos:.4f} -> {best.output_cos:.4f} "
                            "(verified)", text=text, row=row if row is not None else f.row, op=best.op,
                            tensor="" if row is not None and row != f.row else f.tensor, evidence=ev)
            else:
                ev.update(ranking="verified", verified=v.to_dict())
                f = replace(f, text=f"{f.text} Replayed: keeping any one of the {len(v.kept)} top ops in fp32 "
                            f"leaves the output at cos {v.full_cos:.4f} or worse; no single op is the cause.{_together(v, ' ')}",
                            evidence=ev)
        elif f.rule == VERDICT and not math.isnan(v.full_cos):
            ev["cause"] = "precision" if v.replayed else "settings"
            lead, sep, rest = f.text.partition(" The findings below")  # the cause before the pointer to them
            f = replace(f, text=f"{lead} {_branch(v)}{sep}{rest}", evidence=ev)
        elif f.rule == DRIFT and v.replayed and v.together:
            ev["verified"] = v.to_dict()
            f = replace(f, text=f"{f.text}{_together(v, ' ')}", evidence=ev)
        out.append(f)
    return out


def _branch(v: Verification) -> str:
    """Which branch of the three-sided procedure the replay puts the error in: the precision itself
    (the reference converted again gives the candidate's outputs), or the conversion's settings /
    the implementation (it does not)."""
    if v.replayed:
        return (f"The precision itself: the reference converted to {v.to} again ({v.how}) gives the candidate's "
                f"outputs (cos {v.reproduces_cos:.6f} against them), so the error is what {v.to} does to this "
                "model, not a faulty kernel: keep the ops named below in higher precision.")
    if v.full_cos > v.candidate_cos + 0.1 * (1.0 - v.candidate_cos):
        return (f"Check the conversion's settings first: converted to {v.to} again with default settings ({v.how}) "
                f"the output reaches cos {v.full_cos:.4f}, where the candidate's gives {v.candidate_cos:.4f}.")
    return (f"Not the conversion's settings: converted to {v.to} again with default settings ({v.how}) the output "
            f"is no better (cos {v.full_cos:.4f}; the candidate's {v.candidate_cos:.4f}).")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _others(v: Verification) -> str:
    rest = [k for k in v.kept[1:4]]
    return ("Others kept alone: " + ", ".join(f"{k.op} cos {k.output_cos:.4f}" for k in rest) + ". ") if rest else ""


def _together(v: Verification, lead: str = "") -> str:
    if not v.together or math.isnan(v.together_cos):
        return ""
    alone = sum(max(0.0, v.gain(k)) for k in v.kept if k.golden_op in v.together)
    together = (v.together_cos - v.full_cos) / (1.0 - v.full_cos) if v.full_cos < 1 else 0.0
    how = " (more than the sum alone: these help only together)" if together > 1.5 * alone else ""
    return (f"{lead}Kept together, {', '.join(v.together)} take the output to cos {v.together_cos:.4f}, "
            f"{_pct(together)} of its error removed{how}. ")
