"""task.json, owned here: every key accuscope writes, declared once (its JSON type, its default, what
it means), read into a typed `TaskDoc`, checked, migrated from what older accuscopes wrote, and
written back with the keys this accuscope does not know kept.

    version                  the schema version of the accuscope that last wrote the file
                             (absent: 1, written before versions; now VERSION)
    what was compared        every CompareSpec option under its field's name (npu, golden, model,
                             op_range ...: compare/spec.py declares them), relative (`spec_fields`)
    the run                  state, error, tool, pid, host, times, attempt
    the result               generation, csv, csv_options, thresholds, custom_columns, counts,
                             problems, sides, pairs_calls, coverage
    multi-rank, demo, re-test   ranks, columnar ...; demo; parent, export, kind, retest

Reading is strict where a task is opened (`read`: SourceError naming the file for a missing file,
text that is not a JSON object, a declared key of the wrong type, an unknown state) and lenient
where a file is about to be rewritten (`read_or_empty`). A typed attribute never returns a value
of the wrong type: absent, null or mistyped, it is the key's default. Writing (`TaskDoc.with_fields`)
refuses keys the schema does not declare and values of the wrong type (a programmer's error, a
ValueError), and `dump` writes every key the file held, a newer accuscope's included.

Migrations (`MIGRATIONS`) lift a file from its version to this one as it is read; the file keeps
its old form until something rewrites it. Each is written so that running it over a document that
already has the newer form changes nothing: a newer accuscope may find its keys rewritten by this
one with `version` set back to VERSION.

No other module parses task.json (tests/engine/test_taskdoc.py checks the source).
"""
# lazy: engine.compare.spec
from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from dataclasses import MISSING, replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar, cast

from accuscope import __version__
from accuscope.engine.compare.columns import ALGORITHMS, KEY_OF
from accuscope.engine.compare.polytol import stored_problem
from accuscope.engine.compare.spec import PER_OUTPUT_KINDS, CompareSpec, Option, options
from accuscope.engine.compare.statistics import SHARDS_BY_NAMES
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sources import kinds
from accuscope.engine.sources.inputfile import read_json_object
from accuscope.engine.sources.names import printable
from accuscope.engine.sources.outputfile import atomic_file
from accuscope.engine.sources.tensor import SourceError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accuscope.engine.compare.spec import CompareSpec

TASK_JSON = "task.json"
VERSION = 4
STATES = ("running", "done", "cancelled", "failed", "interrupted")
PATH_KEYS = tuple(f.name for f, declared in options() if declared.path)  # paths kept with `relative`

T = TypeVar("T")
_TYPE_WORDS = {str: "text", int: "a whole number", list: "a list", dict: "an object", bool: "true/false", float: "a number"}
_FOUND_WORDS = {str: "text", int: "a number", float: "a number", list: "a list", dict: "an object"}


class Key(Generic[T]):
    """One key of task.json: its JSON types, its default (absent, null or of another type), its meaning.
    As a class attribute of TaskDoc it is the typed attribute of that name."""

    def __init__(self, types: type | tuple[type, ...], default: T, meaning: str):
        self.types = types if isinstance(types, tuple) else (types,)
        self.default, self.meaning, self.name = default, meaning, ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def fits(self, value: object) -> bool:
        """Whether `value` is of the key's types (null always is: every key may be null)."""
        if value is None:
            return True
        if isinstance(value, bool):
            return bool in self.types
        return isinstance(value, self.types)

    def problem(self, value: object) -> str:
        if self.fits(value):
            return ""
        want = " or ".join(_TYPE_WORDS[t] for t in self.types)
        found = "true/false" if isinstance(value, bool) else _FOUND_WORDS.get(type(value), type(value).__name__)
        return f"field {self.name!r} should be {want}, not {found}"

    def __get__(self, doc: TaskDoc | None, owner: type) -> T:
        if doc is None:
            return self  # type: ignore[return-value]  # the Key itself, on the class
        value = doc._raw.get(self.name)
        if value is None or not self.fits(value):
            return cast(T, self.default.copy()) if isinstance(self.default, (dict, list)) else self.default
        return cast(T, value)


class TaskDoc:
    """task.json as one accuscope reads it: each declared key a typed attribute (its default when the
    file holds none), `raw` the whole document (keys of newer accuscopes too). Immutable: `with_fields`
    and `without` return new documents."""

    version = Key(int, 1, "schema version of the accuscope that last wrote the file (absent: 1, before versions)")
    # ---- what was compared (spec_fields / spec) ----
    # every CompareSpec field declared with an option, under its own name: its Key made from the declaration
    # (SPEC_KEYS, set on the class below); the comparison is read back whole by `spec()`. The two sides are
    # typed here for the type checker, as every surface names a task by them.
    if TYPE_CHECKING:
        npu: str | None
        golden: str | None
    relative: Key[dict] = Key(dict, {}, "the paths above relative to the task folder (a task moved with its data; "
                              "read first where inside its workspace: a copied one reads its own files)")
    framework_model: Key[str | None] = Key(str, None, "the framework ONNX model (set by hand; see Task.framework_model)")
    # ---- the run ----
    state = Key(str, "", f"one of {', '.join(STATES)} (\"\": none recorded)")
    error = Key(str, "", "why the comparison failed (state failed)")
    tool = Key(str, "", "\"accuscope VERSION\" that ran the comparison")
    tool_version = Key(str, "", "the accuscope version that created or saved the task")
    created = Key(str, "", "ISO time the task was created")
    started = Key(str, "", "ISO time the last run started")
    updated = Key(str, "", "ISO time the state last changed")
    saved: Key[str | None] = Key(str, None, "ISO time the current result was saved")
    pid: Key[int | None] = Key(int, None, "the process running the task (state running)")
    host = Key(str, "", "the host running the task (state running)")
    attempt: Key[dict | None] = Key(dict, None, "what a run that did not finish tried (the result is of the rest)")
    workers: Key[int | None] = Key(int, None, "worker count the result was compared with (demo tasks)")
    # ---- the result ----
    generation = Key(str, "", "the save's id, also in result.npz: a result.npz of another one is ignored")
    csv: Key[str | None] = Key(str, None, "the result CSV's name (null: none, above CSV_ROWS rows)")
    csv_options: Key[dict] = Key(dict, {}, "csvio.write_result_csv's flags the CSV was written with")
    thresholds: Key[dict | None] = Key(dict, None, "Thresholds.to_dict(): the limits the rows are judged by")
    custom_columns: Key[list] = Key(list, [], "plugin columns of the result")
    rows: Key[int | None] = Key(int, None, "rows of the result")
    failing: Key[int | None] = Key(int, None, "failing rows")
    first_failing_op = Key(str, "", "the first failing row's op in execution order")
    first_failing_index = Key(int, -1, "its row index (-1: none fails)")
    verdict = Key(str, "", "judgement.verdict's outcome under these thresholds: pass, fail or unknown (\"\": before it)")
    verdict_line = Key(str, "", "the verdict in one line, as every surface states it (Verdict.line)")
    problems: Key[list] = Key(list, [], "what could not be read or paired, one line each")
    sides: Key[dict] = Key(dict, {}, "the kind of source on each side: {npu: KIND, golden: KIND}")
    pairs_calls = Key(bool, False, "the sides pair call by call (sides.registry.pairs_calls: two msprobe dumps): "
                      "its pairs may be decided in the app (app/taskscreen.py), which reads this, not the registry")
    coverage: Key[dict] = Key(dict, {}, "coverage.Coverage.to_meta(): how much of each side was compared")
    # ---- a multi-rank task (tasks/rankrun.py) ----
    multirank = Key(bool, False, "compared rank by rank (ranks holds them)")
    cluster: Key[str | None] = Key(str, None, "the Dask scheduler the ranks ran on (null: local)")
    rank_filter: Key[list | None] = Key(list, None, "the ranks chosen (--rank)")
    step_filter: Key[list | None] = Key(list, None, "the steps chosen (--step)")
    ranks: Key[dict] = Key(dict, {}, "per rank: state, step, rank, proc, rel, rows, failing, worker, seconds, error ...")
    columnar = Key(bool, False, "the rows live in columns/ only (above storage.COLUMNAR_ROWS)")
    # ---- a chain of stages (tasks/chainrun.py) ----
    chain: Key[dict | None] = Key(dict, None, "a chain task: its stages in order (label, path, sub-tasks, verdicts), "
                                  "baseline, verdict, line, entered, regressions, improvements (chainrun.chain_meta)")
    # ---- made by others ----
    demo: Key[dict | None] = Key(dict, None, "a demo task's title, story and framework_model (demo/workspace.py)")
    parent: Key[str | None] = Key(str, None, "a re-test task: the task its export came from")
    export: Key[str | None] = Key(str, None, "a re-test task: its export folder")
    kind = Key(str, "", "\"retest\" for the re-test task of an export")
    retest: Key[dict | None] = Key(dict, None, "a re-test's verdict, message and outputs (export/retest.py)")
    foreign = Key(bool, False, "in memory only, never written: a result CSV of another tool")

    def __init__(self, raw: Mapping[str, Any] | None = None):
        self._raw: dict[str, Any] = dict(raw or {})

    @property
    def raw(self) -> Mapping[str, Any]:
        """The whole document, read-only: the declared keys as the file holds them, and the others."""
        return MappingProxyType(self._raw)

    def __contains__(self, key: str) -> bool:
        """Whether the file holds a value (not null) under `key`."""
        return self._raw.get(key) is not None

    def __repr__(self) -> str:
        return f"TaskDoc({self._raw!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskDoc) and other._raw == self._raw

    __hash__ = None  # type: ignore[assignment]

    # ---- derived ----
    @property
    def names_dumps(self) -> bool:
        """Whether task.json says what was compared (npu and golden)."""
        return bool(self.npu) and bool(self.golden)

    @property
    def coverage_warnings(self) -> list[str]:
        """What the coverage says the comparison did not see (few pairs, no output compared)."""
        found = self.coverage.get("warnings")
        return [str(w) for w in found] if isinstance(found, list) else []

    @property
    def is_step(self) -> bool:
        """The comparison was of a training step's calls (msprobe): no network outputs."""
        return self.coverage.get("step") is True

    def path(self, key: str, folder: str | os.PathLike | None) -> Path | None:
        """recorded_path of the path under `key` (npu, golden, model ... custom_algorithms), trying
        its form relative to `folder`."""
        rel = self.relative.get(key)
        return recorded_path(folder, self._raw.get(key), rel if isinstance(rel, str) else None)

    def spec(self, thresholds: Thresholds | None = None, folder: str | os.PathLike | None = None,
             **changes) -> CompareSpec:
        """The comparison this document records (the inverse of spec_fields), for re-running a task
        or part of it: `changes` replace fields (e.g. ops=[name]); with `folder`, paths relative
        to the task folder resolve there.

        Custom algorithms are code: the folder task.json names is never used (a task folder can
        come from anyone); pass `custom_dir=` to run plugins, after the user said which folder.
        Without it the plugin names in the task's algorithm list are dropped too."""
        # the comparison (pairing, readers) is imported by whoever re-runs, not by opening a task
        from accuscope.engine.compare.spec import CompareSpec

        given = {}
        for f, declared in options():
            value = getattr(self, f.name)
            if declared.path:
                resolved = self.path(f.name, folder) if folder is not None else value
                value = str(resolved) if resolved else None
            elif declared.kind == "shape":
                value = tuple(value) if value else None
            elif declared.kind == "plugins":
                value = None  # code: never the folder a task.json names (see above)
            given[f.name] = value
        algorithms = given["algorithms"]
        if algorithms and not changes.get("custom_dir"):
            given["algorithms"] = [a for a in algorithms if KEY_OF.get(a, a) in ALGORITHMS] or None
        # a task.json without a side gives a spec without it (planning says so)
        spec = CompareSpec(**{**given, "pick": given["pick"] or "newest"},
                           thresholds=thresholds if thresholds is not None else Thresholds())
        return replace(spec, **changes)

    # ---- changed ----
    def with_fields(self, **fields) -> TaskDoc:
        """A new document with `fields` set (paths become text). ValueError for a key the schema does
        not declare or a value of the wrong type: every key accuscope writes is declared here."""
        for key, value in fields.items():
            declared = SCHEMA.get(key)
            if declared is None:
                raise ValueError(f"{TASK_JSON} declares no key {key!r} (declare it in engine/tasks/taskdoc.py)")
            if isinstance(value, os.PathLike):
                fields[key] = value = os.fspath(value)
            if declared.problem(value):
                raise ValueError(f"{TASK_JSON}: {declared.problem(value)}")
        if fields.get("state") not in (None, *STATES):
            raise ValueError(f"state must be one of {', '.join(STATES)}, not {fields['state']!r}")
        return TaskDoc({**self._raw, **fields})

    def without(self, *keys: str) -> TaskDoc:
        return TaskDoc({k: v for k, v in self._raw.items() if k not in keys})

    def dump(self, fh: IO[str]) -> None:
        """Write the document (every key it holds, `version` this accuscope's) as indented JSON."""
        doc = {"version": VERSION, **{k: v for k, v in self._raw.items() if k not in ("version", "foreign")}}
        json.dump(doc, fh, indent=2, ensure_ascii=False, default=str)
        fh.write("\n")

    def problem(self) -> str:
        """What is wrong with the declared keys ("" when nothing); null is fine everywhere."""
        for key in KEYS:
            found = key.problem(self._raw.get(key.name))
            if found:
                return found
        state = self._raw.get("state")
        if state not in (None, *STATES):
            return f"field 'state' is {printable(str(state))!r}, not one of {', '.join(STATES)}"
        if not all(isinstance(c, str) for c in self._raw.get("custom_columns") or []):
            return "field 'custom_columns' should be a list of names"
        for f, declared in options():  # Polygraphy's values, each output's too (a re-run reads them)
            value = self._raw.get(f.name)
            if declared.kind in PER_OUTPUT_KINDS and value is not None:
                found = stored_problem(value, declared.kind)
                if found:
                    return f"field {f.name!r}: {printable(found)}"
        return ""


def _spec_key(name: str, default: object, declared: Option) -> Key:
    key: Key = Key(declared.json, None if default is MISSING else default, declared.help)
    key.__set_name__(TaskDoc, name)
    return key


SPEC_KEYS: dict[str, Key] = {f.name: _spec_key(f.name, f.default, declared) for f, declared in options()}
_DECLARED = [v for v in vars(TaskDoc).values() if isinstance(v, Key)]
KEYS: tuple[Key, ...] = (_DECLARED[0], *SPEC_KEYS.values(), *_DECLARED[1:])  # version, what was compared, the rest
for _key in SPEC_KEYS.values():
    setattr(TaskDoc, _key.name, _key)
SCHEMA: dict[str, Key] = {k.name: k for k in KEYS}


# ---- what older accuscopes wrote ----------------------------------------------------------------
def _v1_shards(raw: dict) -> dict:
    """Version 1 (no `version`): --shards "auto" is now "names" (Megatron's class names)."""
    if raw.get("shards") == "auto":
        raw["shards"] = SHARDS_BY_NAMES
    return raw


def _v2_one_name(raw: dict) -> dict:
    """Version 2: the op range and the plugin folder were kept as `range` and `custom_algorithms`; each
    option now has one name, its CompareSpec field's (`op_range`, `custom_dir`)."""
    for old, new in (("range", "op_range"), ("custom_algorithms", "custom_dir")):
        if old in raw:
            value = raw.pop(old)
            raw.setdefault(new, value)
    return raw


def _v3_pairs_calls(raw: dict) -> dict:
    """Version 3 did not record whether the sides pair call by call (`pairs_calls`): its sides' kinds said
    it, two msprobe dumps (the one format declaring it then)."""
    sides = raw.get("sides")
    if "pairs_calls" not in raw and isinstance(sides, dict) and sides and set(sides.values()) == {kinds.MSPROBE}:
        raw["pairs_calls"] = True
    return raw


MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_shards, 2: _v2_one_name, 3: _v3_pairs_calls}  # from version k to k + 1


def migrate(raw: dict) -> dict:
    """`raw` (a document of any version) in this version's form; a newer version's as it is."""
    version = raw.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        return raw  # problem() names it
    while version < VERSION:
        raw = MIGRATIONS[version](raw)
        version += 1
    return raw


# ---- reading and writing ------------------------------------------------------------------------
def read(folder: str | os.PathLike) -> TaskDoc:
    """task.json of a task folder, migrated; SourceError naming the file when it is missing, not a
    JSON object, or a declared key has the wrong type."""
    folder = Path(folder)
    raw = read_json_object(folder / TASK_JSON, f"{folder}: not a task folder (no {TASK_JSON})")
    doc = TaskDoc(migrate(raw))
    problem = doc.problem()
    if problem:
        raise SourceError(f"{folder / TASK_JSON}: {problem}")
    return doc


def read_or_empty(folder: str | os.PathLike) -> TaskDoc:
    """task.json as far as it can be read, for rewriting it: an empty document when it is missing or
    not a JSON object (its typed attributes hold their defaults where a value has the wrong type)."""
    try:
        return TaskDoc(migrate(read_json_object(Path(folder) / TASK_JSON, "")))
    except SourceError:
        return TaskDoc()


def write(folder: str | os.PathLike, doc: TaskDoc) -> None:
    """Replace task.json atomically (outputfile.atomic_file)."""
    with atomic_file(Path(folder) / TASK_JSON) as fh:
        doc.dump(fh)


def write_fresh(path: Path, doc: TaskDoc) -> None:
    """`path`: a fresh file made for this write (O_EXCL, see task._replace_together), opened by name."""
    with open(path, "w", encoding="utf-8") as fh:
        doc.dump(fh)


def host_name() -> str:
    """This machine's name as a running task records it: socket.gethostname()'s answer, through
    platform (numpy has imported it already; socket costs ~5 ms of start-up)."""
    return platform.node()


def mark_state(folder: str | os.PathLike, state: str, **fields) -> TaskDoc:
    """Set the state (and e.g. error=..., npu=...) in task.json, creating it if needed; running
    records this process and host."""
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    doc = read_or_empty(folder)
    now = datetime.now().isoformat(timespec="seconds")
    defaults = {k: v for k, v in (("created", now), ("tool_version", __version__)) if k not in doc}
    if state == "running":
        fields = {"pid": os.getpid(), "host": host_name(), **fields}
    doc = doc.with_fields(**{**defaults, **fields, "state": state, "updated": now})
    write(folder, doc)
    return doc


# ---- what was compared --------------------------------------------------------------------------
def spec_fields(spec: CompareSpec, folder: str | os.PathLike | None = None) -> dict:
    """What task.json records about a comparison, enough to re-run it (TaskDoc.spec reads it back).
    Paths are stored absolute and, under `relative`, relative to the task folder: a task moved
    with its data (to another directory or machine) still finds them (see `recorded_path`)."""
    fields: dict[str, Any] = {}
    for f, declared in options():
        value = getattr(spec, f.name)
        if declared.kind == "shape":
            value = list(value) if value else None
        elif declared.kind == "shards" and value not in (None, SHARDS_BY_NAMES):
            value = os.path.abspath(value)
        elif declared.kind == "dtype":
            value = str(value) if value else None
        fields[f.name] = value
    relative: dict[str, str] = {}
    for key in PATH_KEYS:
        if fields[key]:
            fields[key] = os.path.abspath(fields[key])
            if folder is not None:
                relative[key] = os.path.relpath(fields[key], os.path.abspath(folder))
    fields["relative"] = relative
    return fields


def recorded_path(folder: str | os.PathLike | None, value: object, relative: str | None = None) -> Path | None:
    """A path task.json holds, found from the task folder. One inside the folder's workspace (the folder
    holding the task: the task's own data, dumps beside it) by `relative`, its path relative to the task
    folder, first: a copied workspace reads its own files, never the original's while that is still there.
    Else as written when it exists, else by `relative` (a task moved with its data). A written path that
    is relative is relative to the task folder (else to the current folder, where only that has it).
    None when task.json holds no path there."""
    if not value or not isinstance(value, str):
        return None
    p = Path(value).expanduser()
    if folder is None:
        return p
    if not p.is_absolute():
        under = Path(os.path.normpath(Path(folder) / p))
        return under if under.exists() or not p.exists() else p
    moved = Path(os.path.normpath(Path(folder) / relative)) if relative else None  # (relpath's `..` undone as made)
    if moved is not None and _in_workspace(relative) and moved.exists():
        return moved
    if p.exists() or moved is None or not moved.exists():
        return p
    return moved


def _in_workspace(relative: str | None) -> bool:
    """Whether a path relative to a task folder lies inside its workspace, the folder holding the task
    (climbs out of the task folder at most once)."""
    if not relative or os.path.isabs(relative):
        return False
    return Path(os.path.normpath(relative)).parts[:2] != ("..", "..")
