"""msprobe dumps (the `mindstudio-probe` package: PyTorch and MindSpore training / LLM runs).

Layout, as msprobe's PrecisionDebugger writes it (one folder per step and per rank; a run without
torch.distributed writes `proc{pid}` where the rank would be):

    dump_path/step{N}/rank{M}/dump.json            every API or module call in execution order
                             /stack.json           call stacks
                             /construct.json       call -> parent module call (the hierarchy)
                             /dump_tensor_data/    tensor mode only: {data_name} (.pt from PyTorch,
                                                   .npy from MindSpore)

`dump.json` is `{"task": "tensor"|"statistics", "level", "framework", "dump_data_dir", "data":
{call: {"input_args": [...], "input_kwargs": {...}, "output": [...], "parameters": {...}}}}`;
each tensor entry has `type`, `dtype`, `shape`, `Max`, `Min`, `Mean`, `Norm`, `requires_grad`,
plus `data_name` (tensor mode: its file in dump_tensor_data/) or `md5` (statistics mode with
summary_mode md5: a CRC-32 of the bytes, 8 hex digits). Calls are named
`Functional.linear.5.forward` (API, call counter, direction) or `Module.conv1.Conv2d.forward.0`
(module path, class, direction, counter); a tensor is `{call}.input.{i}` (`.{j}` nested, `.{key}`
for a keyword), `{call}.output.{i}`, `{call}.parameters.{name}`.

msprobe writes dump.json when the step ends: a crashed run leaves tensor files without it, or
with an empty or cut-short one (dump_tensor_data/ still makes the folder msprobe's). Their names
still say call, direction and slot, so they are read from the file names (no statistics, a problem
says why). A damaged tensor entry (its dtype or shape missing) is a problem naming it; its row stays. Each tensor becomes a `Tensor` of op = the call, named `tensor_name` = its
data name (pairing is by identical names), `op_type` = the module holding the call (from
construct.json; the table filters by it), `stats` and `checksum` from dump.json. With
`stats_only`, no tensor file is opened.
"""
# lazy: engine.sources.torchpickle
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

try:
    from accuscope.engine.sources import _dumpscan  # type: ignore[attr-defined]  # compiled: dump.json straight to columns
except ImportError:  # pragma: no cover - built without a C compiler: _scan, its Python twin
    _dumpscan = None
if os.environ.get("ACCUSCOPE_KERNEL") == "numpy":  # the compiled parts off (benchmarks, tests)
    _dumpscan = None

from accuscope.engine.sources import sniffs
from accuscope.engine.sources.inputfile import json_loads, not_regular
from accuscope.engine.sources.kinds import MSPROBE
from accuscope.engine.sources.names import natural_key
from accuscope.engine.sources.npyfile import MEMBER_ERRORS, nd_tensor, npy_file_tensor, read_npy_file
from accuscope.engine.sources.tensor import (
    INPUT,
    OUTPUT,
    VALUE_CHARS,
    Problem,
    SourceError,
    Tensor,
    recorded_tensor,
    value_text,
)

KIND = MSPROBE
# the sniff and the layout facts it shares with the reader: sources/sniffs.py (the registry sniffs without this module)
sniff, ranks, is_tensor_folder = sniffs.msprobe, sniffs.msprobe_folders, sniffs.is_msprobe_tensor_folder
DUMP_JSON, DATA_DIR, SNIFF_BYTES = sniffs.MSPROBE_JSON, sniffs.MSPROBE_DATA, sniffs.MSPROBE_SNIFF_BYTES
_STEP, _RANK = sniffs.MSPROBE_STEP, sniffs.MSPROBE_RANK
CONSTRUCT_JSON, STACK_JSON = "construct.json", "stack.json"
STACK_LIMIT, STACK_LINES = 256 << 20, 64  # stack.json bytes read, lines kept per call
# {call}.{slot}.{rest}: the call ends at its direction (and a module's counter after it)
# (a module's weight gradients are a call of their own: {module}.parameters_grad.{n}.{parameter}.pt)
_DATA_NAME = re.compile(r"(?:(?P<call>.+?\.(?:forward|backward)(?:\.\d+)?)\.(?P<slot>input|output|parameters_grad|parameters)"
                        r"|(?P<grads>.+?\.parameters_grad(?:\.\d+)?))\.(?P<rest>.+?)\.(?P<ext>pt|npy)")
# the slots of a call's entry (backward calls write "input" / "output"); GRADS stands for the whole entry of a
# parameters_grad call ({parameter: [tensor]}: its tensors are named {call}.{parameter}, as msprobe's compare
# names them, list positions left out)
GRADS = ""
_SLOT_IO = {"input_args": INPUT, "input_kwargs": INPUT, "parameters": INPUT, "output": OUTPUT,
            "parameters_grad": OUTPUT, "input": INPUT, GRADS: OUTPUT}
_SLOT_NAME = {"input_args": ".input", "input_kwargs": ".input", "parameters": ".parameters", "output": ".output",
              "parameters_grad": ".parameters_grad", "input": ".input", GRADS: ""}
_GRADS_CALL = re.compile(r".+\.parameters_grad(?:\.[0-9]+)?", re.S)
OPTIMIZER = "optimizer"  # construct.json's parent of the calls an optimizer's step made (msprobe 26)
DAMAGED = "a damaged tensor entry (its dtype or shape missing): the row has no dtype or shape from dump.json"
_DIM_LIMIT = 1 << 63  # a dimension is an int64, as torch and numpy keep it
DTYPE_NAMES = {"float": "float32", "half": "float16", "double": "float64", "long": "int64", "int": "int32"}


def _matches(wanted: str | int | None, label: str, pattern: re.Pattern) -> bool:
    if wanted is None or wanted == "":
        return True
    m = pattern.fullmatch(label)
    return str(wanted) == label or (m is not None and m.group(m.lastindex or 0) == str(wanted))


def choose(path: str, step: str | int | None = None, rank: str | int | None = None) -> tuple[str, str, str]:
    """The one step/rank folder `path` means (with --step/--rank where it holds several); SourceError
    listing the folders otherwise."""
    found = ranks(path)
    if not found:
        raise SourceError(f"{path}: no msprobe dump (no step*/rank*/ folder with dump.json or dump_tensor_data/)")
    chosen = [f for f in found if _matches(step, f[0], _STEP) and _matches(rank, f[1], _RANK)]
    def listed(folders) -> str:
        return ", ".join("/".join(p for p in f[:2] if p) or "." for f in folders[:12]) + (" …" if len(folders) > 12 else "")
    if not chosen:
        raise SourceError(f"{path}: no folder for step {step if step is not None else 'any'} and rank "
                          f"{rank if rank is not None else 'any'}; it holds: {listed(found)}")
    if len(chosen) > 1:
        raise SourceError(f"{path}: holds {len(chosen)} step/rank folders ({listed(chosen)}): choose one with --step "
                          "and --rank")
    return chosen[0]


def of_step(path: str, step: str | int | None = None) -> list[tuple[str, str, str]]:
    """The (step, rank, folder) of every rank in one step of `path`: the step `step` names, else its only
    one; SourceError listing the steps when that says none or several."""
    found = ranks(os.fspath(path))
    steps = list(dict.fromkeys(s for s, _, _ in found))
    chosen = [f for f in found if _matches(step, f[0], _STEP)]
    if not chosen:
        raise SourceError(f"{path}: no step {step if step is not None else ''} with rank folders (it holds: "
                          f"{', '.join(s or '.' for s in steps) or 'none'})")
    if len({s for s, _, _ in chosen}) > 1:
        raise SourceError(f"{path}: holds steps {', '.join(steps)}: choose one with --step")
    return chosen


def read(path: str, *, step: str | int | None = None, rank: str | int | None = None, stats_only: bool = False,
         **_options) -> tuple[list[Tensor], list[Problem]]:
    """The tensors of one step and rank in execution order, and what could not be read."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    folder = choose(path, step, rank)[2]
    problems: list[Problem] = []
    parents = construct_parents(folder, problems)
    doc, why = _dump_json(folder)
    if doc is None:
        source = os.path.join(folder, DUMP_JSON)
        if os.path.exists(source):  # there, but unreadable: the tensor files' names say what they are
            if not os.path.isdir(os.path.join(folder, DATA_DIR)):
                raise SourceError(f"{source}: {why} (and no {DATA_DIR}/ to read tensors from)")
            why += f"; tensors read from {DATA_DIR}/ file names, without statistics"
        problems.append(Problem(source, why))
        return _from_file_names(folder, parents, problems), problems
    data = doc.get("data")
    if not isinstance(data, dict):
        raise SourceError(f"{os.path.join(folder, DUMP_JSON)}: no \"data\" object (not an msprobe dump.json)")
    kept = [0]
    tensors = [_value(folder, call, io, index, name, info, module) if is_value else
               _tensor(folder, call, io, index, name, info, module, stats_only, problems, kept)
               for call, _slot, io, index, name, info, module, is_value in _entries(folder, data, parents, problems)]
    return tensors, problems


def _entries(folder: str, data: dict, parents: dict[str, str], problems: list[Problem]):
    """(call, slot, io, index within the call's io, tensor name, entry, module, is a value) of every tensor
    and non-tensor value (`_walk`) dump.json records, in msprobe's order (a call that is not an object: a
    problem); a value takes its place in the call's inputs or outputs as a tensor does."""
    for call, entry in data.items():
        if not isinstance(entry, dict):
            problems.append(Problem(os.path.join(folder, DUMP_JSON), f"{call}: not an object"))
            continue
        counters = {INPUT: 0, OUTPUT: 0}
        module = _module(call, parents)
        slots = [(GRADS, entry)] if is_grads(call) else entry.items()
        for slot, value in slots:
            io = _SLOT_IO.get(slot)
            if io is None:
                continue
            for suffix, info, is_value in _walk(value, slot):
                name = f"{call}{_SLOT_NAME[slot]}{suffix}"
                if not is_value and not ("dtype" in info and "shape" in info):
                    problems.append(Problem(os.path.join(folder, DUMP_JSON), f"{name}: {DAMAGED}"))
                yield call, slot, io, counters[io], name, info, module, is_value
                counters[io] += 1


def is_grads(call: str) -> bool:
    """`Module.fc1.Linear.parameters_grad.0` (msprobe 26; older: no counter): a module's weight gradients."""
    return _GRADS_CALL.fullmatch(call) is not None


_SLOTS = tuple(_SLOT_IO)  # a slot's code in the columns: its position here (_dumpscan.c's order)
_SLOT_IO_BY_CODE = np.array([_SLOT_IO[s] for s in _SLOTS], dtype=object)


@dataclass
class Recorded:
    """What one rank's dump.json records, as columns (statistics triage at scale: no Tensor per
    entry); row k is the k-th tensor `read` would give with stats_only."""

    doc: str
    calls: np.ndarray  # per row (object arrays unless said)
    io: np.ndarray
    index: np.ndarray  # int64: position among the call's inputs / outputs
    names: list[str]
    modules: np.ndarray
    dtypes: np.ndarray  # normalized (dtype_name)
    shapes: np.ndarray  # "[4096,4096]"
    stats: np.ndarray  # (n, 4) float64: Max, Min, Mean, Norm; NaN where not recorded
    has: np.ndarray  # bool: any of the four recorded
    checksums: np.ndarray  # "" where not recorded
    values: np.ndarray  # a non-tensor value's text (value_text), "" on a tensor's row


def recorded(path: str, *, step: str | int | None = None, rank: str | int | None = None,
             stats_only: bool = False) -> Recorded | None:
    """The statistics of one step and rank as columns; None where `read` has more to say (dump.json
    missing or broken, a problem on the way, tensor files to open without stats_only)."""
    return _as_columns(choose(os.fspath(path), step, rank)[2], stats_only)


def _as_columns(folder: str, stats_only: bool) -> Recorded | None:
    if not stats_only and os.path.isdir(os.path.join(folder, DATA_DIR)):
        return None  # tensor mode: the files are compared
    problems: list[Problem] = []
    parents = construct_parents(folder, problems)
    raw, _why = _dump_bytes(folder)
    if raw is None or problems:
        return None
    found = _dumpscan.scan(raw) if _dumpscan is not None else None
    if found is None:  # no compiled scanner, or text it leaves to Python
        doc, _why = _parse(raw)
        if doc is None or not isinstance(doc.get("data"), dict):
            return None
        found = _scan(doc["data"])
        if found is None:
            return None
    calls, call_of, slot, index, names, dtypes, shapes, stats, has, md5, data_name, raw_values = found
    call_of, slot = np.frombuffer(call_of, dtype=np.int64), np.frombuffer(slot, dtype=np.uint8)
    if not stats_only and np.frombuffer(data_name, dtype=np.uint8).any():
        return None
    modules = np.array([_module(c, parents) for c in calls], dtype=object)
    dtype_of = {d: dtype_name(d) for d in set(dtypes)}
    values = np.full(len(names), "", dtype=object)
    for k, raw in enumerate(raw_values):
        if raw is not None:  # a value's row: its JSON text as written, its type as written
            values[k] = raw_value_text(raw)
            dtypes[k] = value_type(dtypes[k])
    return Recorded(os.path.join(folder, DUMP_JSON), np.array(calls, dtype=object)[call_of], _SLOT_IO_BY_CODE[slot],
                    np.frombuffer(index, dtype=np.int64), names, modules[call_of],
                    np.array([d if v else dtype_of[d] for d, v in zip(dtypes, values.tolist())], dtype=object),
                    np.array(shapes, dtype=object), np.frombuffer(stats, dtype=np.float64).reshape(-1, 4),
                    np.frombuffer(has, dtype=np.uint8).astype(bool), np.array(md5, dtype=object), values)


def _scan(data: dict) -> tuple | None:
    """_dumpscan.scan's columns from the parsed "data" object (its Python twin: the tests hold the two
    to the same columns); None where a call is not an object."""
    calls = list(data)
    problems: list[Problem] = []
    position = {call: k for k, call in enumerate(calls)}
    rows: list[tuple] = []
    for call, slot, _io, index, name, info, _module, is_value in _entries("", data, {}, problems):
        if is_value:
            kind = info.get("type") if isinstance(info, dict) else ""
            try:
                raw = json.dumps(info.get("value") if isinstance(info, dict) else None)
            except (RecursionError, ValueError):
                return None
            rows.append((position[call], _SLOTS.index(slot), index, name, kind if isinstance(kind, str) else "", "[]",
                         (None,) * 4, False, "", False, raw))
            continue
        stats = _stats(info)
        data_name = info.get("data_name")
        rows.append((position[call], _SLOTS.index(slot), index, name, str(info.get("dtype", "")),
                     "[" + ",".join(map(str, _shape(info))) + "]", stats or (None,) * 4, stats is not None,
                     str(info.get("md5") or ""), isinstance(data_name, str) and bool(data_name), None))
    if problems:
        return None
    columns: list[list] = [list(c) for c in zip(*rows)] if rows else [[] for _ in range(11)]
    c_call, c_slot, c_index, c_names, c_dtypes, c_shapes, c_stats, c_has, c_md5, c_data, c_raw = columns
    return (calls, np.array(c_call, dtype=np.int64).tobytes(), np.array(c_slot, dtype=np.uint8).tobytes(),
            np.array(c_index, dtype=np.int64).tobytes(), c_names, c_dtypes, c_shapes,
            np.array(c_stats, dtype=float).reshape(-1, 4).tobytes(), np.array(c_has, dtype=np.uint8).tobytes(), c_md5,
            np.array(c_data, dtype=np.uint8).tobytes(), c_raw)


def _damaged(value: dict) -> bool:
    """A tensor entry missing its dtype or its shape: a record (it has a "type") of a tensor type
    (`torch.Tensor`, `mindspore.Tensor`) or naming a data file, without both (`_dumpscan.c` leaves
    such text to Python, which names the entry). A mapping of keyword arguments has no "type": its
    `dtype=` argument is no tensor."""
    if "type" not in value or ("dtype" in value and "shape" in value):
        return False
    kind = value["type"]
    return "data_name" in value or (isinstance(kind, str) and kind.endswith("Tensor"))


def _walk(value, slot: str, prefix: str = ""):
    """(name suffix, entry, is a value) of every tensor and non-tensor value in an argument structure, in
    msprobe's order (depth first; a loop, not recursion: a structure nested a thousand deep is valid JSON).
    A damaged tensor entry (`_damaged`: `_entries` says so) is a tensor too, its row kept. A value is what
    msprobe's compare lists as a row with no tensor: a record with a "type" and no dtype and shape
    (`{"type": "int", "value": 1}`) and a null (a None argument or output); a bare number, string or empty
    structure is no row (msprobe's op_item_parse skips them)."""
    stack = [(prefix, value)]
    while stack:
        prefix, value = stack.pop()
        if isinstance(value, dict) and (("dtype" in value and "shape" in value) or _damaged(value)):
            yield prefix, value, False
        elif value is None or (isinstance(value, dict) and "type" in value):
            yield prefix, value, True
        elif isinstance(value, (list, tuple)):
            stack += [(prefix if slot == GRADS else f"{prefix}.{i}", v) for i, v in enumerate(value)][::-1]
        elif isinstance(value, dict):
            stack += [(f"{prefix}.{k}", v) for k, v in value.items()][::-1]


def raw_value_text(raw: str) -> str:
    """value_text of a value's JSON text as dump.json holds it (what _dumpscan gives)."""
    try:
        return value_text(loads(raw.encode("utf-8", "surrogatepass")))
    except (ValueError, RecursionError):
        return raw[:VALUE_CHARS]


def value_type(kind) -> str:
    """A value's type as msprobe records it (int, float, bool, str, slice, torch.Size ...); a null: None."""
    return kind if isinstance(kind, str) and kind else "None"


def _value(folder: str, call: str, io: str, index: int, name: str, info, module: str) -> Tensor:
    """A non-tensor argument or output (`_walk`): a row compared as a value."""
    record = info if isinstance(info, dict) else {}
    return Tensor(op=call, io=io, index=index, dtype=None, shape=(), source=os.path.join(folder, DUMP_JSON),
                  op_type=module, tensor_name=name, dtype_name=value_type(record.get("type")),
                  value=value_text(record.get("value")))


def _number(value) -> float | None:
    if type(value) is float:
        return value
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer past float's range: infinite, as _dumpscan.c reads it
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_INT = {int}


def _shape(info: dict) -> tuple[int, ...]:
    """The recorded shape when it is one: a list of ints (not 2.0, not True) from 0 to _DIM_LIMIT."""
    shape = info.get("shape")
    if type(shape) is not list or not shape:
        return ()
    # each test in C: the types as a set, then the range (a cache keyed by the tuple would take [2.0] for [2])
    return tuple(shape) if set(map(type, shape)) == _INT and 0 <= min(shape) and max(shape) < _DIM_LIMIT else ()


def _stats(info: dict) -> tuple | None:
    """(Max, Min, Mean, Norm) as recorded, None where one is not; None when none is."""
    stats = (info.get("Max"), info.get("Min"), info.get("Mean"), info.get("Norm"))
    if type(stats[0]) is type(stats[1]) is type(stats[2]) is type(stats[3]) is float:
        return stats  # as msprobe writes them
    numbers = tuple(map(_number, stats))
    return None if numbers == (None, None, None, None) else numbers


@lru_cache(maxsize=64)
def _doc(folder: str) -> str:
    """`folder`/dump.json, joined once a folder (not once for each of its 500k tensors)."""
    return os.path.join(folder, DUMP_JSON)


@lru_cache(maxsize=256)
def dtype_name(text: str) -> str:
    """`torch.float32` / `Float32` / `bfloat16` -> `float32` / `bfloat16`."""
    name = str(text).rsplit(".", 1)[-1].lower()
    return DTYPE_NAMES.get(name, name)


def _tensor(folder: str, call: str, io: str, index: int, name: str, info: dict, module: str, stats_only: bool,
            problems: list[Problem], kept: list[int] | None = None) -> Tensor:
    shape = _shape(info)
    fields: dict[str, Any] = dict(op=call, io=io, index=index, op_type=module, tensor_name=name, stats=_stats(info),
                  checksum=str(info.get("md5") or ""))
    data_name = info.get("data_name")
    doc = _doc(folder)
    if not stats_only and "data_name" in info and not (isinstance(data_name, str) and data_name):
        message = f"data_name is {'empty' if data_name == '' else 'a ' + type(data_name).__name__}, not a file name"
        problems.append(Problem(doc, f"{name}: {message}"))
        return Tensor(dtype=None, shape=shape, source=doc, problem=message, **fields)
    if stats_only or not isinstance(data_name, str) or not data_name:
        return recorded_tensor(call, io, index, shape, doc, module, dtype_name(str(info.get("dtype", ""))), name,
                               fields["stats"], fields["checksum"], DAMAGED if _damaged(info) else "")
    if os.path.basename(data_name) != data_name or data_name in (".", ".."):
        message = f"data_name {data_name!r} is not a file name"
        problems.append(Problem(doc, f"{name}: {message}"))
        return Tensor(dtype=None, shape=shape, source=doc, problem=message, **fields)
    fields["tensor_name"] = os.path.splitext(data_name)[0]
    return tensor_file(os.path.join(folder, DATA_DIR, data_name), problems, kept, **fields)


KEEP_BYTES = 16 << 20
"""Bytes of small npy files' data one `read` keeps from the read that parsed their headers (as golden's npy
folder does): loading them opens no file again."""


def tensor_file(source: str, problems: list[Problem], kept: list[int] | None = None, **fields) -> Tensor:
    """One dump_tensor_data file (.npy through the bounded npy parser, .pt through torchpickle); `kept`:
    the bytes of small files' data kept so far by this read, [0] (none kept without it)."""
    why = "no such file" if not os.path.exists(source) else not_regular(source)
    if why:
        problems.append(Problem(source, why))
        return Tensor(dtype=None, shape=(), source=source, problem=why, **fields)
    if source.endswith(".npy"):  # opened once: the header parsed there, a small file's data kept (kept[0]: bytes so far)
        op = fields.pop("op")
        try:
            meta, offset, data = read_npy_file(source, keep=kept is not None and kept[0] < KEEP_BYTES)
        except MEMBER_ERRORS as exc:
            problems.append(Problem(source, str(exc)))
            return nd_tensor(op, source, problem=str(exc), **fields)
        if data is not None and kept is not None:
            kept[0] += len(data)
        return npy_file_tensor(op, source, meta, offset, data, **fields)
    from accuscope.engine.sources import torchpickle  # pickle, pickletools: imported for .pt dumps only
    try:
        pt = torchpickle.describe(source)
        start = torchpickle.storage_offset(source, pt)  # checks the storage whatever the dtype
    except (torchpickle.PtError, OSError) as exc:
        problems.append(Problem(source, str(exc)))
        return Tensor(dtype=None, shape=(), source=source, problem=str(exc), **fields)
    return torchpickle.tensor(source, pt, start, **fields)


def _dump_json(folder: str) -> tuple[dict | None, str]:
    raw, why = _dump_bytes(folder)
    return (None, why) if raw is None else _parse(raw)


def _dump_bytes(folder: str) -> tuple[bytes | None, str]:
    doc = os.path.join(folder, DUMP_JSON)
    if not os.path.exists(doc):
        return None, ("missing (msprobe writes it when the step ends: did the run stop early?); tensors read from "
                      f"{DATA_DIR}/ file names, without statistics")
    why = not_regular(doc)
    if why:
        return None, why
    try:
        with open(doc, "rb") as fh:
            return fh.read(), ""
    except OSError as exc:
        return None, f"cannot read: {exc}"


def _parse(raw: bytes) -> tuple[dict | None, str]:
    try:
        found = loads(raw)
    except UnicodeDecodeError as exc:
        return None, f"cannot read: {exc}"
    except ValueError as exc:
        return None, f"cut short or not JSON ({exc})"
    except RecursionError:
        return None, "nested too deeply to read"
    if not isinstance(found, dict):
        return None, "not a JSON object"
    return found, ""


@cache
def _orjson():
    """orjson (optional: accuscope[fast]) when installed, imported at the first dump.json read."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - the json module does the same, slower
        return None
    return orjson


def loads(raw: bytes):
    """JSON text as Python objects: orjson when installed (2x faster on a 100 MB dump.json), else, and
    for what orjson refuses (NaN / Infinity as Python's json writes them, bad UTF-8, numbers past
    float's range, nesting deeper than 1,024), the json module and its messages. An integer past
    Python's digit limit (4,300) is read as float() reads its digits (±inf), not refused: _dumpscan.c
    reads every number that way."""
    orjson = _orjson()
    if orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    text = raw.decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # int() refused a number's digits
        return json.loads(text, parse_int=_json_int)


def _json_int(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits()
        return float(text)


def construct_parents(folder: str, problems: list[Problem]) -> dict[str, str]:
    """construct.json: call -> the module call it ran inside (absent or broken: no hierarchy)."""
    doc = os.path.join(folder, CONSTRUCT_JSON)
    if not os.path.isfile(doc):
        return {}
    try:
        with open(doc, encoding="utf-8") as fh:
            found = json_loads(fh.read())
    except (OSError, ValueError) as exc:  # not JSON, not UTF-8, nested too deeply
        problems.append(Problem(doc, f"unreadable, no module hierarchy ({exc})"))
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


def module_path(call: str) -> str:
    """`Module.layers.0.attn.Attention.forward.3` -> `layers.0.attn` (Cell. for MindSpore alike)."""
    parts = call.split(".")
    if len(parts) >= 4 and parts[0] in ("Module", "Cell") and parts[-2] in ("forward", "backward"):
        return ".".join(parts[1:-3])
    if len(parts) >= 4 and parts[0] in ("Module", "Cell") and parts[-1] in ("forward", "backward"):
        return ".".join(parts[1:-2])
    return ""


def grads_module(call: str) -> str:
    """The module whose weight gradients a parameters_grad call holds (`Module.attn.qkv.Linear.parameters_grad.0`
    -> `attn.qkv`), "" for any other call."""
    if not is_grads(call):
        return ""
    parts = call.split(".")
    parts = parts[:-1] if parts[-1].isdigit() else parts
    return ".".join(parts[1:-2]) if len(parts) >= 4 and parts[0] in ("Module", "Cell") else ""


def _module(call: str, parents: dict[str, str]) -> str:
    """The module a call belongs to: a module call's own path, else its parent module's (a parameters_grad
    call: the module whose gradients it holds; a call an optimizer's step made: "optimizer")."""
    parent = parents.get(call, "")
    return module_path(call) or module_path(parent) or grads_module(call) or (OPTIMIZER if parent == OPTIMIZER else "")


def _from_file_names(folder: str, parents: dict[str, str], problems: list[Problem]) -> list[Tensor]:
    """Without dump.json: the tensor files, ordered by write time, their calls and slots from their names."""
    data_dir = os.path.join(folder, DATA_DIR)
    try:
        entries = [e for e in os.scandir(data_dir) if e.name.endswith((".pt", ".npy"))]
    except OSError as exc:
        raise SourceError(f"{folder}: no readable {DUMP_JSON} and no {DATA_DIR}/ ({exc.strerror or exc})") from None
    named = []
    for e in entries:
        m = _DATA_NAME.fullmatch(e.name)
        if m is None:
            problems.append(Problem(e.path, "not an msprobe data name ({call}.{input|output|parameters}.{k}.pt|npy)"))
            continue
        named.append((e.stat().st_mtime_ns, natural_key(e.name), m, e.path))
    named.sort(key=lambda x: (x[0], x[1]))
    first: dict[str, int] = {}
    for k, (*_, m, _p) in enumerate(named):
        first.setdefault(m.group("call") or m.group("grads"), k)
    named.sort(key=lambda x: (first[x[2].group("call") or x[2].group("grads")],
                              x[2].group("slot") not in ("input", "parameters"), x[2].group("slot") == "parameters", x[1]))
    counters: dict[tuple[str, str], int] = {}
    tensors = []
    kept = [0]
    for *_, m, source in named:
        call = m.group("call") or m.group("grads")
        io = OUTPUT if m.group("grads") or m.group("slot") in ("output", "parameters_grad") else INPUT
        index = counters.get((call, io), 0)
        counters[(call, io)] = index + 1
        stem = os.path.basename(source).rsplit(".", 1)[0]
        tensors.append(tensor_file(source, problems, kept, op=call, io=io, index=index, op_type=_module(call, parents),
                                   tensor_name=stem))
    if not tensors:
        raise SourceError(f"{folder}: no readable {DUMP_JSON} and no tensor files in {DATA_DIR}/")
    return tensors



def counts(tensors) -> dict[tuple[str, str], int]:
    """Tensors per (call, io): msprobe pairs a call only when both sides have as many (non-tensor values not
    counted: a side read from its file names, dump.json lost, has none)."""
    found: dict[tuple[str, str], int] = {}
    for t in tensors:
        if t.value is None:
            found[(t.op, t.io)] = found.get((t.op, t.io), 0) + 1
    return found


def call_tensors(folder: str) -> dict[str, list[tuple[str, str, tuple[int, ...]]]]:
    """call -> its tensors' (name, io, shape) in dump order: from dump.json's columns (a 100k-call dump
    in a second), else as `read` finds them (dump.json missing or damaged: the file names)."""
    found = _as_columns(folder, stats_only=True)
    calls: dict[str, list] = {}
    if found is None:
        for t in read(folder, stats_only=True)[0]:
            if t.value is None:  # a non-tensor value: no edge of the graph
                calls.setdefault(t.op, []).append((t.tensor_name, t.io, t.shape))
        return calls
    shape_of = {text: tuple(int(d) for d in text[1:-1].split(",") if d) for text in set(found.shapes.tolist())}
    for call, name, io, shape, value in zip(found.calls.tolist(), found.names, found.io.tolist(),
                                            found.shapes.tolist(), found.values.tolist()):
        if not value:
            calls.setdefault(call, []).append((name, io, shape_of[shape]))
    return calls


def first_folder(path: str, step: str | int | None, rank: str | int | None) -> str:
    """The first step/rank folder of `path` matching step and rank (SourceError when none does)."""
    found = [f for f in ranks(os.fspath(path)) if _matches(step, f[0], _STEP) and _matches(rank, f[1], _RANK)]
    return found[0][2] if found else choose(path, step, rank)[2]


def stacks(path: str, step: str | int | None = None, rank: str | int | None = None) -> tuple[dict[str, list[str]], str]:
    """stack.json: call -> its Python stack lines (`File …, line N, in f, \\n code`), innermost first,
    of the step/rank folder chosen (else the first one), and why it could not be read ("" when it
    was, or is absent). msprobe writes `{"0": [[calls], [lines]], …}` (older versions `{call:
    [lines]}`); a file above STACK_LIMIT bytes is not read, lines beyond STACK_LINES are cut."""
    doc = os.path.join(first_folder(path, step, rank), STACK_JSON)
    if not os.path.exists(doc):
        return {}, ""
    why = not_regular(doc)
    if not why and os.path.getsize(doc) > STACK_LIMIT:
        why = f"{os.path.getsize(doc):,} bytes, more than the {STACK_LIMIT >> 20} MB read for call stacks"
    if why:
        return {}, f"{doc}: {why}"
    try:
        with open(doc, encoding="utf-8") as fh:
            found = json_loads(fh.read())
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"{doc}: cannot read: {exc}"
    except ValueError as exc:
        return {}, f"{doc}: cut short or not JSON ({exc}); no call stacks"
    if not isinstance(found, dict):
        return {}, f"{doc}: not a JSON object; no call stacks"
    calls: dict[str, list[str]] = {}
    for key, value in found.items():
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, list) for v in value):
            names, lines = value
        elif isinstance(value, list):
            names, lines = [key], value
        else:
            continue
        lines = [str(line) for line in lines[:STACK_LINES] if isinstance(line, str)]
        for name in names:
            if isinstance(name, str):
                calls[name] = lines
    return calls, ""


def describe(path: str, tensors: list[Tensor], *, step=None, rank=None, stats_only: bool = False, **_options) -> list[str]:
    """Lines for `inspect`: which step and rank of how many, the dump's mode, calls and modules."""
    found = ranks(path)
    s, r, folder = choose(path, step, rank)
    mode = ("md5" if any(t.checksum for t in tensors) else
            "tensor" if any(t.reader is not None for t in tensors) else "statistics")
    where = "/".join(p for p in (s, r) if p) or os.path.basename(os.path.normpath(path))
    lines = [f"{where}" + (f" of {len(found)} step/rank folders (choose with --step/--rank)" if len(found) > 1 else "")
             + f" · {mode} mode" + (" · statistics only (--stats-only)" if stats_only else "")]
    modules = {t.op_type for t in tensors if t.op_type}
    lines.append(f"calls {len({t.op for t in tensors}):,} in {len(modules):,} modules")
    grads = sum(1 for t in tensors if is_grads(t.op))
    params = sum(1 for t in tensors if ".parameters." in t.tensor_name)
    if grads or params:
        lines.append(f"parameters {params:,} · parameters_grad {grads:,} (weight gradients, under their module)")
    kinds: dict[str, int] = {}
    for t in tensors:
        if t.value is not None:
            kinds[t.dtype_name] = kinds.get(t.dtype_name, 0) + 1
    if kinds:
        lines.append(f"values {sum(kinds.values()):,} (non-tensor arguments and outputs: "
                     + ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items(), key=lambda x: -x[1]))
                     + "; compared as values, equal or not)")
    lines += skipped(folder)
    return lines


def skipped(folder: str) -> list[str]:
    """What dump.json records that is not read, in words for `inspect` (nothing is skipped silently): keys
    of a call that are no slot this reader knows."""
    doc, _why = _dump_json(folder)
    data = doc.get("data") if doc is not None else None
    if not isinstance(data, dict):
        return []
    unknown: dict[str, int] = {}
    for call, entry in data.items():
        if isinstance(entry, dict) and not is_grads(call):
            for slot in entry:
                if slot not in _SLOT_IO:
                    unknown[slot] = unknown.get(slot, 0) + 1
    if not unknown:
        return []
    return [f"skipped: {sum(unknown.values()):,} entries of unknown slots ("
            + ", ".join(f"{k} {n:,}" for k, n in sorted(unknown.items())) + ")"]
