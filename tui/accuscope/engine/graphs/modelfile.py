"""A model file to a `Graph` (`load_graph`): the loader chosen by extension, then by content
(onnxgraph, omgraph, gegraph, mlirgraph, caffegraph), every failure one `SourceError` naming the file."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from accuscope.engine.graphs import gegraph
from accuscope.engine.graphs.caffegraph import load_prototxt
from accuscope.engine.graphs.graph import Graph
from accuscope.engine.graphs.mlirgraph import load_mlir
from accuscope.engine.graphs.omgraph import load_om_json
from accuscope.engine.graphs.onnxgraph import load_onnx
from accuscope.engine.sources.inputfile import require_regular
from accuscope.engine.sources.tensor import SourceError


def load_graph(path: str | os.PathLike, **_dump_options) -> Graph:
    """Load a model graph, choosing the reader by extension, then by content.

    Raises SourceError naming the file and the reason (missing, not parseable, not a model).
    Options meant for dumps (pick, run, shape ... that `sources` hands every reader) do not apply.
    """
    p = Path(path)
    if not p.exists():
        raise SourceError(f"{p}: no such file")
    if p.is_dir():
        raise SourceError(f"{p}: is a directory, not a model file")
    suffix = p.suffix.lower()
    if suffix == ".om":
        raise SourceError(f"{p}: binary offline model; convert it first: atc --mode=1 --om={p} --json=model.json")
    require_regular(str(p))
    load: Callable[[Path], Graph]
    if suffix in (".txt", ".pbtxt") and gegraph.sniff(str(p)):
        kind, load = "GE graph", gegraph.load_ge_graph
    elif suffix == ".mlir":
        kind, load = "tpu-mlir .mlir", load_mlir
    else:
        kind = {".onnx": "onnx", ".json": "om", ".prototxt": "caffe", ".pbtxt": "caffe"}.get(suffix) or _sniff(p)
        load = {"onnx": load_onnx, "om": load_om_json}.get(kind, load_prototxt)
    try:
        return load(p)
    except SourceError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError) as e:
        # The readers check what they use; a model damaged in a way they did not foresee still
        # gets one line naming the file, never a traceback.
        raise SourceError(f"{p}: damaged {kind} model ({type(e).__name__}: {e})") from e


def _sniff(p: Path) -> str:
    """Guess the format of a file with an unhelpful extension from its first bytes."""
    try:
        head = p.open("rb").read(4096)
    except OSError as e:
        raise SourceError(f"{p}: cannot read ({e.strerror or e})") from e
    text = head.lstrip()
    if text.startswith(b"{"):
        return "om"
    try:
        decoded = head.decode("utf-8")
    except UnicodeDecodeError:
        return "onnx"
    return "caffe" if "layer" in decoded or "input" in decoded else "onnx"
