"""Re-testing an export: run the framework submodel with onnxruntime on the NPU side's boundary
inputs and compare with the NPU side's outputs, as a task of its own linked to the parent. Agreement
means the ops inside compute what the framework computes from the same inputs (the error came from
upstream); disagreement means the error lives inside the submodel."""
# lazy: engine.compare.spec, engine.runs.ortdump, engine.sides.registry, engine.tasks.taskdoc, engine.tasks.taskrun
from __future__ import annotations

import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope.engine.compare.judgement import pair_broken
from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.export.layout import (
    INSIDE,
    LONG_NAME,
    NO_ERROR,
    UNKNOWN,
    UPSTREAM,
    cancelled,
    read_manifest,
)
from accuscope.engine.export.submodel import EXPORTING, np_dtype
from accuscope.engine.progress import OnProgress, Reporter
from accuscope.engine.runs.onnxmodel import onnx_module
from accuscope.engine.sources import kinds
from accuscope.engine.sources.npyfile import user_npy
from accuscope.engine.sources.tensor import OUTPUT, SourceError, TensorError, sanitize
from accuscope.engine.tasks.task import RETEST_DIR, TaskFolder


@dataclass
class OutputCheck:
    """One boundary output in the re-test. Cosines are NaN where a side is missing."""

    tensor: str
    producer: str
    index: int
    npu_tensor: str = ""  # the NPU tensor standing for it (`op:output:j`), "" if none
    parent_cos: float = math.nan  # NPU vs golden: the error the parent task saw
    retest_cos: float = math.nan  # NPU vs the submodel run on the NPU side's inputs
    golden_cos: float = math.nan  # the submodel run on golden inputs vs golden (the export is faithful)
    parent_broken: list[str] = field(default_factory=list)  # thresholds broken by NPU vs golden
    retest_broken: list[str] = field(default_factory=list)  # thresholds broken by NPU vs re-run
    reason: str = ""  # why something could not be compared

    @property
    def comparable(self) -> bool:
        return not math.isnan(self.retest_cos) or bool(self.retest_broken)


@dataclass
class RetestResult:
    export_dir: Path
    task_dir: Path | None  # the re-test task folder (None when there was nothing to compare)
    verdict: str  # "inside", "upstream", "none" (no error at the outputs) or "unknown"
    message: str
    outputs: list[OutputCheck] = field(default_factory=list)
    substituted: list[str] = field(default_factory=list)  # inputs fed with golden data (no NPU tensor)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ------------------------------------------------------------------ re-test


def run_retest(export_dir: str | os.PathLike, progress: OnProgress | None = None,
               cancel: threading.Event | None = None) -> RetestResult:
    """Run the exported submodel on the NPU side's inputs and compare with the NPU side's outputs.

    Writes `EXPORT/retest/` (a task folder whose task.json names the parent task under "parent")
    and returns the verdict: "inside" (the re-run disagrees with the NPU outputs: the error is made
    inside the region), "upstream" (it agrees while the NPU outputs disagree with golden: the error
    came in with the inputs), "none" (nothing disagrees) or "unknown" (nothing to compare)."""
    started = time.perf_counter()
    root = Path(export_dir)
    manifest = read_manifest(root)
    if manifest.get("kind") != kinds.ONNX:
        raise SourceError(f"{root}: a {manifest.get('kind')} submodel cannot be re-tested here (only ONNX "
                          "submodels run, with onnxruntime)")
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise SourceError(f"re-testing needs onnxruntime (pip install 'accuscope[onnx]'): {exc}") from None
    say = Reporter(progress)
    model_path = root / manifest["model"]
    thresholds = _thresholds(manifest)
    result = RetestResult(root, None, UNKNOWN, "")
    entries_in, entries_out = manifest["boundary"]["inputs"], manifest["boundary"]["outputs"]
    onnx = onnx_module(EXPORTING)
    sub = onnx.load(str(model_path), load_external_data=False)
    want_dtype = {v.name: np_dtype(onnx, v.type.tensor_type.elem_type) for v in sub.graph.input}

    say("loading the inputs", 0, 4)
    npu_feeds, golden_feeds = {}, {}
    for e in entries_in:
        golden = _read_side(root, e, "golden")
        npu = _read_side(root, e, "npu")
        if npu is None and golden is not None:
            result.substituted.append(e["name"])
            npu = golden
        if npu is None:
            raise SourceError(f"{root}: no data for input {e['name']} on either side: cannot run the submodel")
        dt = want_dtype.get(e["name"])
        npu_feeds[e["name"]] = np.ascontiguousarray(npu, dtype=dt) if dt is not None else npu
        if golden is not None:
            golden_feeds[e["name"]] = np.ascontiguousarray(golden, dtype=dt) if dt is not None else golden
    if result.substituted:
        result.notes.append("no NPU tensor for input(s) " + ", ".join(result.substituted) + ": golden data used")

    say("running the submodel on the NPU inputs", 1, 4)
    rerun_dir = root / RETEST_DIR / "golden"
    if rerun_dir.exists():
        shutil.rmtree(rerun_dir)
    from accuscope.engine.runs.ortdump import dump_onnx
    ts = int(time.time() * 1e6)
    dump_onnx(model_path, rerun_dir, npu_feeds, timestamp=ts)
    _name_inputs_by_producer(rerun_dir, entries_in, ts)
    from accuscope.engine.sides.registry import open_golden
    rerun = open_golden(rerun_dir)

    golden_run: dict[str, np.ndarray] = {}
    if len(golden_feeds) == len(entries_in):
        say("running the submodel on the golden inputs", 2, 4)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as dumps are made
        options.log_severity_level = 3
        session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        golden_run = dict(zip(names, session.run(None, golden_feeds)))
    else:
        result.notes.append("golden inputs incomplete: the submodel was not checked against golden")

    if cancelled(cancel):
        result.message = "cancelled"
        return result
    say("comparing", 3, 4)
    for e in entries_out:
        result.outputs.append(_check_output(root, e, rerun, golden_run, thresholds))
    result.task_dir = _retest_task(root, manifest, rerun_dir, thresholds, result.notes)
    _verdict(result)
    if result.task_dir is not None:
        task = TaskFolder.at(result.task_dir)
        task.mark(task.doc.state or "done", retest={
            "verdict": result.verdict, "message": result.message, "substituted": result.substituted,
            "outputs": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in vars(o).items()}
                        for o in result.outputs]})
    say("done", 4, 4)
    result.seconds = time.perf_counter() - started
    return result


retest = run_retest  # `export(..., retest=True)` takes the name for its flag


def _thresholds(manifest: dict) -> Thresholds:
    try:
        return Thresholds.from_dict(manifest.get("thresholds"))
    except (ValueError, TypeError, AttributeError):
        return Thresholds()


def _read_side(root: Path, entry: dict, side: str) -> np.ndarray | None:
    info = entry.get(side)
    if not info:
        return None
    try:
        return user_npy(str(root / info["npy"]), "exported data file")
    except (OSError, ValueError, KeyError):  # SourceError too (a ValueError): missing, a FIFO, damaged
        return None


def _name_inputs_by_producer(rerun_dir: Path, entries: list[dict], ts: int) -> None:
    """dump_onnx names an input file after the tensor; the mapping looks an op's input up as its
    producer's output, so a copy under that name is added too."""
    for e in entries:
        if not e.get("producer"):
            continue
        src = rerun_dir / f"{sanitize(e['name'])}.0.{ts}.npy"
        dst = rerun_dir / f"{sanitize(e['producer'])}.{e['index']}.{ts}.npy"
        if src.is_file() and not dst.exists() and len(dst.name.encode()) <= LONG_NAME:
            shutil.copyfile(src, dst)


def _check_output(root: Path, e: dict, rerun, golden_run: dict, thresholds: Thresholds) -> OutputCheck:
    check = OutputCheck(e["name"], e.get("producer") or "", int(e.get("index") or 0),
                        (e.get("npu") or {}).get("tensor", ""))
    npu, golden = _read_side(root, e, "npu"), _read_side(root, e, "golden")
    found = rerun.find(check.producer, OUTPUT, check.index) if check.producer else None
    mine = None
    if found is not None:
        try:
            mine = np.asarray(found.load())
        except (TensorError, OSError, ValueError):
            mine = None
    reasons = []
    if npu is None:
        reasons.append("no NPU tensor")
    if npu is not None and golden is not None:
        m = compare_arrays(npu, golden)
        check.parent_cos, check.parent_broken = m.values.get("cos", math.nan), pair_broken(thresholds, m)
    if npu is not None and mine is not None:
        m = compare_arrays(npu, mine)
        check.retest_cos, check.retest_broken = m.values.get("cos", math.nan), pair_broken(thresholds, m)
        if m.reasons:
            reasons += m.reasons
    elif mine is None:
        reasons.append("the re-run gave no value for it")
    if golden is not None and e["name"] in golden_run:
        check.golden_cos = compare_arrays(golden_run[e["name"]], golden).values.get("cos", math.nan)
    check.reason = "; ".join(reasons)
    return check


def _retest_task(root: Path, manifest: dict, rerun_dir: Path, thresholds: Thresholds,
                 notes: list[str]) -> Path | None:
    """Compare the copied NPU dumps of the ops inside with the re-run, as a task folder."""
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.tasks.taskdoc import mark_state
    from accuscope.engine.tasks.taskrun import run_task
    folder = root / RETEST_DIR
    if not (root / "npu").is_dir() or not any((root / "npu").iterdir()):
        notes.append("no NPU dump files of the ops inside: no re-test task written")
        return None
    model = root / (manifest.get("mapping_model") or manifest["model"])
    mark_state(folder, "running", parent=manifest.get("parent_task"), export=str(root.absolute()), kind="retest")
    spec = CompareSpec(str(root / "npu"), str(rerun_dir), model=str(model), thresholds=thresholds,
                              pick=(manifest.get("parent") or {}).get("pick") or "newest")
    try:
        run_task(spec, folder, workers=1)
    except SourceError as exc:
        notes.append(f"re-test task failed: {exc}")
        return folder
    return folder


def _verdict(r: RetestResult) -> None:
    usable = [o for o in r.outputs if o.comparable]
    if not usable:
        r.verdict = UNKNOWN
        r.message = "nothing to compare: no output of the submodel has an NPU tensor and a re-run value"
        return
    inside = [o for o in usable if o.retest_broken]
    parent = [o for o in usable if o.parent_broken]
    cosines = "; ".join(f"{o.tensor}: NPU vs golden cos {_fmt(o.parent_cos)}, NPU vs re-run cos "
                        f"{_fmt(o.retest_cos)}" for o in usable)
    if inside:
        r.verdict = INSIDE
        r.message = ("the error lives inside the submodel: run on the NPU side's inputs, the framework ops "
                     f"disagree with the NPU outputs ({cosines})")
    elif parent:
        r.verdict = UPSTREAM
        r.message = ("the error came from upstream: run on the NPU side's inputs, the framework ops reproduce "
                     f"the NPU outputs, which disagree with golden only because their inputs do ({cosines})")
    else:
        r.verdict = NO_ERROR
        r.message = f"no error at the submodel's outputs: the NPU outputs agree with golden and the re-run ({cosines})"
    if r.substituted:
        r.message += f"; golden data stood in for NPU input(s) {', '.join(r.substituted)}"


def _fmt(x: float) -> str:
    return "NaN" if x is None or math.isnan(x) else f"{x:.6f}"
