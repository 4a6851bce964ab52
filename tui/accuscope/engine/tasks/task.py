"""A task is a folder: what was compared (task.json), the result CSV, and a fast typed copy.

    task.json                     paths, algorithms, range, thresholds, version, times, state, counts
    result_{YYYYMMDDhhmmss}.csv   MindStudio-compatible result (for people and other tools), up to
                                  storage.CSV_ROWS rows; above, an export (`show --format csv`)
    result.npz                    the same table as numpy columns, loaded by the TUI in milliseconds
    advice.json                   what the advisor said about this result (diagnose.advice)
    exports/{start}--{end}/       submodels with their data (export.folder), each with retest/, a task
    dumps/{time}/{golden,npu}/    what `accuscope run` dumped for the task

These names are known here only; task.json's keys are declared, read and written in taskdoc.py.
`TaskFolder` is a task folder as found: task.json (`doc`, a TaskDoc) and what is derived from it once
per object: the comparison's spec, its plan, the model graph and the framework model. State changes
(`mark`), `delete` and `copy` go through it. `Task` is one opened task: a TaskFolder with its result
(table, thresholds, CSV), which `load_task` opens.

Saving never damages the previous result: every file is written under a temporary name first and
only renamed into place once all of them are complete, task.json last: renaming task.json is the
commit. Each save is a generation (an id in task.json, result.npz and the CSV task.json names); a
result.npz of another generation than task.json (a save killed between the renames) is ignored
with a warning and the CSV task.json names is read. A re-run replaces the previous result CSV.

States: running (with the pid and host running it), done, cancelled, failed, and interrupted: a
task recorded as running whose process is gone from this host (killed, crashed); it is derived when
reading, so the browser shows the truth without anyone having written it. `stale_parts` says which
files made from an earlier result (advice.json, exports/*) no longer describe the current one.

task.json fields of the wrong type (taskdoc) and a result.npz whose claims do not hold are one line
naming the file. The task browser's list of tasks is tasklist.py's.
"""
# lazy: engine.compare.comparison, engine.compare.crossmap, engine.compare.shards, engine.sides.registry,
# lazy: engine.sides.side, engine.sources.msprobe
from __future__ import annotations

import errno
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from accuscope import __version__
from accuscope.engine.compare import faults, judgement
from accuscope.engine.compare.judgement import Basis, verdict
from accuscope.engine.compare.lifetime import pid_alive
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sources.inputfile import json_loads
from accuscope.engine.sources.kinds import MSPROBE
from accuscope.engine.sources.outputfile import fresh_file, ours
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks import taskdoc
from accuscope.engine.tasks.csvio import read_result_csv, write_result_csv
from accuscope.engine.tasks.npztable import read_npz, write_npz
from accuscope.engine.tasks.rankfiles import load_ranks
from accuscope.engine.tasks.storage import Storage, storage
from accuscope.engine.tasks.taskdoc import TASK_JSON, TaskDoc, mark_state, recorded_path

if TYPE_CHECKING:
    from accuscope.engine.compare.comparison import Plan
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.graphs.graph import Graph

RESULT_NPZ = "result.npz"
ADVICE_JSON = "advice.json"
LOCK = ".lock"  # held (flock) by the process running the task
CSV_NAME = re.compile(r"result_(\d{14})(?:_\d+)?\.csv$")
EXPORTS_DIR, RETEST_DIR = "exports", "retest"  # TASK/exports/{start}--{end}/retest is a task too
CHAIN_DIRS = ("stages", "steps")  # a chain task's sub-tasks (tasks/chainrun.py)
DUMPS_DIR = "dumps"  # TASK/dumps/{time}/{golden,npu}: what `accuscope run` dumped for the task
_DUMP_JSON_LIMIT = 16 << 20  # an `accuscope dump` folder's dump.json (a few KB), not msprobe's (100 MB of data)


@dataclass(eq=False)
class TaskFolder:
    """A task folder as found (see the module's docstring): its task.json (`doc`), its result not
    read; what needs no result (export, the graph, delete, copy) works on one. `TaskFolder.at`
    finds one; `load_task` opens it as a `Task`, with its result."""

    folder: Path
    doc: TaskDoc
    csv: Path | None = None

    @classmethod
    def at(cls, path: str | os.PathLike, strict: bool = True) -> TaskFolder:
        """The task folder (or foreign result CSV) at `path`, its task.json read, its result not.
        SourceError naming task.json when it is unusable; with strict=False such a task has an
        empty `doc` instead (a broken folder can still be deleted or copied)."""
        path = Path(path)
        if path.is_file():
            return cls(path.parent, TaskDoc({"state": "done", "csv": path.name, "foreign": True}), csv=path)
        try:
            return cls(path, read_task_doc(path))
        except SourceError:
            if strict:
                raise
            return cls(path, TaskDoc())

    @property
    def step(self) -> bool:
        """The task compared a training step's calls (msprobe): judged on every call, it has no outputs."""
        return self.doc.is_step

    @property
    def basis(self) -> Basis:
        """What the verdict rests on besides the table (judgement.Basis), from task.json's coverage."""
        return Basis.from_coverage(self.doc.coverage)

    def path(self, key: str) -> Path | None:
        """A path task.json records (npu, golden, model ...), found where the task now is."""
        return self.doc.path(key, self.folder)

    def spec(self, **changes) -> CompareSpec:
        """The comparison task.json records, paths resolved from the folder; `changes` replace
        fields (custom_dir: plugins run only when the caller passes the folder, see TaskDoc.spec)."""
        return self.doc.spec(self.judged_by, self.folder, **changes)

    @property
    def judged_by(self) -> Thresholds | None:
        """The thresholds the spec carries: an opened task's (`Task.thresholds`); a folder's, task.json's."""
        return None

    @cached_property
    def plan(self) -> Plan:
        """Every pair of the task's comparison (the whole network, every metric, no plugin):
        planning reads every dump header, which takes seconds on a big network, so it is done once
        per opened task. SourceError when the dumps are unusable."""
        from accuscope.engine.compare.comparison import plan
        if not self.doc.names_dumps:
            raise SourceError(f"{self.folder}: the task does not name its NPU and golden dumps (task.json npu/golden)")
        return plan(self.spec(algorithms=None, op_range=None, ops=None, custom_dir=None))

    @cached_property
    def graph(self) -> Graph | None:
        """The graph of `model_file`; None without one; SourceError when that file is unusable."""
        from accuscope.engine.sides.registry import load_graph
        return load_graph(self.model_file) if self.model_file is not None else None

    @cached_property
    def framework_graph(self) -> Graph | None:
        """The graph of the framework model (`framework_model`); None without one; SourceError when
        that file is unusable."""
        from accuscope.engine.sides.registry import load_graph
        path = self.framework_model[0]
        return load_graph(path) if path is not None else None

    @cached_property
    def model_file(self) -> Path | None:
        """The model task.json names (`model`), else the one the NPU side's dump carries (an `accuscope
        dump` folder's model.onnx, model.xml or model.tflite: every `run` task's candidate); None without."""
        from accuscope.engine.sides.side import own_model
        model, npu = self.path("model"), self.path("npu")
        carried = own_model(str(npu)) if model is None and npu is not None else None
        return model if model is not None else Path(carried) if carried else None

    @cached_property
    def modules(self) -> Graph | None:
        """The NPU dump's module hierarchy for the graph pane when it is a training dump (msprobe's
        construct.json, see Side.modules), else None; SourceError when the dump is unusable."""
        recorded = self.doc.spec()
        return self.modules_at(recorded.step, recorded.rank)

    def modules_at(self, step: str | int | None, rank: str | int | None) -> Graph | None:
        """`modules` of one step and rank of the NPU dump (a multi-rank task's; None: the first); of a task
        compared with --shards whose NPU dump holds several ranks, the merged run's one tree (its rows' names).
        Read once per step and rank."""
        cache = self.__dict__.setdefault("_modules", {})
        if (step, rank) not in cache:
            cache[step, rank] = self._read_modules(step, rank)
        return cache[step, rank]

    def _read_modules(self, step: str | int | None, rank: str | int | None) -> Graph | None:
        from accuscope.engine.sides.registry import detect, modules_loader
        npu = self.path("npu")
        if npu is None or not npu.is_dir():
            return None
        kind = detect(str(npu)).kind
        merged = self.doc.spec().shards
        if merged and rank is None and kind == MSPROBE:
            from accuscope.engine.compare import shards
            if len(shards.rank_folders(str(npu), step)) > 1:
                return shards.merged_modules(str(npu), shards=merged, step=step)
        loader = modules_loader(str(npu), kind, step, rank)
        return loader() if loader is not None else None

    def call_stacks(self, step: str | int | None = None, rank: str | int | None = None) -> tuple[dict[str, list[str]], str]:
        """The NPU dump's call stacks (msprobe's stack.json: call -> Python stack lines) of `step`
        and `rank` (a multi-rank task's row's; by default the task's own, else its first folder),
        and why they could not be read; ({}, "") for a dump without them. Read once per step/rank."""
        from accuscope.engine.sources import msprobe
        npu = self.path("npu")
        if npu is None or not msprobe.sniff(str(npu)):
            return {}, ""
        recorded = self.doc.spec()
        key = (recorded.step if step is None else step, recorded.rank if rank is None else rank)
        cache = self.__dict__.setdefault("_stacks", {})
        if key not in cache:
            try:
                cache[key] = msprobe.stacks(str(npu), *key)
            except SourceError as exc:
                cache[key] = ({}, str(exc))
        return cache[key]

    @cached_property
    def framework_model(self) -> tuple[Path | None, str]:
        """The framework model of the task and where it was found: task.json's `framework_model`,
        its demo section, its `model` when that is an ONNX file, its `golden_model` (ONNX), the model copy next to a golden
        dump written by `accuscope dump` (golden/model.onnx), the model that dump.json names, else
        a Caffe `model` (a Caffe model is its own framework model). (None, "") when none is found."""
        return _framework_model(self.folder, self.doc)

    def mark(self, state: str, **fields) -> None:
        """Set the state (and fields) in task.json; `doc` follows."""
        self.doc = mark_state(self.folder, state, **fields)

    def decide_pair(self, npu_name: str, golden_name: str | None) -> Path:
        """A pair accepted (`golden_name`) or rejected (None) for the task's next run, a call's or one
        tensor's (`call:input:1`): saved in the folder's pairs.yaml (crossmap.decide), which task.json then
        names as the task's mapping file; the path written. SourceError when the task pairs by one of
        msprobe's mapping files."""
        from accuscope.engine.compare import crossmap
        current = self.doc.path("mapping", self.folder)
        path = Path(crossmap.decide(self.folder, str(current) if current else None, npu_name, golden_name))
        self.mark(self.doc.state or "done", mapping=str(path.resolve()),
                  relative={**self.doc.relative, "mapping": path.name})
        return path

    def delete(self) -> None:
        """Remove the task folder (for a foreign result CSV: the file). OSError when it cannot."""
        remove_task(self.csv if self.doc.foreign and self.csv else self.folder)

    def copy(self, target: str | os.PathLike) -> Path:
        """Copy the task folder (or the foreign result CSV) to `target`, which must not exist."""
        return copy_task(self.csv if self.doc.foreign and self.csv else self.folder, target)


@dataclass(eq=False, kw_only=True)
class Task(TaskFolder):
    """One opened task (see the module's docstring): a task folder with its result, as `load_task`
    opens it (an empty table for a task that has none yet), judged by `thresholds`."""

    table: ResultTable
    thresholds: Thresholds
    warnings: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # see stale_parts
    total: int | None = None  # `table` holds only the first rows of this many (load_task's head)

    @property
    def partial(self) -> bool:
        """The table is the first rows only (load_task(head=...)): load_task without head reads it all."""
        return self.total is not None

    @property
    def result(self) -> tuple[ResultTable, Thresholds]:
        """(table, thresholds)."""
        return self.table, self.thresholds

    @property
    def judged_by(self) -> Thresholds:
        return self.thresholds

    def set_thresholds(self, thresholds: Thresholds) -> None:
        """New thresholds for an opened task: its result is saved again as a new generation, so the
        result CSV's IsPrecisionError, task.json's counts and the advisor judge the rows alike. A task
        without a result, or a columnar one (no CSV; its rows judged when loaded), only records them
        and the counts in task.json."""
        self.thresholds = thresholds
        state = self.doc.state or "done"
        if self.csv is None and not len(self.table):
            self.mark(state, thresholds=thresholds.to_dict())
            return
        judgement.apply(self.table, thresholds)
        if self.doc.columnar:  # its column files stay: loading applies the thresholds
            self.mark(state, thresholds=thresholds.to_dict(), **_counts(self.table, thresholds, self.doc.coverage))
            return
        self.csv = save_task(self.folder, {"state": state, "error": self.doc.error}, self.table, thresholds,
                             self.doc.csv_options)
        self.doc = read_task_doc(self.folder)


def remove_task(path: str | os.PathLike) -> None:
    """Remove a task folder, or a result CSV file (a browser entry, opened or not)."""
    path = Path(path)
    shutil.rmtree(path) if path.is_dir() else path.unlink()


def copy_task(path: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Copy a task folder (or a result CSV file) to `target`; FileExistsError when it exists."""
    path, target = Path(path), Path(target)
    if target.exists():
        raise FileExistsError(errno.EEXIST, "exists already", str(target))
    shutil.copytree(path, target) if path.is_dir() else shutil.copy2(path, target)
    return target


# ---- saving -------------------------------------------------------------------------------------
def save_task(folder: str | os.PathLike, meta: dict, table: ResultTable, thresholds: Thresholds,
              csv_options: dict | None = None) -> Path | None:
    """Write the result CSV (when tasks/storage.py says so: up to CSV_ROWS rows), result.npz and
    task.json as one new generation; returns the CSV path (None: no CSV). A comparison's result is
    written through tasks/taskwriter.py, which picks this or the column store.

    `meta` holds task.json keys (taskdoc.TaskDoc): what was compared (taskdoc.spec_fields, ...)
    and optionally state (default "done") and error. `csv_options` are write_result_csv's flags.
    Thresholds are applied to the table first, so IsPrecisionError and the counts agree with them.
    The previous result CSV is removed once the new generation is committed.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_dead_partials(folder)
    csv_options = dict(csv_options or {})
    judgement.apply(table, thresholds)
    now = datetime.now()
    csv_path = _new_csv_path(folder, now) if storage(len(table)) is Storage.CSV else None
    generation = f"{now:%Y%m%d%H%M%S}-{os.urandom(4).hex()}"
    # "attempt": what an unfinished run tried; this result is now what was compared
    doc = taskdoc.read_or_empty(folder).without("attempt").with_fields(**meta)
    if "created" not in doc:
        doc = doc.with_fields(created=now.isoformat(timespec="seconds"))
    doc = doc.with_fields(tool_version=__version__, saved=now.isoformat(timespec="seconds"), generation=generation,
                          state=meta.get("state", "done"), error=meta.get("error", ""),
                          thresholds=thresholds.to_dict(), csv=csv_path and csv_path.name, csv_options=csv_options,
                          custom_columns=list(table.custom), **_counts(table, thresholds, doc.coverage))
    _replace_together([
        *([(csv_path, lambda tmp: write_result_csv(table, tmp, **csv_options))] if csv_path else []),
        (folder / RESULT_NPZ, lambda tmp: write_npz(table, tmp, {"csv": doc.csv, "generation": generation})),
        (folder / TASK_JSON, lambda tmp: taskdoc.write_fresh(tmp, doc)),
    ])
    for old in folder.glob("result_*.csv"):  # the previous generation's CSV, and any a killed save left
        if old != csv_path and CSV_NAME.match(old.name):
            old.unlink(missing_ok=True)
    return csv_path


def _counts(table: ResultTable, thresholds: Thresholds, coverage: dict | None) -> dict:
    """task.json's counts and verdict from the judgement (judgement.RowState, judgement.verdict under the
    coverage's Basis): failing rows, the first in execution order, the verdict and its line (the browser's)."""
    state = judgement.evaluate(table, thresholds)
    first = state.first_failing
    v = verdict(table, thresholds, Basis.from_coverage(coverage))
    return {"rows": len(table), "failing": int(state.fail.sum()),
            "first_failing_op": table.columns["npu_op"][first] if first is not None else "",
            "first_failing_index": int(table.columns["index"][first]) if first is not None else -1,
            "verdict": v.outcome, "verdict_line": v.line(table.columns["tensor"])}


def _new_csv_path(folder: Path, now: datetime) -> Path:
    """result_{time}.csv; a suffix when a result of the same second exists, so none is replaced."""
    stamp = now.strftime("%Y%m%d%H%M%S")
    path, k = folder / f"result_{stamp}.csv", 1
    while path.exists():
        path, k = folder / f"result_{stamp}_{k}.csv", k + 1
    return path


def _replace_together(files) -> None:
    """Write every (path, writer) to a temporary file; rename them all only if all succeeded, the
    last one (task.json: the commit) last."""
    staged = []
    try:
        for path, write in files:
            fd, tmp = fresh_file(path, f".{os.getpid()}.partial")  # never a file or link already there
            os.close(fd)
            staged.append((tmp, path))
            write(tmp)
        faults.point("staged")
        for tmp, path in staged[:-1]:
            os.replace(tmp, path)
        faults.point("commit")
        os.replace(*staged[-1])
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise


def _remove_dead_partials(folder: Path) -> None:
    """Temporary files of saves whose process was killed."""
    for tmp in folder.glob(".*.partial"):
        pid = tmp.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)


# ---- loading ------------------------------------------------------------------------------------
HEAD_ROWS = 1000  # more than any terminal shows at once


def load_head(path: str | os.PathLike) -> Task:
    """The task at `path` as its first screen needs it: load_task(path, head=HEAD_ROWS), its first
    rows only when it has more (milliseconds for any size); load_task(path) then reads them all. Every
    place that opens a task to show it (`accuscope open`, the app's open_task) opens it so."""
    return load_task(path, head=HEAD_ROWS)


def load_task(folder: str | os.PathLike, head: int | None = None) -> Task:
    """Open a task folder: result.npz when usable, else its newest result CSV.

    `head`: a result.npz of more rows gives only its first `head` rows (`Task.partial`, `total` the
    count): what the first screen of a large task needs; load_task without head then reads it all.

    A result CSV path (a "csv" entry of list_tasks) opens as a task with default thresholds.
    SourceError when there is no task.json, it is not JSON, or a finished task has no result.
    A task that is running, cancelled or failed before any result opens with an empty table.
    """
    folder = Path(folder)
    if folder.is_file():
        return _csv_task(folder)
    doc = read_task_doc(folder)
    warnings: list[str] = []
    try:
        thresholds = Thresholds.from_dict(doc.thresholds)
    except (ValueError, TypeError, AttributeError) as e:
        warnings.append(f"thresholds in task.json unusable ({e}); using the defaults")
        thresholds = Thresholds()
    table, total = None, None
    csv_path = result_csv(folder, doc.csv)
    if doc.columnar and "ranks" in doc:  # a multi-rank task of many rows
        table, rank_warnings = load_ranks(folder, doc.ranks, columnar=True)
        warnings += rank_warnings
    elif (folder / RESULT_NPZ).exists():
        try:
            table, npz_meta = read_npz(folder / RESULT_NPZ, head)
        except (OSError, ValueError, KeyError, TypeError, MemoryError, zipfile.BadZipFile) as e:
            warnings.append(f"{RESULT_NPZ} unreadable ({e}); reading the result CSV instead")
        else:
            if doc.generation and npz_meta.get("generation") != doc.generation:
                table = None
                warnings.append(f"{RESULT_NPZ} is from another run than {TASK_JSON} (a save was "
                                f"interrupted); reading {csv_path.name if csv_path else 'the result CSV'}, "
                                f"which {TASK_JSON} names, instead")
            elif len(table) < npz_meta["rows"]:
                total = npz_meta["rows"]
    if table is None and csv_path is not None:
        table, csv_warnings = read_result_csv(csv_path)
        warnings += csv_warnings
    if table is None:
        if doc.state == "done" or "state" not in doc:
            raise SourceError(f"{folder}: the task has no result ({RESULT_NPZ} or result_*.csv)")
        table = ResultTable.empty(doc.custom_columns)
    judgement.apply(table, thresholds)
    # stale_parts reads advice.json whole (40 MB for 1M rows): a partial task leaves it to the full load
    return Task(folder, doc, csv_path, table=table, thresholds=thresholds, warnings=warnings,
                stale=stale_parts(folder, doc) if total is None else [], total=total)


def _csv_task(path: Path) -> Task:
    table, warnings = read_result_csv(path)
    thresholds = Thresholds()
    judgement.apply(table, thresholds)
    doc = TaskDoc({"state": "done", "csv": path.name, "foreign": True, **_counts(table, thresholds, None)})
    return Task(path.parent, doc, path, table=table, thresholds=thresholds, warnings=warnings)


def _framework_model(folder: Path, doc: TaskDoc) -> tuple[Path | None, str]:
    """Task.framework_model."""
    candidates: list[tuple[object, str]] = [(doc.framework_model, "task.json framework_model")]
    if doc.demo is not None:
        candidates.append((doc.demo.get("framework_model"), "task.json demo.framework_model"))
    model = doc.path("model", folder)
    candidates.append((str(model) if model else None, "task.json model"))
    golden_model = doc.path("golden_model", folder)  # the reference's own ONNX model (--golden-model)
    candidates.append((str(golden_model) if golden_model else None, "task.json golden_model"))
    golden = doc.path("golden", folder)
    if golden is not None:
        gdir = golden if golden.is_dir() else golden.parent
        candidates.append((str(gdir / "model.onnx"), "the golden dump's model copy"))
        named = _read_json(gdir / "dump.json", {}, limit=_DUMP_JSON_LIMIT).get("model")
        if isinstance(named, str):
            candidates.append((named if Path(named).is_absolute() else str(gdir / named),
                               "the golden dump's dump.json"))
    for value, source in candidates:
        p = recorded_path(folder, value)
        if p is not None and p.is_file() and p.suffix.lower() == ".onnx":
            return p, source
    if model is not None and model.suffix.lower() == ".prototxt" and model.is_file():
        return model, "task.json model (Caffe)"
    return None, ""


def read_task_doc(folder: str | os.PathLike) -> TaskDoc:
    """task.json of a task folder (taskdoc.read), its state made true (see true_state); SourceError
    naming the file when it is missing, not JSON, or a field has the wrong type."""
    doc = taskdoc.read(folder)
    state = true_state(folder, doc)
    return doc if state == doc.state else doc.with_fields(state=state)  # a document without one keeps ""


def true_state(folder: str | os.PathLike, doc: TaskDoc) -> str:
    """The recorded state, except that a task recorded as running whose process is gone from this
    host (or which nobody holds the lock of) is "interrupted"."""
    state = doc.state
    if state != "running" or doc.host != taskdoc.host_name():
        return state  # running elsewhere: this host cannot tell
    if doc.pid is None or not pid_alive(doc.pid) or lock_is_free(folder):
        return "interrupted"
    return state


def stale_parts(folder: str | os.PathLike, doc: TaskDoc) -> list[str]:
    """Files in the task folder made from an earlier result than the current one: "advice.json"
    when its `task.saved`/`task.csv` are not task.json's `saved`/`csv`, and "exports/NAME" for each
    export whose manifest was created before the current result was saved. They stay readable;
    the advisor and the browser show them as out of date (re-advise, re-export)."""
    folder, saved = Path(folder), doc.saved
    if not saved:
        return []
    out = []
    advice = _read_json(folder / ADVICE_JSON, None)
    if advice is not None:
        made_for = advice.get("task") if isinstance(advice.get("task"), dict) else {}
        if made_for.get("saved") != saved or made_for.get("csv") != doc.csv:
            out.append(ADVICE_JSON)
    for manifest in sorted(folder.glob(f"{EXPORTS_DIR}/*/manifest.json")):
        created = _read_json(manifest, {}).get("created")
        if not isinstance(created, str) or created < saved:
            out.append(f"{EXPORTS_DIR}/{manifest.parent.name}")
    return out


# ---- who runs a task ----------------------------------------------------------------------------
try:
    import fcntl
except ImportError:  # Windows: no lock; a second run into one folder is not refused there
    fcntl = None  # type: ignore[assignment]  # Windows: the module is absent


class TaskLock:
    """Held by the process running a task (released by the OS when it dies, however it dies)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self._fd: int | None = None

    def acquire(self) -> None:
        """SourceError when another run holds the task."""
        if fcntl is None or self._fd is not None:
            return
        try:  # never through a link planted at the lock's name (it would create the file it points to)
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise SourceError(f"{self.folder / LOCK}: the task's lock file is a symbolic link; remove it") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            doc = taskdoc.read_or_empty(self.folder)
            who = f" (pid {doc.pid} on {doc.host or None})" if doc.pid else ""
            raise SourceError(f"{self.folder}: the task is running{who}; wait for it, or cancel it first") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None


def lock_is_free(folder: str | os.PathLike) -> bool:
    """Whether no process holds the task's lock (False when there is no lock file or no flock)."""
    path = Path(folder) / LOCK
    if fcntl is None or not path.is_file():
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.EDQUOT,
                 errno.ENOTDIR, errno.EEXIST, errno.EISDIR}


def unwritable(exc: BaseException, path: str | os.PathLike) -> SourceError | None:
    """A write that failed for a reason of the place (full disk, read-only, no permission, name too
    long) as a SourceError naming the path; None for any other exception."""
    if not isinstance(exc, OSError) or exc.errno not in _WRITE_ERRNOS:
        return None
    where = exc.filename if exc.filename else path
    return SourceError(f"{where}: cannot write there: {exc.strerror or exc}")


def check_task_folder(folder: Path) -> bool:
    """Whether `folder` is already a task (or an empty folder); SourceError when it is a file or a
    folder that holds other things."""
    return ours(folder, TASK_JSON, "an accuscope task",  # dumps: `accuscope run` made them; a chain's sub-tasks
                also=(LOCK, DUMPS_DIR, CHAIN_DIRS[0], CHAIN_DIRS[1]))


def create_task_folder(folder: Path) -> None:
    """`folder` and its parents, made if missing; a SourceError saying why it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(exc, folder) or SourceError(f"{folder}: cannot create the folder ({exc.strerror or exc})") \
            from None


def has_result(folder: Path) -> bool:
    """Whether the folder holds a result (result.npz or a result CSV)."""
    return (folder / RESULT_NPZ).exists() or result_csv(folder, None) is not None


def result_csv(folder: Path, named: str | None) -> Path | None:
    """The CSV task.json names (`named`), else the newest result_*.csv in the folder."""
    if named and (folder / named).is_file():
        return folder / named
    found = sorted((p for p in folder.glob("result_*.csv") if CSV_NAME.match(p.name)),
                   key=lambda p: (p.name[len("result_"):len("result_") + 14], p.stat().st_mtime))
    return found[-1] if found else None


def _read_json(path: Path, default, limit: int | None = None):
    """The JSON object in `path`; `default` when it is missing, not an object, unreadable, or over
    `limit` bytes."""
    if not path.is_file():  # missing, or a named pipe that would block
        return default
    try:
        if limit is not None and path.stat().st_size > limit:
            return default
        doc = json_loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else default
    except (OSError, ValueError):
        return default
