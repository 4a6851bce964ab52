"""Sophon tpu-mlir npz files: `model_runner.py --dump_all_tensors` and `model_deploy.py` outputs.

Facts from tpu-mlir's public source and docs (model_runner.py, model_deploy.py, npz_tool.py,
the developer manual):
- one npz per run, one member per tensor, in execution order (the runner fills a dict as ops run);
- ONNX runs key a tensor `{onnx_output}_{OpType}` (e.g. `conv1_Conv`; older releases stored these
  flattened to 1-D: given the `.mlir`, a flat array takes the op's result shape); top/tpu MLIR runs key it by
  the op's MLIR name, its `loc` (the same `{onnx_output}_{OpType}` for ops that came from ONNX);
- bmodel outputs carry a cast suffix for their storage type (`_f32`, `_si8`, `_ui8`, `_f16`, `_bf16`...);
- bfloat16 arrays are stored as uint16 (marked "bfloat16" here and widened to float32 on load);
- model_transform writes `{m}_in_f32.npz` (the preprocessed input) and `{m}_top_outputs.npz`;
  model_deploy writes `{prefix}_tpu_outputs.npz` and `{prefix}_model_outputs.npz`, both compared
  against the top outputs;
- failure dumps (`tdb_err.npz`, `failed_bmodel_outputs.npz`) hold both sides in one file as
  `{name}_actual` / `{name}_desired`.
`load_mlir_locs` reads a `.mlir` text file's loc table (`#locN = loc("name")`, op lines ending in
`loc(#locN)`: sources.mlirtext reads them) into {name: MlirOp}: op type, result types and order, to
name and type the npz entries.
"""
from __future__ import annotations

import math
import os
import re
import zipfile
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from accuscope.engine.sources import kinds
from accuscope.engine.sources.ascend import bf16_to_float32
from accuscope.engine.sources.mlirtext import LocTable, loc_use, tensor_type, tensor_types
from accuscope.engine.sources.npyfile import read_npz
from accuscope.engine.sources.sniffs import TPUMLIR_TOP
from accuscope.engine.sources.tensor import Problem, SourceError, Tensor

KIND = kinds.TPU_MLIR_NPZ
CAST = "tpu.Cast"  # lowering's casts: `{what}_{f16|f32|...}`, beside the ops that kept their names
CAST_SUFFIXES = ("_f32", "_si8", "_ui8", "_f16", "_bf16", "_i8", "_u8", "_si16", "_ui16", "_i16", "_u16",
                 "_si32", "_ui32", "_i32", "_u32", "_f8e4m3", "_f8e5m2", "_i4", "_si4", "_ui4")
DEPLOY_SUFFIXES = {"top": TPUMLIR_TOP, "tpu": "_tpu_outputs.npz", "model": "_model_outputs.npz"}
INPUT_SUFFIX = "_in_f32.npz"
ACTUAL, DESIRED = "_actual", "_desired"
BOTH_SIDES = ("tdb_err.npz", "failed_bmodel_outputs.npz")
# `{output}_{OpType}`: an ONNX op type is CamelCase (Conv, MatMul, Relu, GlobalAveragePool ...)
_OP_TYPE = re.compile(r"^(?P<base>.+)_(?P<type>[A-Z][a-z][A-Za-z0-9]*)$")
# an op lowering made of an ONNX op's: `{output}_{OpType}` and lower-case parts (`x_Softmax__softmax_reshape`,
# a Softmax lowered into a softmax and a reshape)
_LOWERED = re.compile(r"^(?P<op>.+_[A-Z][a-z][A-Za-z0-9]*)(?:_{1,2}[a-z0-9]+)+$")
# one start (match); `%[\w.#:]+` and the `\s*,\s*%` between results share no character
_OP_LINE = re.compile(r'^\s*(?:(%[\w.#:]+(?:\s*,\s*%[\w.#:]+)*)\s*=\s*)?"?([a-z_]+\.[A-Za-z0-9_]+)"?')


# --- names -----------------------------------------------------------------------------------------

def strip_cast(name: str) -> str:
    """`out_Conv_f16` -> `out_Conv`: drop the storage-type suffix a bmodel output carries."""
    for suffix in CAST_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def split_op_type(name: str) -> tuple[str, str]:
    """`conv1_Conv` -> ("conv1", "Conv"); a name without an `_OpType` tail -> (name, "")."""
    m = _OP_TYPE.match(name)
    return (m.group("base"), m.group("type")) if m else (name, "")


def lowered_from(name: str) -> str:
    """`x_Softmax__softmax_reshape` -> `x_Softmax`: the ONNX op's key a lowered op's name is made of; ""
    for a name that is not one (it ends in its own `_OpType`, or has none)."""
    if split_op_type(name)[1]:
        return ""
    m = _LOWERED.match(name)
    return m.group("op") if m else ""


def normalize(name: str, known: set[str] | frozenset[str] = frozenset()) -> str:
    """The ONNX output name behind a tpu-mlir npz key: cast suffix, then `_OpType`, stripped.

    With `known` (the reference's tensor names) the first form found there wins, so a name that
    really ends in `_Conv` is kept when the reference has it.
    """
    candidates = [name, strip_cast(name)]
    candidates.append(split_op_type(candidates[-1])[0])
    for c in candidates:
        if c in known:
            return c
    return candidates[-1]


# --- the .mlir loc table ----------------------------------------------------------------------------

@dataclass
class MlirOp:
    name: str
    type: str = ""           # e.g. "top.Conv", "tpu.Conv2D"
    line: int = 0
    order: int = 0           # position among the ops, i.e. execution order
    output: int = 0          # result index for ops with several named results
    dtype: str = ""          # numpy-style name of the result element type ("bfloat16", "int8" ...)
    shape: tuple[int, ...] | None = None
    problem: str = ""


def load_mlir_locs(path: str) -> dict[str, MlirOp]:
    """{tensor name: MlirOp} from a top/tpu `.mlir` file. An op whose `loc(#locN)` has no
    `#locN = loc(...)` entry is kept under `#locN` with `problem` saying so. SourceError for a file
    that is no such table, or that holds a shape no tensor has."""
    uses: list[tuple[int, str, str, str]] = []  # line, op type, loc ref, result type text
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    table = LocTable(path)
    with fh:
        for number, line in enumerate(fh, 1):
            if table.read(line):
                continue
            op = _OP_LINE.match(line)
            if op and op.group(1) and op.group(2).split(".")[0] in ("top", "tpu"):
                use = loc_use(line)
                if use is not None:
                    uses.append((number, op.group(2), use, line[line.rfind("->") + 2:] if "->" in line else line))
    if not table.defs and not uses:
        raise SourceError(f"{path}: no MLIR ops with loc names (expected a top/tpu .mlir file)")
    out: dict[str, MlirOp] = {}
    for order, (number, op_type, ref, result) in enumerate(uses):
        names = table.names(ref)
        types = tensor_types(result)
        if names is None:
            out.setdefault(ref, MlirOp(ref, op_type, number, order,
                                       problem=f"line {number}: loc {ref} has no '{ref} = loc(...)' entry"))
            continue
        for k, name in enumerate(names):
            try:
                dtype, shape = tensor_type(types[k] if k < len(types) else "")
            except ValueError as exc:
                raise SourceError(f"{path}: line {number}: {exc}") from None
            out.setdefault(name, MlirOp(name, op_type, number, order, k, dtype, shape))
    return out


# --- reading ---------------------------------------------------------------------------------------

def sniff(path: str) -> bool:
    """A tpu-mlir npz, by content (only the zip directory is read): member names as model_transform,
    model_deploy, model_runner and npz_tool write them (`{tensor}_{OpType}`, a bmodel's with a cast
    suffix `_f32`, `_f16`, `_si8` ...; the network inputs by their bare names), or `_actual`/`_desired`
    pairs. Names alone also do for the files model_transform/model_deploy name (`*_top_outputs.npz` ...)."""
    base = os.path.basename(path)
    if not base.endswith(".npz") or not os.path.isfile(path):
        return False
    if base in BOTH_SIDES or base.endswith(tuple(DEPLOY_SUFFIXES.values()) + (INPUT_SUFFIX,)):
        return True
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n[:-4] for n in zf.namelist()[:4096] if n.endswith(".npy")]
    except (OSError, zipfile.BadZipFile):
        return False
    if any(n.endswith(ACTUAL) for n in names) and any(n.endswith(DESIRED) for n in names):
        return True
    return looks_named(names)


def looks_named(names: list[str]) -> bool:
    """Keys named as tpu-mlir names tensors: `{tensor}_{OpType}` (a cast suffix allowed) for all but
    a few (the network inputs keep their own names: at most one in ten, and never all)."""
    typed = sum(1 for n in names if split_op_type(strip_cast(n))[1])
    cast = sum(1 for n in names if strip_cast(n) != n and split_op_type(strip_cast(n))[1])
    return bool(names) and typed >= 1 and (typed >= 0.9 * len(names) or (cast > 0 and typed + 2 >= len(names)))


def read(path: str, *, mlir: str | None = None, bf16: bool | None = None, side: str = "actual",
         **_options) -> tuple[list[Tensor], list[Problem]]:
    """The tensors of one npz in execution order: `op` the npz key (the MLIR op name),
    `tensor_name` the ONNX output name (`normalize`), `op_type` from the key or the `.mlir`.

    `mlir`: the run's `.mlir`, to take op types and bf16-ness from and to order the tensors.
    `bf16`: True = every uint16 array is bfloat16; None (default) = those named `_bf16` or typed
    bf16 in the `.mlir`. `side`: "actual" or "desired" for files holding both sides.
    """
    path = os.fspath(path)
    entries, problems = read_npz(path)
    keys = [t.op for t in entries]
    if any(k.endswith(ACTUAL) or k.endswith(DESIRED) for k in keys):
        actual, desired, problems = read_actual_desired(path, mlir=mlir, bf16=bf16)
        if side not in ("actual", "desired"):
            raise SourceError(f"{path}: side must be actual or desired, not {side!r}")
        return (actual if side == "actual" else desired), problems
    return _named(path, entries, problems, mlir, bf16)


def _named(path: str, entries: list[Tensor], problems: list[Problem], mlir: str | None,
           bf16: bool | None) -> tuple[list[Tensor], list[Problem]]:
    locs: dict[str, MlirOp] = {}
    if mlir:
        locs = load_mlir_locs(mlir)
        problems = problems + [Problem(mlir, op.problem) for op in locs.values() if op.problem]
    out = []
    keys = {t.op for t in entries}
    computed = any(strip_cast(k) == k and split_op_type(k)[1] for k in keys)  # ops that kept their names
    # a bmodel's outputs (no op kept its name: each key is a network output) are the results of the ONNX ops
    # they were lowered from (`x_Softmax__softmax_reshape_f32`: a Softmax lowered into a softmax and a
    # reshape); in a run of every op such a name is a step of the lowering, not the ONNX op's result
    lowered = {} if computed else {t.op: op for t in entries if (op := lowered_from(strip_cast(t.op)))}
    for t in entries:
        key = t.op
        base, op_type = split_op_type(lowered.get(key) or strip_cast(key))
        loc = locs.get(key) or locs.get(strip_cast(key))
        if strip_cast(key) != key:
            if computed and (loc is None or loc.type == CAST):
                # lowering's Cast beside ops that kept their names: `{what}_{f16|f32|...}`, stands for
                # no ONNX tensor (what it casts has its own key)
                loc, base = replace(loc) if loc else MlirOp(key, CAST), ""
                loc.type = CAST
            elif loc is not None and loc.type == CAST:  # a bmodel's outputs in their storage type
                loc = locs.get(strip_cast(key))
        if loc and loc.type:
            op_type = loc.type
        elif mlir and not t.problem:
            problems.append(Problem(path, f"{key}: no op of that name in {os.path.basename(mlir)}'s loc table"))
        is_bf16 = (t.dtype is not None and t.dtype == np.uint16
                   and (bf16 or (bf16 is None and (key.endswith("_bf16") or (loc is not None and loc.dtype == "bfloat16")))))
        t = replace(t, tensor_name=base, op_type=op_type)
        if loc and loc.shape and t.shape != loc.shape and not t.problem and t.size == math.prod(loc.shape):
            t = replace(t, shape=loc.shape, reader=partial(_reshaped, t.reader, loc.shape))
        if is_bf16:
            t = replace(t, dtype=np.dtype(np.float32), dtype_name="bfloat16", conversion="bfloat16 stored as uint16",
                        reader=partial(_widen, t.reader))
        out.append(t)
    if locs:
        order = {name: (op.order, op.output) for name, op in locs.items()}
        late = (len(order), 0)
        out.sort(key=lambda t: order.get(t.op, order.get(strip_cast(t.op), late)))  # stable: unknown keep npz order
    return out, problems


def _reshaped(load, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(load()).reshape(shape)


def _widen(load) -> np.ndarray:
    return bf16_to_float32(np.asarray(load()))


def read_actual_desired(path: str, *, mlir: str | None = None, bf16: bool | None = None
                        ) -> tuple[list[Tensor], list[Tensor], list[Problem]]:
    """Both sides of a `{name}_actual` / `{name}_desired` npz (tdb_err.npz, failed_bmodel_outputs.npz),
    each side's tensors named by `{name}` in file order; a name on one side only is a problem."""
    path = os.fspath(path)
    entries, problems = read_npz(path)
    sides: dict[str, dict[str, Tensor]] = {ACTUAL: {}, DESIRED: {}}
    for t in entries:
        suffix = ACTUAL if t.op.endswith(ACTUAL) else DESIRED if t.op.endswith(DESIRED) else ""
        if not suffix:
            problems.append(Problem(path, f"{t.op}: neither {{name}}_actual nor {{name}}_desired, skipped"))
            continue
        name = t.op[: -len(suffix)]
        sides[suffix][name] = replace(t, op=name, tensor_name=name)
    if not sides[DESIRED]:
        raise SourceError(f"{path}: holds only _actual arrays ({len(sides[ACTUAL])}), no _desired reference "
                          "to compare them with")
    if not sides[ACTUAL]:
        raise SourceError(f"{path}: holds only _desired arrays ({len(sides[DESIRED])}), no _actual values")
    for a, b in ((ACTUAL, DESIRED), (DESIRED, ACTUAL)):
        for name in sides[a]:
            if name not in sides[b]:
                problems.append(Problem(path, f"{name}: has {name}{a} but no {name}{b}"))
    actual, problems = _named(path, list(sides[ACTUAL].values()), problems, mlir, bf16)
    desired, problems = _named(path, list(sides[DESIRED].values()), problems, None, bf16)
    return actual, desired, problems


# --- model_deploy folders --------------------------------------------------------------------------

@dataclass
class DeployPair:
    """A comparison model_deploy itself makes: `target` against `reference` (the top outputs)."""

    reference: str
    target: str
    label: str              # "tpu" (tpu MLIR) or "model" (the bmodel)
    input: str = ""         # `{m}_in_f32.npz`, the preprocessed input, when present


def find_deploy_files(folder: str) -> list[DeployPair]:
    """Pairings to offer in a model_transform/model_deploy work folder: every
    `{prefix}_tpu_outputs.npz` and `{prefix}_model_outputs.npz` against the `{m}_top_outputs.npz`
    whose model name `{m}` is the longest prefix of `{prefix}` (reference = top)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise SourceError(f"{folder}: cannot list ({exc.strerror or exc})") from exc
    tops = {n[: -len(DEPLOY_SUFFIXES["top"])]: n for n in names if n.endswith(DEPLOY_SUFFIXES["top"])}
    inputs = {n[: -len(INPUT_SUFFIX)]: n for n in names if n.endswith(INPUT_SUFFIX)}
    pairs = []
    for label in ("tpu", "model"):
        suffix = DEPLOY_SUFFIXES[label]
        for n in names:
            if not n.endswith(suffix):
                continue
            prefix = n[: -len(suffix)]
            models = [m for m in tops if prefix == m or prefix.startswith(m + "_")] or (list(tops) if len(tops) == 1 else [])
            if not models:
                continue
            m = max(models, key=len)
            pairs.append(DeployPair(os.path.join(folder, tops[m]), os.path.join(folder, n), label,
                                    os.path.join(folder, inputs[m]) if m in inputs else ""))
    return pairs


def work_stages(folder: str) -> list[tuple[str, str]]:
    """A model_transform/model_deploy work folder as the stages of a chain (compare/chain.py), in
    pipeline order: `top` (`{m}_top_outputs.npz`), `tpu` and `bmodel` (one deployment's
    `{prefix}_tpu_outputs.npz` and `{prefix}_model_outputs.npz`, those present); [] when the folder holds
    none of them. SourceError when it holds several deployments (they are not one pipeline: each names
    its own chain) or several models."""
    pairs = find_deploy_files(folder)
    tops = sorted({p.reference for p in pairs}) or sorted(
        os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(DEPLOY_SUFFIXES["top"]))
    if not tops:
        return []
    if len(tops) > 1:
        raise SourceError(f"{folder}: a tpu-mlir work folder of {len(tops)} models "
                          f"({', '.join(os.path.basename(t) for t in tops)}): give each stage as --npu LABEL=FILE")
    prefixes = sorted({os.path.basename(p.target)[: -len(DEPLOY_SUFFIXES[p.label])] for p in pairs})
    if len(prefixes) > 1:
        one = os.path.join(folder, prefixes[0])
        raise SourceError(f"{folder}: a tpu-mlir work folder of {len(prefixes)} deployments ({', '.join(prefixes)}), "
                          f"each a chain of its own: name one's stages, e.g. --npu top={tops[0]} "
                          f"--npu tpu={one}{DEPLOY_SUFFIXES['tpu']} --npu bmodel={one}{DEPLOY_SUFFIXES['model']}")
    found = [("top", tops[0])]
    for label, stage in (("tpu", "tpu"), ("model", "bmodel")):
        found += [(stage, p.target) for p in pairs if p.label == label]
    return found


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    """Lines for `inspect`: bf16 and cast-suffixed tensors, and the model_deploy comparisons on offer
    in the file's folder."""
    lines = []
    bf16 = sum(1 for t in tensors if t.dtype_name == "bfloat16")
    cast = sum(1 for t in tensors if strip_cast(t.op) != t.op)
    if bf16 or cast:
        lines.append(f"{bf16} bfloat16 tensor(s) stored as uint16 · {cast} name(s) with a cast suffix")
    folder = os.path.dirname(os.path.abspath(path))
    for pair in find_deploy_files(folder):
        if os.path.abspath(path) in (pair.reference, pair.target):
            lines.append(f"model_deploy pair: {os.path.basename(pair.target)} ({pair.label}) against "
                         f"{os.path.basename(pair.reference)}")
    return lines


OUTPUT_CAST = "_f32"  # tpu-mlir's name for an output cast to float32: {output}_f32


def network_outputs(names: list[str]) -> set[str]:
    """The network outputs of a tpu-mlir npz (its ops' names in execution order): the last op, and where
    tpu-mlir ends the network with output casts (`{output}_f32`: model_deploy casts each output to
    float32 unless --quant_output) the outputs those trailing casts cast, in their place: a cast has no
    counterpart in the top or ONNX outputs (it is the conversion's own op), the output it casts has."""
    if not names:
        return set()
    known, found = set(names), {names[-1]}
    for name in reversed(names):
        base = name[:-len(OUTPUT_CAST)] if name.endswith(OUTPUT_CAST) else ""
        if not base or base not in known:
            break
        found.discard(name)
        found.add(base)
    return found
