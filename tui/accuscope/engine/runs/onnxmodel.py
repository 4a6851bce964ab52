"""An ONNX model as the runs take it: onnx and onnxruntime needed (`onnx_modules`, `onnx_module`:
an optional extra, imported when called), a model file loaded and checked (`load_model`), its node names as the
graph loader gives them (`node_names`, so a dump, a re-run and the graph agree), and its inputs
checked against the model or made up (`prepare_inputs`, `make_random_inputs`; `feeds_for`: the same
for another runtime's model, given its inputs)."""
from __future__ import annotations

import math
import os

import numpy as np

from accuscope.engine.graphs.graph import unique_names
from accuscope.engine.graphs.onnxgraph import need
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.layout import channel_move, fits
from accuscope.engine.sources.tensor import SourceError

RANDOM_INT_HIGH = 8      # random integer inputs lie in [0, RANDOM_INT_HIGH): small enough for indices


def onnx_module(purpose: str = "running a model"):
    """onnx itself (the optional extra), else a SourceError naming `purpose` and the pip extra."""
    return need("onnx", purpose)


def onnx_modules(purpose: str = "running a model"):
    """(onnx, onnxruntime), else a SourceError naming `purpose` and the pip extra."""
    return onnx_module(purpose), need("onnxruntime", purpose)


def is_constant(node) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx")


def node_names(nodes) -> list[str]:
    """Node names as accuscope's ONNX graph loader gives them, so a dump and the graph agree.

    Non-Constant nodes are named exactly as `onnxgraph.load_onnx` names them (unnamed ones become
    `{op_type}_{position in the file}`, clashes get `_{k}`). Constant nodes, weights to the loader,
    get the same kind of name after all others (used only with include_constants).
    """
    nodes = list(nodes)
    kept = [(i, n) for i, n in enumerate(nodes) if not is_constant(n)]
    names = dict(zip((i for i, _ in kept), unique_names((n.name for _, n in kept),
                                                          (f"{n.op_type}_{i}" for i, n in kept))))
    taken = set(names.values())
    for i, n in enumerate(nodes):
        if i not in names:
            base = n.name or f"{n.op_type}_{i}"
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            taken.add(name)
            names[i] = name
    return [names[i] for i in range(len(nodes))]


def load_model(model_path):
    onnx, _ = onnx_modules()
    path = user_path(model_path, "model file")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # protobuf raises several kinds on garbage  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
        raise SourceError(f"{path}: not an ONNX model ({exc})") from None
    if not model.graph.node and not model.graph.output:
        raise SourceError(f"{path}: not an ONNX model (no graph)")
    return model


def _input_specs(model, path) -> list[tuple[str, np.dtype, list | None]]:
    """(name, dtype, dims) of the real inputs; dims hold ints (fixed) or str/None (dynamic)."""
    onnx, _ = onnx_modules()
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if vi.type.WhichOneof("value") != "tensor_type":
            raise SourceError(f"{path}: input '{vi.name}' is not a tensor; only tensor inputs are supported")
        tt = vi.type.tensor_type
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except Exception:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            raise SourceError(f"{path}: input '{vi.name}' has an element type numpy cannot hold "
                              f"({tt.elem_type})") from None
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None)
                    for d in tt.shape.dim]
        specs.append((vi.name, dtype, dims))
    return specs


def _fmt(dims) -> str:
    if dims is None:
        return "(rank unknown)"
    return "(" + ", ".join(str(d) if d is not None else "?" for d in dims) + ")"


def _random(dtype: np.dtype, dims, seed: int, position: int, sizes: dict[str, int], name: str, path: str):
    if dims is None:
        raise SourceError(f"{path}: input '{name}' has no declared rank; give its data as NAME=FILE.npy")
    shape = tuple(d if isinstance(d, int) else sizes[d] if d in sizes else 1 if axis == 0 else 64
                  for axis, d in enumerate(dims))
    # One generator per input position: an input's values do not depend on which others were given.
    rng = np.random.default_rng([seed, position])
    try:
        if dtype.kind == "b":
            return rng.random(shape) < 0.5
        if dtype.kind in "iu":
            return rng.integers(0, RANDOM_INT_HIGH, shape).astype(dtype)
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    except TypeError:
        raise SourceError(f"{path}: cannot make random data for input '{name}' of dtype {dtype}") from None
    except (ValueError, MemoryError):  # numpy's "Maximum allowed size exceeded", or no memory for it
        raise SourceError(f"{path}: input '{name}' of shape {_fmt(shape)} is too large for random data "
                          f"({math.prod(shape) * dtype.itemsize:,} bytes); give its data as NAME=FILE.npy") from None


def prepare_inputs(model, path, given, random_inputs, seed, dims, counterpart=None, like=None):
    """Check user inputs against the model, fill missing ones with random data; name -> (array, origin)."""
    return feeds_for(_input_specs(model, path), path, given, random_inputs, seed, dims, counterpart, like)


def feeds_for(specs: list[tuple[str, np.dtype, list | None]], path, given, random_inputs, seed, dims,
              counterpart: dict[str, tuple[np.ndarray, str]] | None = None,
              like: list[tuple[str, list | None]] | None = None):
    """`prepare_inputs` for any runtime's model: its inputs' (name, dtype, dims: ints where fixed,
    str or None where dynamic), in the model's order (an input's random values depend on its place).
    A given 4-D array whose channels moved first or last fits the input (a file in NHWC for a model in
    NCHW, or the other way) is fed so moved. `counterpart`: the feeds of the model this one is compared
    with (`run`), fed here instead of `given` and random data (`counterpart_feeds`). `like`: that model's
    inputs' (name, dims): a random input's dynamic dims take the sizes of its counterpart's fixed ones,
    in this model's layout (`_sized_like`), so that both can be fed the same data."""
    if counterpart is not None:
        return counterpart_feeds(specs, path, counterpart)
    known = {s[0] for s in specs}
    unknown = sorted(set(given or {}) - known)
    if unknown:
        raise SourceError(f"{path}: the model has no input named {', '.join(map(repr, unknown))} "
                          f"(inputs: {', '.join(sorted(known)) or 'none'})")
    feeds = {}
    missing = []
    for position, (name, dtype, shape) in enumerate(specs):
        if given and name in given:
            arr, moved = _in_layout(np.asarray(given[name]), shape)
            if shape is not None and (arr.ndim != len(shape) or any(
                    isinstance(d, int) and d != n for d, n in zip(shape, arr.shape))):
                raise SourceError(f"{path}: input '{name}' has shape {tuple(arr.shape)} but the model "
                                  f"expects {_fmt(shape)}")
            arr, cast = _cast(arr, dtype, name, path)
            feeds[name] = (arr, f"given{cast}{moved}")
        elif random_inputs:
            shape = _sized_like(name, position, shape, like)
            feeds[name] = (_random(dtype, shape, seed, position, dims or {}, name, path), "random")
        else:
            missing.append(f"{name} {_fmt(shape)} {dtype}")
    if missing:
        raise SourceError(f"{path}: missing model inputs: {'; '.join(missing)} "
                          "(give each with --input NAME=FILE.npy, or generate them with --random-inputs)")
    return feeds


def _in_layout(arr: np.ndarray, dims) -> tuple[np.ndarray, str]:
    """`arr` moved into the layout of an input declared `dims` where it is in the other one
    (layout.channel_move), and what was done (", NHWC->NCHW"; "" where nothing was moved)."""
    move = channel_move(tuple(arr.shape), dims)
    if move is None:
        return arr, ""
    return arr.transpose(move[0]), f", {move[1]}"


def _sized_like(name: str, position: int, dims, like: list[tuple[str, list | None]] | None):
    """`dims` with the sizes of the counterpart's input (same name, else same place) where it has dynamic
    ones and the counterpart's are fixed and fit them, as they are or in the other layout."""
    if dims is None or not like or all(isinstance(d, int) for d in dims):
        return dims
    named = dict(like)
    theirs = named[name] if name in named else like[position][1] if len(like) > position else None
    if theirs is None or not all(isinstance(d, int) for d in theirs):
        return dims
    shape = tuple(theirs)
    if fits(shape, dims):
        return list(shape)
    move = channel_move(shape, dims)
    return dims if move is None else [shape[k] for k in move[0]]


def input_dims(path) -> list[tuple[str, list | None]]:
    """An ONNX model's inputs' (name, dims), as feeds_for's `like` takes them."""
    return [(name, dims) for name, _, dims in _input_specs(load_model(path), os.fspath(path))]


def _cast(arr: np.ndarray, dtype: np.dtype, name: str, path) -> tuple[np.ndarray, str]:
    """`arr` as a contiguous array of the input's `dtype`, and what an origin says of the cast
    (" as float64, cast to float32"; "" where none); SourceError where it cannot become one."""
    cast = "" if arr.dtype == np.dtype(dtype) else f" as {arr.dtype}, cast to {np.dtype(dtype)}"
    try:
        return np.ascontiguousarray(arr, dtype=dtype), cast
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{path}: input '{name}' of dtype {arr.dtype} cannot become {dtype}: {exc}") from None


def counterpart_feeds(specs: list[tuple[str, np.dtype, list | None]], path,
                      counterpart: dict[str, tuple[np.ndarray, str]]) -> dict[str, tuple[np.ndarray, str]]:
    """This model fed what its counterpart (`run`'s reference) was fed: each input paired with the
    counterpart's of the same name, or, where the names differ (onnx2tf renames `x` to
    `serving_default_x:0`), with the one at its place; moved into this model's layout where its shape
    is the counterpart's with the channels moved (NCHW <-> NHWC). Origins say so ("random, the
    reference's 'x', NCHW->NHWC"). SourceError naming both shapes where one is no such permutation."""
    theirs = list(counterpart)
    by_name = all(name in counterpart for name, _, _ in specs)
    if not by_name and len(theirs) != len(specs):
        raise SourceError(f"{path}: its inputs ({', '.join(s[0] for s in specs) or 'none'}) are not the "
                          f"reference's ({', '.join(theirs) or 'none'}) by name nor by number; run each "
                          "with `accuscope dump` and compare the dumps")
    feeds = {}
    for position, (name, dtype, dims) in enumerate(specs):
        other = name if by_name else theirs[position]
        arr, origin = counterpart[other]
        moved_arr, moved = _in_layout(arr, dims)
        if dims is not None and all(isinstance(d, int) for d in dims) and moved_arr.shape != tuple(dims) and \
                [n for n in moved_arr.shape if n != 1] == [d for d in dims if d != 1]:
            moved_arr = moved_arr.reshape(dims)  # only axes of one added or dropped (a scalar fed as (1,))
        if dims is not None and (moved_arr.ndim != len(dims) or any(
                isinstance(d, int) and d != n for d, n in zip(dims, moved_arr.shape))):
            raise SourceError(f"{path}: input '{name}' expects {_fmt(dims)}, the reference's '{other}' was fed "
                              f"{_fmt(arr.shape)}: not the same shape nor one in the other layout (NCHW <-> NHWC)")
        moved_arr, cast = _cast(moved_arr, dtype, name, path)
        kind = origin.split(",")[0].split(" as ")[0]  # random, given
        whose = "" if other == name else f", the reference's '{other}'"
        feeds[name] = (moved_arr, f"{kind}{cast}{whose}{moved}")
    return feeds


def make_random_inputs(model_path, seed: int = 0, dims: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Deterministic random data for every model input (dynamic dims: `dims[dim_param]`, else 1 for
    the first axis and 64 for the others: a multiple of 32, as OCR-style models need)."""
    feeds = prepare_inputs(load_model(model_path), os.fspath(model_path), None, True, seed, dims)
    return {k: v[0] for k, v in feeds.items()}
