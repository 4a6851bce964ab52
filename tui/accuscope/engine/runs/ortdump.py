"""Golden dump with ONNX Runtime: every node output of an ONNX model, as a MindStudio npy folder.

ONNX Runtime only returns graph outputs, so the node outputs are added to the graph outputs, by
name only: declared types are often stale in converted models (an fp16 conversion leaving fp32
`value_info` behind) and onnxruntime refuses a model whose declared types disagree with what it
infers, so every `value_info` entry and every output type is dropped before the session is made.
Outputs are fetched in batches that fit a memory budget, one session per batch, so a big model
never holds all its activations at once. onnx and onnxruntime are an optional extra: they are
imported inside the functions.

An `If` whose condition these inputs decide is expanded first (`controlflow`: a run fetching the
conditions, round by round for nested ones), so the ops of the branch it takes are dumped like any
other; the dump's model.onnx is then the expanded model, which the graph, the pairing and the
advisor's re-runs read. Loop and Scan bodies stay: their tensors are listed as skipped.
"""
from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.runs.controlflow import Expansion, expand_ifs, has_control_flow
from accuscope.engine.runs.onnxmodel import (
    is_constant,
    load_model,
    node_names,
    onnx_modules,
    prepare_inputs,
)
from accuscope.engine.sources.outputfile import atomic_file, atomic_path
from accuscope.engine.sources.tensor import SourceError, dump_form, sanitize, windows_safe

OPTIMIZATION = {"off": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
LONG_NAME = 200          # file names longer than this (bytes) go under a numeric name + mapping.csv
DEFAULT_GUESS = 16 << 20  # size assumed for a tensor whose shape inference gives no size


@dataclass
class DumpReport:
    """What a dump wrote and what it could not, with why (also recorded in dump.json)."""

    out_dir: str
    written: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    inputs: dict[str, tuple] = field(default_factory=dict)
    casts: dict[str, str] = field(default_factory=dict)  # input name -> "given as float64, cast to float32"
    fed: dict[str, tuple[np.ndarray, str]] = field(default_factory=dict)  # input name -> (array as fed, origin)
    seconds: float = 0.0


@dataclass(frozen=True)
class _Target:
    node: str
    index: int
    tensor: str
    nbytes: int


def _conditions(runner: _Runner) -> Callable[[list[str]], dict[str, np.ndarray]]:
    """The values of some main-graph tensors for these inputs (expand_ifs's `values`), by a run of
    the model as it stands; the model's outputs are put back after."""
    def values(names: list[str]) -> dict[str, np.ndarray]:
        saved = [type(o)() for o in runner.model.graph.output]
        for copy, o in zip(saved, runner.model.graph.output):
            copy.CopyFrom(o)
        try:
            return dict(zip(names, runner._run(names)))
        finally:
            del runner.model.graph.output[:]
            runner.model.graph.output.extend(saved)
    return values


def _subgraph_tensors(node):
    """Every node output inside the bodies (If/Loop/Scan, nested) of a node."""
    onnx, _ = onnx_modules()
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else (
            list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else [])
        for g in graphs:
            for inner in g.node:
                yield from (t for t in inner.output if t)
                yield from _subgraph_tensors(inner)


def _estimate_sizes(model, feeds) -> dict[str, int]:
    """Byte sizes from onnx shape inference run with the actual input shapes (best effort)."""
    onnx, _ = onnx_modules()
    saved = [type(vi)() for vi in model.graph.input]
    for copy, vi in zip(saved, model.graph.input):
        copy.CopyFrom(vi)
        if vi.name in feeds and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            shape.ClearField("dim")
            for n in feeds[vi.name][0].shape:
                shape.dim.add().dim_value = n
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
        return {}
    finally:
        del model.graph.input[:]
        model.graph.input.extend(saved)
    sizes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not tt.elem_type or not tt.HasField("shape") or None in dims:
            continue
        known: list[int] = [d for d in dims if d is not None]
        try:
            itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).itemsize
        except Exception:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            continue
        sizes[vi.name] = itemsize * math.prod(known)
    return sizes


def default_budget() -> int:
    """Bytes of outputs fetched per onnxruntime run: a quarter of the memory available, 1 to 4 GiB.
    Each batch runs the whole model again, so fewer batches are faster (PP-OCRv4 det at 640x640
    holds 1.6 GB of outputs: one run instead of two)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            avail = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 1 << 30
    return int(min(4 << 30, max(1 << 30, avail // 4)))


def _batches(targets: list[_Target], budget: int) -> list[list[_Target]]:
    out: list[list[_Target]] = []
    total = budget + 1
    for t in targets:
        if total + t.nbytes > budget or not out:
            out.append([])
            total = 0
        out[-1].append(t)
        total += t.nbytes
    return out


class Writes:
    """npy files written on one background thread, in order, while the caller goes on (onnxruntime's
    next run, the next model): np.save releases the GIL while it writes. Arrays wait in a queue of at
    most `limit` bytes (save() blocks beyond it, so memory stays bounded); finish() waits for every
    file and raises the first error, a SourceError naming the file; abandon() drops what is queued."""

    def __init__(self, limit: int | None = None) -> None:
        import queue
        import threading
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._room = threading.Condition()
        self._pending, self._limit = 0, limit or default_budget()
        self._error: SourceError | None = None
        self._dropped = False
        self._thread = threading.Thread(target=self._work, name="accuscope-npy-writes", daemon=True)
        self._thread.start()

    def save(self, path: str, arr: np.ndarray, done: Callable[[], None] | None = None) -> None:
        if self._error is not None:
            raise self._error
        with self._room:
            while self._pending and self._pending + arr.nbytes > self._limit and self._error is None:
                self._room.wait()
            self._pending += arr.nbytes
        self._queue.put((path, arr, done))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            path, arr, done = item
            try:
                if self._error is None and not self._dropped:
                    with atomic_file(path, "wb") as fh:
                        np.save(fh, arr, allow_pickle=False)
                    if done is not None:
                        done()
            except OSError as exc:
                self._error = SourceError(f"{path}: cannot write ({exc.strerror or exc}; is the disk full?)"
                                          if exc.errno is None else f"{path}: cannot write ({exc.strerror})")
            except Exception as exc:  # noqa: BLE001 - never a thread that dies silently with files unwritten
                self._error = SourceError(f"{path}: cannot write ({type(exc).__name__}: {exc})")
            finally:
                with self._room:
                    self._pending -= arr.nbytes
                    self._room.notify_all()
                del item, arr

    def finish(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error

    def abandon(self) -> None:
        """Write nothing more (an interrupted or failed dump), and wait for the file being written."""
        self._dropped = True
        try:
            self.finish()
        except SourceError:
            pass


class _Runner:
    """Runs the model with a chosen set of graph outputs; splits a failing batch to isolate the
    tensors onnxruntime cannot fetch, and turns a model-wide failure into a SourceError."""

    def __init__(self, model, path, feeds, optimization):
        _, ort = onnx_modules()
        self.ort, self.model, self.path = ort, model, path
        self.feeds = {k: v[0] for k, v in feeds.items()}
        self.original_outputs = [o.name for o in model.graph.output]
        self.options = ort.SessionOptions()
        self.options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION[optimization])
        self.options.log_severity_level = 3
        if any(i.data_location == 1 for i in model.graph.initializer):  # EXTERNAL
            self.options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                                  os.path.dirname(os.path.abspath(path)))
        self.model_checked = False

    def _run(self, names: list[str]) -> list:
        onnx = onnx_modules()[0]
        del self.model.graph.output[:]
        self.model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
        session = self.ort.InferenceSession(self.model.SerializeToString(), self.options,
                                            providers=["CPUExecutionProvider"])
        return session.run(None, self.feeds)

    def _check_model(self) -> None:
        """A batch failed: if the model alone fails too, the model (or the inputs) is at fault."""
        if self.model_checked:
            return
        try:
            self._run(self.original_outputs)
        except Exception as exc:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            raise SourceError(f"{self.path}: onnxruntime cannot run the model: {exc}") from None
        self.model_checked = True

    def fetch(self, batch: list[_Target], skipped: list):
        """Yield (target, array) for each tensor of the batch that onnxruntime returns."""
        try:
            arrays = self._run([t.tensor for t in batch])
        except Exception as exc:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            self._check_model()
            if len(batch) == 1:
                skipped.append((batch[0].tensor, f"onnxruntime could not fetch it: {exc}"))
                return
            half = len(batch) // 2
            yield from self.fetch(batch[:half], skipped)
            yield from self.fetch(batch[half:], skipped)
            return
        self.model_checked = True
        arrays.reverse()
        for t in batch:
            arr = arrays.pop()  # the caller's reference is then the only one: dropped once written
            if isinstance(arr, np.ndarray):
                yield t, arr
            else:
                skipped.append((t.tensor, f"not a tensor ({type(arr).__name__}): only tensors are dumped"))


def dump_onnx(model_path, out_dir, inputs: dict[str, np.ndarray] | None = None, *, random_inputs=False,
              seed=0, optimization="off", include_constants=False, timestamp: int | None = None,
              memory_budget: int | None = None, progress: OnProgress | None = None,
              dims: dict[str, int] | None = None, expand_if: bool = True, files: Writes | None = None,
              counterpart: dict[str, tuple[np.ndarray, str]] | None = None,
                like: list[tuple[str, list | None]] | None = None) -> DumpReport:
    """Run the model with onnxruntime and write every node output as `{node}.{index}.{ts}.npy`.

    Network inputs are written as `{input}.0.{ts}.npy` (output 0 of the input's Data op). The folder
    also gets `model.onnx` (a copy, so it carries its graph) and `dump.json` (what was run, how).
    Optimization is off by default so that the node names of the file are the ones executed.
    `expand_if`: inline the branch each `If` takes for these inputs (module doc); model.onnx is
    then the expanded model and dump.json's `control_flow` says which branches were taken.
    `progress` counts the tensors written of those to write. The files are written on a background
    thread (Writes) while onnxruntime runs the next batch; `files`: the caller's Writes, shared with
    its next dump, which it finish()es before reading the folder (else they are all written on return).
    `counterpart`: the feeds (DumpReport.fed) of the model this one is compared with, fed instead of
    `inputs` and random data, paired and moved into this model's layout (onnxmodel.counterpart_feeds);
    `like`: its inputs' (name, dims), which size this model's dynamic random inputs (onnxmodel.feeds_for).
    """
    start = time.perf_counter()
    if optimization not in OPTIMIZATION:
        raise SourceError(f"unknown optimization level {optimization!r} (choose {', '.join(OPTIMIZATION)})")
    onnx, ort = onnx_modules()
    path = os.fspath(model_path)
    model = load_model(path)
    feeds = prepare_inputs(model, path, inputs, random_inputs, seed, dims, counterpart, like)
    out = new_dump_folder(out_dir)
    ts = int(time.time() * 1e6) if timestamp is None else int(timestamp)
    report = DumpReport(out, inputs={k: tuple(v[0].shape) for k, v in feeds.items()},
                        casts={k: o for k, (_, o) in feeds.items() if o.startswith("given as")}, fed=feeds)

    # Declared types may be stale (see module doc): onnxruntime infers them all again.
    graph = model.graph
    declared = [type(o)() for o in graph.output]
    for copy, o in zip(declared, graph.output):
        copy.CopyFrom(o)
    graph.ClearField("value_info")
    for o in graph.output:
        o.ClearField("type")
    expansion = Expansion()
    if expand_if and has_control_flow(graph):
        expansion = expand_ifs(model, _conditions(_Runner(model, path, feeds, optimization)))
    sizes = _estimate_sizes(model, feeds)
    guess = max(sizes.values(), default=DEFAULT_GUESS)

    targets = []
    for node, name in zip(graph.node, node_names(graph.node)):
        constant = is_constant(node)
        for i, tensor in enumerate(node.output):
            if not tensor:
                continue
            if constant and not include_constants:
                report.skipped.append((tensor, "Constant output (weights): dumped only with include_constants"))
                continue
            targets.append(_Target(name, i, tensor, sizes.get(tensor, guess)))
        why = expansion.kept.get(name)
        for tensor in _subgraph_tensors(node):
            report.skipped.append((tensor, f"inside the body of {node.op_type} node '{name}': "
                                           "onnxruntime cannot fetch tensors of subgraphs"
                                           + (f" ({why})" if why else "")))

    total = len(feeds) + len(targets)
    runner = _Runner(model, path, feeds, optimization)
    batches = _batches(targets, memory_budget or default_budget())
    with DumpFolder(out, ts, [*feeds, *(t.node for t in targets)], report, files, progress, total) as folder:
        for name, (arr, _) in feeds.items():
            folder.write(name, 0, name, arr)
        for batch in batches:
            for t, arr in runner.fetch(batch, report.skipped):
                folder.write(t.node, t.index, t.tensor, arr)
                del arr
        _model_copy(out, path, model, declared, expansion, report, made=folder.made)
        folder.finish({
            "model": os.path.abspath(path),
            "model_copy": "model.onnx",
            "external_data_not_copied": any(i.data_location == 1 for i in graph.initializer),
            **fed(feeds, seed),
            "optimization": optimization,
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "timestamp": ts,
            "batches": len(batches),
            "control_flow": expansion.to_dict(),
        })
    report.seconds = time.perf_counter() - start
    return report


def fed(feeds: dict[str, tuple[np.ndarray, str]], seed: int | None) -> dict:
    """dump.json's record of what a run was fed (every runtime's dump): each input's shape, dtype and
    origin (given, random ...), and the seed when one was drawn."""
    return {"inputs": {k: {"shape": list(a.shape), "dtype": str(a.dtype), "origin": origin}
                       for k, (a, origin) in feeds.items()},
            "seed": seed if any(o.startswith("random") for _, o in feeds.values()) else None}


def new_dump_folder(out_dir) -> str:
    """The folder a dump writes into, made if needed: refused (SourceError) where it holds npy files."""
    out = os.fspath(out_dir)
    if os.path.isdir(out) and any(f.endswith(".npy") for f in os.listdir(out)):
        raise SourceError(f"{out}: already holds npy files; dump into an empty folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{out}: cannot create the folder ({exc.strerror})") from None
    return out


class DumpFolder:
    """The files of one dump, whatever ran the model: each tensor as `{op}.{index}.{ts}.npy` (op
    names sanitized; a long name, or one whose file-name form another op's name has too, under a
    numeric name restored by mapping.csv; one Windows refuses, `x:0`, under its safe form restored the
    same way), written on `files` (a Writes; one of its own, finished here, when None), then the companions (the model that ran, its runtime's to write, named in `made`;
    `finish`: mapping.csv and dump.json). A context manager: whatever stops the dump before the block ends
    `discard`s it, leaving no half dump behind (a retry into the same folder would be refused), and goes on.
    `ops`: every op name the dump will write, so that clashing file-name forms are known up front;
    `progress` counts the files landed of `total`."""

    def __init__(self, out: str, ts: int, ops: list[str], report: DumpReport, files: Writes | None,
                 progress: OnProgress | None, total: int) -> None:
        self.out, self.ts, self.report, self.progress, self.total = out, ts, report, progress, total
        self.own_writes = files is None
        self.writes = files or Writes()
        self.used: set[str] = set()
        self.mapping: list[tuple[str, str]] = []
        self.made: list[str] = []  # mapping.csv, the model, dump.json as this dump writes them
        self.landed_count = 0
        # op names whose file-name form is another op's too (PP-OCRv6 rec: `Mul.21` and `Mul_21`): those
        # not already in that form keep their own name, in mapping.csv, so each file names its op
        forms: dict[str, set[str]] = {}
        for op in ops:
            forms.setdefault(sanitize(op), set()).add(op)
        self.own_name = {op for clean, names in forms.items() if len(names) > 1 for op in names if op != clean}

    def __enter__(self) -> DumpFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        if kind is not None:  # an error, a cancel, ^C: the dump's files go, the exception goes on
            self.discard()

    def write(self, op: str, index: int, tensor: str, arr: np.ndarray) -> None:
        report = self.report
        form = dump_form(op)
        safe = windows_safe(form)
        kept = op in self.own_name or safe != form  # the name itself in mapping.csv
        fname = f"{op if kept else safe}.{index}.{self.ts}.npy"
        if fname in self.used:
            report.skipped.append((tensor, f"file name {fname} already written for another node"))
            return
        self.used.add(fname)
        disk = fname
        if len(fname.encode()) > LONG_NAME or op in self.own_name:
            disk = f"{len(self.mapping) + 1}.npy"
            self.mapping.append((disk, fname))
        elif kept:  # a name Windows refuses (`x:0`, CON): the safe form on disk
            disk = f"{safe}.{index}.{self.ts}.npy"
            self.mapping.append((disk, fname))
        if arr.dtype.hasobject:  # np.save's own refusal, said before the file is queued
            report.skipped.append((tensor, "cannot be saved as npy: Object arrays cannot be saved when "
                                           "allow_pickle=False"))
            return
        report.written.append(disk)
        self.writes.save(os.path.join(self.out, disk), arr, self._landed)

    def _landed(self) -> None:  # on the writing thread
        self.landed_count += 1
        if self.progress:
            self.progress(Progress(self.landed_count, self.total))

    def finish(self, meta: dict) -> None:
        """mapping.csv and dump.json (`meta`, with what was written and skipped), then every file waited
        for where the Writes is this dump's own; the closing progress where some tensors were skipped."""
        target = ""
        try:
            if self.mapping:
                target = os.path.join(self.out, "mapping.csv")
                with atomic_file(target, newline="") as fh:
                    csv.writer(fh).writerows(self.mapping)
                self.made.append("mapping.csv")
            target = os.path.join(self.out, "dump.json")
            meta.update(written=len(self.report.written),
                        skipped=[{"tensor": t, "reason": r} for t, r in self.report.skipped])
            with atomic_file(target) as fh:
                json.dump(meta, fh, indent=1)
            self.made.append("dump.json")
        except OSError as exc:
            raise SourceError(f"{target}: cannot write ({exc.strerror})") from None
        if self.own_writes:
            self.writes.finish()
        if self.progress and len(self.report.written) < self.total:
            self.progress(Progress(self.total, self.total))  # some were skipped: the work is over

    def discard(self) -> None:
        self.writes.abandon()
        for f in [*self.report.written, *self.made]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.out, f))


def _model_copy(out: str, path: str, model, declared: list, expansion: Expansion, report: DumpReport, *,
                made: list[str]) -> None:
    """model.onnx: the model that ran (the expanded one where an If was inlined), else a copy of the file."""
    onnx = onnx_modules()[0]
    target = os.path.join(out, "model.onnx")
    saved_expanded = False
    try:
        if expansion.taken:  # the model that ran, so that its graph names what was dumped
            expanded = type(model)()
            expanded.CopyFrom(model)
            del expanded.graph.output[:]
            expanded.graph.output.extend(declared)
            try:
                with atomic_path(target) as tmp:
                    onnx.save(expanded, tmp)
                saved_expanded = True
                made.append("model.onnx")
            except ValueError as exc:  # a proto over 2 GB: the original is copied, the note says why
                report.skipped.append(("model.onnx", f"the expanded model could not be saved ({exc}); the "
                                                     "original is copied, its If branches are not in its graph"))
        if not saved_expanded and not (os.path.exists(target) and os.path.samefile(path, target)):
            with atomic_path(target) as tmp:
                shutil.copyfile(path, tmp)
            made.append("model.onnx")
    except OSError as exc:
        raise SourceError(f"{target}: cannot write ({exc.strerror})") from None
