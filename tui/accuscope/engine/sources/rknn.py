"""Rockchip RKNN-Toolkit2 `accuracy_analysis` snapshots (`RKNN.accuracy_analysis(inputs, output_dir,
target=None)`: the simulator; with a board, `target='rk3588'`, the device's run too).

The snapshot folder, as RKNN-Toolkit2 2.5 writes it (tests/fixtures/rknn/make_fixtures.py):
- `golden/`, `simulator/` (and `runtime/` with a board): one `{file}.txt` a layer, its values flattened
  one a line ("%f"), and `npy/{file}.npy`, the same values as float32 in the layer's shape;
- `map_name_to_file.txt`: a header, a line of dashes, then `layer_name  file_name` a line, in execution
  order (a file name is the layer name made safe: `.` and `/` to `_`);
- `error_analysis.txt`: per layer `[OpType] name  entire_cos | entire_euc  single_cos | single_euc`:
  "entire", the simulator against golden (errors accumulated layer by layer); "single", the layer alone
  on golden inputs (its own error); a layer fused into the next one has no numbers, a layer whose int8
  values are all zero `q_zero` in their place.

Either a side folder (`snapshot/simulator`, `snapshot/golden`) or the snapshot itself is a source; the
snapshot holds both sides (`side`: runtime when there is one, else simulator, against golden). A layer
is read from its npy file where there is one (shape and float32 as RKNN held them), else from its text
(flat: the .txt keeps no shape; with the `model` option, sides.registry's, a model of fixed input shape
gives each layer, an ONNX tensor by name, its shape: `shaped`). The error table's "single" figures ride on the simulator side's tensors
(`Tensor.reported`): RKNN's own answer to "did this layer add the error, or inherit it".
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

import numpy as np

from accuscope.engine.sources import kinds
from accuscope.engine.sources.inputfile import read_user_file
from accuscope.engine.sources.npyfile import npy_file_tensor, read_npy_files
from accuscope.engine.sources.tensor import OUTPUT, Problem, SourceError, Tensor

KIND = kinds.RKNN
MAP = "map_name_to_file.txt"
ERRORS = "error_analysis.txt"
SIDES = ("golden", "simulator", "runtime")
TABLE_LIMIT = 64 << 20  # a map or error table of a million layers
REPORTED = ("rknn_entire_cos", "rknn_entire_euc", "rknn_single_cos", "rknn_single_euc")
FLAT = "flattened (RKNN's .txt: no shape; the model= option gives it)"
Q_ZERO = "q_zero"  # error_analysis.txt's word for a layer whose quantized values are all zero (no cos, no euc)
SINGLE = REPORTED[2:]  # carried on the simulator's tensors (the entire ones are its own cos and euc)
_NUMBER = r"(?:\x1b\[[0-9;]*m)?([-+\d.eE]+|nan|inf)(?:\x1b\[0m)?"
_ROW = re.compile(rf"^\[(?P<type>[^\]]+)\] (?P<name>\S+)(?:\s+{_NUMBER} \| {_NUMBER}\s+{_NUMBER} \| {_NUMBER})?")


def _root_side(path: str) -> tuple[str, str | None]:
    """(the snapshot folder, the side folder's name or None where `path` is the snapshot itself)."""
    path = os.path.normpath(path)
    if os.path.isfile(os.path.join(path, MAP)):
        return path, None
    return os.path.dirname(path), os.path.basename(path)


def sniff(path: str) -> bool:
    """A snapshot folder (its map_name_to_file.txt beside a golden/ or simulator/ folder) or one of its side
    folders (golden/, simulator/, runtime/ beside that map)."""
    if not os.path.isdir(path):
        return False
    root, side = _root_side(path)
    if not os.path.isfile(os.path.join(root, MAP)):
        return False
    if side is None:
        return any(os.path.isdir(os.path.join(root, s)) for s in SIDES)
    return side in SIDES


def read_map(root: str) -> list[tuple[str, str]]:
    """(layer name, file name) in the map's order; SourceError for a map that is not one."""
    path = os.path.join(root, MAP)
    text = read_user_file(path, "RKNN layer map", TABLE_LIMIT)
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] == "layer_name" or set(line.strip()) == {"-"}:
            continue
        if len(parts) != 2:
            raise SourceError(f"{path}: line {number}: expected 'layer_name file_name', got {line.strip()!r}")
        found.append((parts[0], parts[1]))
    if not found:
        raise SourceError(f"{path}: no layer listed")
    return found


def read_errors(root: str) -> dict[str, tuple[str, dict[str, float]]]:
    """error_analysis.txt: layer -> (its op type, {REPORTED key: value}; empty for a layer without numbers).
    {} where the snapshot has no such file."""
    path = os.path.join(root, ERRORS)
    if not os.path.isfile(path):
        return {}
    text = read_user_file(path, "RKNN error analysis", TABLE_LIMIT)
    found = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            numbers = m.groups()[2:6]
            found[m.group("name")] = (m.group("type"), {k: float(v) for k, v in zip(REPORTED, numbers) if v is not None})
    return found


def read(path: str, *, side: str | None = None, model: str | None = None,
         shapes: Mapping[str, tuple[int, ...]] | None = None, **_options) -> tuple[list[Tensor], list[Problem]]:
    """One side's layers in the map's order (`side` for the snapshot folder: golden, simulator or runtime;
    default runtime where there is one, else simulator). `model`: the model given for the side, and `shapes`
    its tensors' static shapes (sides.registry reads them from it: the graphs sit above the sources): a
    layer read flat from its .txt takes its shape there (`shaped`)."""
    path = os.fspath(path)
    root, named = _root_side(path)
    if named is None:
        side = side or ("runtime" if os.path.isdir(os.path.join(root, "runtime")) else "simulator")
        if side not in SIDES:
            raise SourceError(f"{path}: an RKNN snapshot's sides are {', '.join(SIDES)}, not {side!r}")
        named = side
    folder = os.path.join(root, named)
    if not os.path.isdir(folder):
        raise SourceError(f"{folder}: no such folder in this RKNN snapshot (its sides: "
                          f"{', '.join(s for s in SIDES if os.path.isdir(os.path.join(root, s)))})")
    layers = read_map(root)
    errors = read_errors(root)
    problems: list[Problem] = []
    npys = [os.path.join(folder, "npy", os.path.splitext(file)[0] + ".npy") for _, file in layers]
    have = [os.path.isfile(p) for p in npys]
    heads = iter(read_npy_files([p for p, h in zip(npys, have) if h]))
    tensors = []
    for (name, file), npy, held in zip(layers, npys, have):
        op_type, figures = errors.get(name, ("", {}))
        reported = tuple((k, v) for k, v in figures.items() if k in SINGLE) if named == "simulator" else ()
        text = os.path.join(folder, file)
        if held:
            head = next(heads)
            if isinstance(head, Exception):  # kept, unreadable: its row says why
                problems.append(Problem(npy, f"{name}: {head}"))
                tensors.append(Tensor(op=name, io=OUTPUT, index=0, dtype=None, shape=(), source=npy, op_type=op_type,
                                      tensor_name=name, problem=str(head), reported=reported))
                continue
            meta, offset, data = head
            tensors.append(npy_file_tensor(name, npy, meta, offset, data, op_type=op_type, tensor_name=name,
                                           reported=reported))
        elif os.path.isfile(text):
            tensors.append(_text_tensor(name, text, op_type, reported))
        else:
            problems.append(Problem(folder, f"{name}: neither {file} nor npy/{os.path.basename(npy)} here"))
    if model and shapes:
        tensors = shaped(tensors, shapes, model)
    return tensors, problems


def _text_tensor(name: str, path: str, op_type: str, reported: tuple[tuple[str, float], ...]) -> Tensor:
    """A layer from its .txt (one value a line): flat, float32, its length counted by its lines."""
    with open(path, "rb") as fh:
        data = fh.read()
    count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return Tensor(op=name, io=OUTPUT, index=0, dtype=np.dtype(np.float32), shape=(count,), source=path,
                  dtype_name="float32", conversion=FLAT,
                  op_type=op_type, tensor_name=name, reported=reported, reader=partial(_text_values, path, count))


def shaped(tensors: list[Tensor], shapes: Mapping[str, tuple[int, ...]], model: str) -> list[Tensor]:
    """The flat layers (read from .txt) in the shape `shapes` gives their name (a model's tensor shapes), where
    it holds as many values; the others as they are."""
    out = []
    for t in tensors:
        shape = shapes.get(t.op)
        if t.conversion == FLAT and shape is not None and math.prod(shape) == t.size and t.reader is not None:
            t = replace(t, shape=shape, conversion=f"RKNN's .txt, shaped as {os.path.basename(model)} shapes it",
                        reader=partial(_reshaped, t.reader, shape))
        out.append(t)
    return out


def _reshaped(load, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(load()).reshape(shape)


def _text_values(path: str, count: int) -> np.ndarray:
    with open(path, "rb") as fh:
        values = np.array(fh.read().split(), dtype=np.float32)
    if values.size != count:
        raise ValueError(f"{values.size} values where its {count} lines were counted (changed since it was read?)")
    return values


def describe(path: str, tensors: list[Tensor], *, side: str | None = None, model: str | None = None,
             **_options) -> list[str]:
    """Lines for `inspect`: the sides the snapshot holds, how many layers came from npy and from text, and
    how many RKNN's error table reports on."""
    root, named = _root_side(os.fspath(path))
    sides = [s for s in SIDES if os.path.isdir(os.path.join(root, s))]
    flat = sum(1 for t in tensors if t.conversion == FLAT)
    modelled = sum(1 for t in tensors if t.conversion and t.conversion != FLAT)
    reported = sum(1 for t in tensors if t.reported)
    lines = [f"RKNN snapshot {root}: sides {', '.join(sides)}; this side: {named or side or 'simulator'}",
             f"{len(tensors) - flat - modelled} layer(s) from npy/ (shaped), {flat} from .txt (flat)"
             + (f", {modelled} from .txt shaped by {os.path.basename(model or 'the model')}" if modelled else "")]
    if reported:
        lines.append(f"{reported} layer(s) with RKNN's own single-layer cos and euc (error_analysis.txt)")
    if os.path.isfile(os.path.join(root, ERRORS)):
        zero = [line.split()[1] for line in read_user_file(os.path.join(root, ERRORS), "RKNN error analysis",
                                                            TABLE_LIMIT).splitlines()
                if Q_ZERO in line and _ROW.match(line)]
        if zero:
            lines.append(f"{len(zero)} layer(s) RKNN reports as {Q_ZERO} (its int8 values all zero, no figure): "
                         + ", ".join(zero[:3]) + (" ..." if len(zero) > 3 else ""))
    return lines
