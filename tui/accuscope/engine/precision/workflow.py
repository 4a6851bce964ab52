"""A whole precision search in DIR: prepare the reference, rank its ops (a task of the full
conversion against the reference, ranked by engine.diagnose.sensitivity), search (each trial runs
only the candidate against the reference outputs computed once), write the result files and a
task of the final model against the reference's dump (made for the ranking, so dumped once).

DIR/reference.onnx   the reference as converted (weights as initializers, nodes named)
DIR/full.onnx        the conversion with no op kept: what failed
DIR/ranking/         the task the ranking comes from (open it in the app)
DIR/trials.jsonl     the trial log (resume reads it), ending in the list found and its files
DIR/result/          the outputs (see outputs.py) and result/task, the final model's task"""
from __future__ import annotations

import hashlib
import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.diagnose.sensitivity import sensitivity
from accuscope.engine.precision.convert import TARGETS, candidates, convert, prepare, require
from accuscope.engine.precision.evaluate import Evaluator, Target, run_outputs
from accuscope.engine.precision.outputs import write_outputs
from accuscope.engine.precision.recipe import obstacles
from accuscope.engine.precision.search import Outcome, Search
from accuscope.engine.precision.spec import PrecisionSpec
from accuscope.engine.precision.trials import Trial, TrialLog
from accuscope.engine.runs.onnxmodel import load_model, prepare_inputs
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sources.outputfile import atomic_path
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.taskrun import run_task


@dataclass
class Event:
    """What the search is doing: stage "ranking" (with the advisor's detail), "trial" (one finished)
    or "writing"."""
    stage: str
    detail: str = ""
    trial: Trial | None = None
    ranked: list[str] | None = None


@dataclass
class PrecisionResult:
    folder: Path
    outcome: Outcome
    ranked: list[str]
    candidates: list[str]
    targets: list[Target]
    full: Trial | None  # the conversion with no op kept
    files: dict[str, Path] = field(default_factory=dict)
    task: Path | None = None  # the final model's task
    resumed: int = 0  # trials taken from the log
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # the kept list given with the user's own model as it is (recipe.py): why it cannot act as on the
    # prepared model, and what that conversion measured (None: not measured, e.g. --check only)
    obstacles: list[str] = field(default_factory=list)
    as_is: dict[str, float] | None = None
    as_is_passed: bool | None = None
    command: str = ""


def run_precision(spec: PrecisionSpec, on_event: Callable[[Event], None] | None = None,
                  cancel: threading.Event | None = None) -> PrecisionResult:
    """The search of `spec` (resumed from DIR/trials.jsonl when it holds one). SourceError for
    unusable input; a trial whose candidate cannot be made or run is a failed trial with its reason."""
    start = time.monotonic()
    emit = on_event or (lambda e: None)
    if spec.to not in TARGETS:
        raise SourceError(f"--to {spec.to}: choose {' or '.join(TARGETS)}")
    require(spec.to)
    if not spec.targets and not spec.check:
        raise SourceError("give a --target (e.g. cos=0.99) or a --check command")
    out = Path(spec.out)
    if out.is_file():
        raise SourceError(f"--out {out}: is a file, not a folder")
    reference = prepare(spec.model)
    feeds = {k: v[0] for k, v in prepare_inputs(reference, spec.model, spec.inputs, spec.random_inputs,
                                                  spec.seed, spec.dims).items()}
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"--out {out}: cannot create the folder ({exc.strerror})") from None
    ref_path = out / "reference.onnx"
    _save(reference, ref_path)
    names = candidates(reference, spec.to, spec.calibration)
    settings = {"model": str(Path(spec.model).resolve()), "to": spec.to, "targets": [str(t) for t in spec.targets],
                "calibration": spec.calibration and str(Path(spec.calibration).resolve()), "check": spec.check,
                "inputs": _digest(feeds)}
    log = TrialLog(out)
    header, done, ranking = log.open(settings)
    if header:
        log.rewrite(header, done, ranking)
    else:
        log.start(settings)
    notes: list[str] = list(ranking["notes"]) if ranking else []
    for t in done:
        emit(Event("trial", "from the log", trial=t))

    def rank() -> list[str]:
        """The ranking: from the log, else made now (only the full conversion's miss needs it)."""
        if ranking is not None:
            ranked = ranking["ranked"]
        else:
            ranked, made = _rank(reference, ref_path, spec, feeds, out, emit)
            notes.extend(made)
            log.append_ranking(ranked, made)
        emit(Event("ranking", "ranked", ranked=ranked))
        return ranked

    try:
        golden = run_outputs(reference, feeds)  # the reference, run once for every trial
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise SourceError(f"{spec.model}: onnxruntime cannot run the reference ({exc})".splitlines()[0]) from None
    evaluator = Evaluator(golden, feeds, spec.targets, spec.check, out / "check")

    def evaluate(keep: list[str], phase: str, n: int) -> Trial:
        t0 = time.monotonic()
        trial = Trial(n, phase, keep)
        try:
            model = convert(reference, spec.to, keep, spec.calibration)
            trial.values = evaluator.measure(model) if spec.targets else {}
            trial.passed = evaluator.passes(trial.values)
            if spec.check:
                trial.check = evaluator.run_check(model, keep)
                trial.passed = trial.check == 0
        except SourceError:
            raise
        except Exception as exc:  # noqa: BLE001 - converters and onnxruntime raise their own exception types
            trial.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            trial.values = {t.metric: math.nan for t in spec.targets}
        trial.seconds = time.monotonic() - t0
        log.append(trial)
        emit(Event("trial", trial=trial))
        return trial

    search = Search(evaluate, rank, names, done, max_trials=spec.max_trials, seconds=spec.seconds, cancel=cancel)
    outcome = search.run()
    result = PrecisionResult(out, outcome, search.ranked, names, spec.targets,
                             next((t for t in outcome.trials if not t.keep), None), resumed=len(done), notes=notes)
    if outcome.met and not (cancel is not None and cancel.is_set()):
        emit(Event("writing", "the result files and its task"))
        mixed = convert(reference, spec.to, outcome.keep, spec.calibration)
        original = load_model(spec.model)
        result.obstacles = obstacles(original, outcome.keep, spec.to)
        if spec.targets:
            result.as_is, result.as_is_passed = _as_is(spec, outcome.keep, evaluator)
            if result.as_is_passed is False and not result.obstacles:
                result.obstacles = [f"given with {Path(spec.model).name} as it is, the list misses the target"]
        result.files = write_outputs(out / "result", reference, mixed, spec.to, outcome.keep, names, original=original,
                                     original_path=spec.model, calibration=spec.calibration,
                                     obstacles=result.obstacles)
        result.command = result.files["command"].read_text(encoding="utf-8").strip()
        result.task = _final_task(result.files["model"], out, feeds)
    if not (cancel is not None and cancel.is_set()):  # a cancelled search resumes: no end yet
        log.append_final(outcome.met, outcome.keep, outcome.reason,
                         {key: path.relative_to(out).as_posix() for key, path in result.files.items()})
    result.seconds = time.monotonic() - start
    return result


def _as_is(spec: PrecisionSpec, keep: list[str], evaluator: Evaluator) -> tuple[dict[str, float] | None, bool | None]:
    """The list given to the converter with the user's own model, unprepared, measured as a trial is."""
    try:
        model = convert(load_model(spec.model), spec.to, keep, spec.calibration)
        values = evaluator.measure(model)
    except Exception:  # noqa: BLE001 - converters and onnxruntime raise their own exception types
        return None, False
    return values, evaluator.passes(values)


def _save(model, path: Path) -> None:
    import onnx
    try:
        with atomic_path(path) as tmp:
            onnx.save(model, str(tmp))
    except OSError as exc:
        raise SourceError(f"{path}: cannot write ({exc.strerror})") from None


def _digest(feeds: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(feeds):
        a = np.ascontiguousarray(feeds[name])
        h.update(f"{name}{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _rank(reference, ref_path: Path, spec: PrecisionSpec, feeds, out: Path, emit) -> tuple[list[str], list[str]]:
    """The ops the sensitivity ranking blames, worst first: a task of the full conversion against
    the reference in DIR/ranking, advised on with the reference as the framework model."""
    full = out / "full.onnx"
    try:
        _save(convert(reference, spec.to, [], spec.calibration), full)
    except SourceError:
        raise
    except Exception as exc:  # noqa: BLE001 - converters raise their own exception types
        return [], [f"the full conversion failed ({type(exc).__name__}: {exc}); no ranking: bisection only"]
    task = out / "ranking"
    npu = task / "dumps" / "npu"
    if npu.exists():
        shutil.rmtree(npu)  # an earlier ranking cut short
    try:
        emit(Event("ranking", "running the reference"))
        golden = _reference_dump(ref_path, out, feeds)
        emit(Event("ranking", "running the full conversion"))
        dump_onnx(full, npu, feeds, optimization="off")
        emit(Event("ranking", "comparing"))
        run_task(CompareSpec(str(npu), str(golden)), task)
        ranking = sensitivity(task, ref_path, progress=lambda p: emit(Event("ranking", f"{p.what} {p.done}/{p.total}")))
    except SourceError as exc:
        return [], [f"no ranking ({exc}): bisection over execution order only"]
    return ranking.block_list(), list(ranking.notes)


def _reference_dump(ref_path: Path, out: Path, feeds) -> Path:
    """DIR/ranking/dumps/golden: every node output of the reference, dumped once for the ranking's
    task and the final model's (a folder without dump.json was cut short: dumped again)."""
    golden = out / "ranking" / "dumps" / "golden"
    if not (golden / "dump.json").is_file():
        shutil.rmtree(golden, ignore_errors=True)
        dump_onnx(ref_path, golden, feeds, optimization="off")
    return golden


def _final_task(model: Path, out: Path, feeds) -> Path:
    """A task of the final model against the reference's dump."""
    golden = _reference_dump(out / "reference.onnx", out, feeds)
    task = out / "result" / "task"
    npu = task / "dumps" / "npu"
    if npu.exists():
        shutil.rmtree(npu)
    dump_onnx(model, npu, feeds, optimization="off")
    run_task(CompareSpec(str(npu), str(golden)), task)
    return task
