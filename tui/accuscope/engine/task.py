"""A task is a folder: what was compared (task.json), the result CSV, and a fast typed copy.

    task.json                     paths, algorithms, range, thresholds, version, times, state, counts
    result_{YYYYMMDDhhmmss}.csv   MindStudio-compatible result (for people and other tools)
    result.npz                    the same table as numpy columns, loaded by the TUI in milliseconds

Saving never damages the previous result: every file is written under a temporary name first and
only renamed into place once all of them are complete, task.json last. Listing never raises for a
broken folder: it becomes an entry with a problem text.
"""
from __future__ import annotations

import json
import os
import re
import time
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from .. import __version__
from .csvio import atomic_path, read_result_csv, write_result_csv
from .results import KIND, ResultTable
from .tensor import SourceError
from .thresholds import Thresholds

TASK_JSON = "task.json"
RESULT_NPZ = "result.npz"
STATES = ("running", "done", "cancelled", "failed")
_CSV_NAME = re.compile(r"result_(\d{14})(?:_\d+)?\.csv$")
_NPZ_FORMAT = 1
EXPORTS_DIR, RETEST_DIR = "exports", "retest"  # TASK/exports/{start}--{end}/retest is a task too
_MAX_DEPTH = 4  # how deep list_tasks looks under the root (msit: out/{time}/{shape}/result.csv)


@dataclass
class Task:
    folder: Path
    meta: dict
    table: ResultTable
    thresholds: Thresholds
    csv: Path | None
    warnings: list[str] = field(default_factory=list)


@dataclass
class TaskSummary:
    """One line of the task browser."""

    path: Path  # the task folder, or the CSV file for kind "csv"
    kind: str  # "task" or "csv"
    name: str  # path relative to the listed root
    when: float  # seconds since the epoch: creation time, else modification time
    state: str = ""
    rows: int | None = None
    failing: int | None = None
    first_failing_op: str = ""
    npu: str = ""
    golden: str = ""
    error: str = ""  # why the comparison failed (state "failed")
    problem: str = ""  # why the entry cannot be opened as it is; "" when fine


# ---- saving -------------------------------------------------------------------------------------
def save_task(folder: str | os.PathLike, meta: dict, table: ResultTable, thresholds: Thresholds,
              csv_options: dict | None = None) -> Path:
    """Write the result CSV, result.npz and task.json; returns the CSV path.

    `meta` holds what was compared (npu, golden, model, algorithms, range, ops, custom_dir, ...)
    and optionally state (default "done") and error. `csv_options` are write_result_csv's flags.
    Thresholds are applied to the table first, so IsPrecisionError and the counts agree with them.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv_options = dict(csv_options or {})
    thresholds.apply(table)
    now = datetime.now()
    csv_path = _new_csv_path(folder, now)
    doc = {**_read_json(folder / TASK_JSON, {}), **meta}
    doc.setdefault("created", now.isoformat(timespec="seconds"))
    doc.update(tool_version=__version__, saved=now.isoformat(timespec="seconds"),
               state=meta.get("state", "done"), error=meta.get("error", ""),
               thresholds=thresholds.to_dict(), csv=csv_path.name, csv_options=csv_options,
               custom_columns=list(table.custom), **_counts(table))
    _replace_together([
        (csv_path, lambda tmp: write_result_csv(table, tmp, **csv_options)),
        (folder / RESULT_NPZ, lambda tmp: _write_npz(table, tmp, csv_path.name)),
        (folder / TASK_JSON, lambda tmp: _write_json(tmp, doc)),
    ])
    return csv_path


def mark_state(folder: str | os.PathLike, state: str, **fields) -> dict:
    """Set the state (and e.g. error=..., npu=...) in task.json, creating it if needed."""
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    doc = _read_json(folder / TASK_JSON, {})
    now = datetime.now().isoformat(timespec="seconds")
    doc.setdefault("created", now)
    doc.setdefault("tool_version", __version__)
    doc.update(fields, state=state, updated=now)
    with atomic_path(folder / TASK_JSON) as tmp:
        _write_json(tmp, doc)
    return doc


def _counts(table: ResultTable) -> dict:
    fail = table.columns["fail"]
    first = int(np.argmax(fail)) if fail.any() else None
    return {"rows": len(table), "failing": int(fail.sum()),
            "first_failing_op": table.columns["npu_op"][first] if first is not None else "",
            "first_failing_index": int(table.columns["index"][first]) if first is not None else -1}


def _new_csv_path(folder: Path, now: datetime) -> Path:
    """result_{time}.csv; a suffix when a result of the same second exists, so none is replaced."""
    stamp = now.strftime("%Y%m%d%H%M%S")
    path, k = folder / f"result_{stamp}.csv", 1
    while path.exists():
        path, k = folder / f"result_{stamp}_{k}.csv", k + 1
    return path


def _replace_together(files) -> None:
    """Write every (path, writer) to a temporary file; rename them all only if all succeeded."""
    staged = []
    try:
        for path, write in files:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
            staged.append((tmp, path))
            write(tmp)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def _write_json(path: Path, doc: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False, default=str)  # Path values become text
        f.write("\n")


# ---- the typed copy -----------------------------------------------------------------------------
# Numeric and bool columns are stored as they are. Text columns are stored as UTF-8 bytes joined
# by NUL: fixed-width unicode arrays measured 115 MB for 50k rows with dump paths (every cell as
# wide as the longest, 4 bytes a character) against 12 MB packed, and the packed form loads as fast.
def _write_npz(table: ResultTable, path: Path, csv_name: str) -> None:
    arrays, layout = {}, []
    for i, (key, col) in enumerate(table.columns.items()):
        name = f"c{i}"
        if col.dtype == object:
            joined = "\x00".join(col.tolist())
            if joined.count("\x00") == max(len(col) - 1, 0):
                arrays[name] = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
                layout.append([key, "packed"])
            else:  # a value holds NUL itself
                arrays[name] = np.array(col.tolist(), dtype=str)
                layout.append([key, "unicode"])
        else:
            arrays[name] = col
            layout.append([key, "array"])
    meta = {"format": _NPZ_FORMAT, "rows": len(table), "columns": layout, "custom": table.custom,
            "present": sorted(table.present), "csv": csv_name}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _read_npz(path: Path) -> ResultTable:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode("utf-8"))
        if meta.get("format") != _NPZ_FORMAT:
            raise ValueError(f"format {meta.get('format')} is not {_NPZ_FORMAT}")
        n, columns = meta["rows"], {}
        for i, (key, how) in enumerate(meta["columns"]):
            if key not in KIND and key not in meta["custom"]:
                continue
            data = z[f"c{i}"]
            if how == "packed":
                values = data.tobytes().decode("utf-8").split("\x00") if n else []
                data = np.empty(n, dtype=object)
                data[:] = values
            elif how == "unicode":
                data = data.astype(object)
            columns[key] = data
    return ResultTable.from_columns(columns, meta["custom"], meta["present"])


# ---- loading ------------------------------------------------------------------------------------
def load_task(folder: str | os.PathLike) -> Task:
    """Open a task folder: result.npz when usable, else its newest result CSV.

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
        thresholds = Thresholds.from_dict(doc.get("thresholds"))
    except (ValueError, TypeError, AttributeError) as e:
        warnings.append(f"thresholds in task.json unusable ({e}); using the defaults")
        thresholds = Thresholds()
    table = None
    if (folder / RESULT_NPZ).exists():
        try:
            table = _read_npz(folder / RESULT_NPZ)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
            warnings.append(f"{RESULT_NPZ} unreadable ({e}); reading the result CSV instead")
    csv_path = _result_csv(folder, doc)
    if table is None and csv_path is not None:
        table, csv_warnings = read_result_csv(csv_path)
        warnings += csv_warnings
    if table is None:
        if doc.get("state") == "done" or "state" not in doc:
            raise SourceError(f"{folder}: the task has no result ({RESULT_NPZ} or result_*.csv)")
        table = ResultTable.empty(doc.get("custom_columns") or [])
    thresholds.apply(table)
    return Task(folder, doc, table, thresholds, csv_path, warnings)


def _csv_task(path: Path) -> Task:
    table, warnings = read_result_csv(path)
    thresholds = Thresholds()
    thresholds.apply(table)
    meta = {"state": "done", "csv": path.name, "foreign": True, **_counts(table)}
    return Task(path.parent, meta, table, thresholds, path, warnings)


def read_json_object(path: Path, missing: str) -> dict:
    """A JSON file holding an object; SourceError saying `missing`, or what is wrong with it."""
    if not path.is_file():
        raise SourceError(missing)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SourceError(f"{path}: unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def task_path(folder: str | os.PathLike, value) -> Path | None:
    """A path task.json holds, as written, else relative to the task folder when it exists there;
    None when task.json holds no path there."""
    if not value or not isinstance(value, str):
        return None
    p = Path(value).expanduser()
    if not p.is_absolute() and not p.exists() and (Path(folder) / p).exists():
        return Path(folder) / p
    return p


def framework_model(folder: str | os.PathLike, meta: dict) -> tuple[Path | None, str]:
    """The framework ONNX model of a task and where it was found: task.json's `framework_model`,
    its demo section, its `model` when that is an ONNX file, the model copy next to a golden dump
    written by `accuscope dump` (golden/model.onnx), or the model that dump.json names."""
    candidates: list[tuple[object, str]] = [(meta.get("framework_model"), "task.json framework_model")]
    demo = meta.get("demo")
    if isinstance(demo, dict):
        candidates.append((demo.get("framework_model"), "task.json demo.framework_model"))
    candidates.append((meta.get("model"), "task.json model"))
    golden = task_path(folder, meta.get("golden"))
    if golden is not None:
        gdir = golden if golden.is_dir() else golden.parent
        candidates.append((str(gdir / "model.onnx"), "the golden dump's model copy"))
        named = _read_json(gdir / "dump.json", {}).get("model")
        if isinstance(named, str):
            candidates.append((named if Path(named).is_absolute() else str(gdir / named),
                               "the golden dump's dump.json"))
    for value, source in candidates:
        p = task_path(folder, value)
        if p is not None and p.is_file() and p.suffix.lower() == ".onnx":
            return p, source
    return None, ""


def read_task_doc(folder: str | os.PathLike) -> dict:
    """task.json of a task folder."""
    folder = Path(folder)
    return read_json_object(folder / TASK_JSON, f"{folder}: not a task folder (no {TASK_JSON})")


def _result_csv(folder: Path, doc: dict) -> Path | None:
    """The CSV task.json names, else the newest result_*.csv in the folder."""
    named = doc.get("csv")
    if isinstance(named, str) and (folder / named).is_file():
        return folder / named
    found = sorted((p for p in folder.glob("result_*.csv") if _CSV_NAME.match(p.name)),
                   key=lambda p: (_CSV_NAME.match(p.name).group(1), p.stat().st_mtime))
    return found[-1] if found else None


def _read_json(path: Path, default):
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else default
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return default


# ---- listing ------------------------------------------------------------------------------------
def list_tasks(root: str | os.PathLike) -> list[TaskSummary]:
    """Task folders and foreign result CSVs under root (a few levels deep), newest first."""
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"{root}: no such folder")
    out: list[TaskSummary] = []
    for folder, dirs, files in _walk(root):
        if TASK_JSON in files:
            out.append(_summarize_task(root, folder))
            out += [_summarize_task(root, t.parent)  # the re-tests of its exports (named by their path)
                    for t in sorted(folder.glob(f"{EXPORTS_DIR}/*/{RETEST_DIR}/{TASK_JSON}"))]
            dirs.clear()  # its CSVs and exports belong to it
            continue
        out += [s for name in files if name.lower().endswith(".csv")
                for s in [_summarize_csv(root, folder / name)] if s is not None]
    return sorted(out, key=lambda s: s.when, reverse=True)


def _walk(root: Path):
    for folder, dirs, files in os.walk(root):
        folder = Path(folder)
        depth = len(folder.relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < _MAX_DEPTH else []
        yield folder, dirs, files


def _summarize_task(root: Path, folder: Path) -> TaskSummary:
    name = str(folder.relative_to(root)) if folder != root else folder.name
    summary = TaskSummary(folder, "task", name, _mtime(folder / TASK_JSON))
    try:
        doc = read_task_doc(folder)
    except SourceError as e:
        summary.problem = str(e).replace(f"{folder / TASK_JSON}: ", f"{TASK_JSON}: ")
        return summary
    summary.when = _parse_time(doc.get("created"), summary.when)
    summary.state = str(doc.get("state", ""))
    summary.rows, summary.failing = _int(doc.get("rows")), _int(doc.get("failing"))
    summary.first_failing_op = str(doc.get("first_failing_op") or "")
    summary.npu, summary.golden = str(doc.get("npu") or ""), str(doc.get("golden") or "")
    summary.error = str(doc.get("error") or "")
    has_result = (folder / RESULT_NPZ).exists() or _result_csv(folder, doc) is not None
    if not has_result and summary.state in ("done", ""):
        summary.problem = f"no result file ({RESULT_NPZ} or result_*.csv)"
    return summary


def _summarize_csv(root: Path, path: Path) -> TaskSummary | None:
    """A CSV whose first line is a result header; None for any other CSV."""
    try:
        with open(path, "rb") as f:
            first = f.readline(65536).decode("utf-8", "replace")
    except OSError:
        return None
    if "NPUDump" not in first or "TensorIndex" not in first:
        return None
    match = _CSV_NAME.match(path.name)
    when = _mtime(path)
    if match:
        when = _parse_time(match.group(1), when)
    return TaskSummary(path, "csv", str(path.relative_to(root)), when)


def _parse_time(text, default: float) -> float:
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y%m%d%H%M%S"):
        try:
            return datetime.strptime(str(text)[:19], fmt).timestamp()
        except ValueError:
            continue
    return default


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
