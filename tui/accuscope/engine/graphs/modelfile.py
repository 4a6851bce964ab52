"""A model file to a `Graph` by its kind (`load_model`): each model kind's loader (onnxgraph, omgraph,
gegraph, mlirgraph, caffegraph, irgraph, tflitegraph), every failure one `SourceError` naming the file.

Which kind a path is, is sides.registry's to say (`detect`: once per path, by content; its
`load_graph` is the entry point for a path): nothing here looks at a file's name or content to
choose, so a path is never classified two ways."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from accuscope.engine.graphs import gegraph
from accuscope.engine.graphs.caffegraph import load_prototxt
from accuscope.engine.graphs.graph import Graph
from accuscope.engine.graphs.irgraph import load_ir
from accuscope.engine.graphs.mlirgraph import load_mlir
from accuscope.engine.graphs.omgraph import load_om_json
from accuscope.engine.graphs.onnxgraph import load_onnx
from accuscope.engine.graphs.tflitegraph import load_tflite
from accuscope.engine.sources import kinds
from accuscope.engine.sources.inputfile import require_regular
from accuscope.engine.sources.tensor import SourceError

# kind -> (what a message calls it, its loader)
LOADERS: dict[str, tuple[str, Callable[[Path], Graph]]] = {
    kinds.ONNX: ("ONNX", load_onnx),
    kinds.OM: ("offline-model JSON", load_om_json),
    kinds.GE_GRAPH: ("GE graph", gegraph.load_ge_graph),
    kinds.MLIR: ("tpu-mlir .mlir", load_mlir),
    kinds.CAFFE: ("Caffe", load_prototxt),
    kinds.OPENVINO_IR: ("OpenVINO IR", load_ir),
    kinds.TFLITE: ("TFLite", load_tflite),
}


def load_model(kind: str, path: str | os.PathLike) -> Graph:
    """The model at `path`, read by the loader of `kind` (a model kind `sides.registry.detect` gave).

    Raises SourceError naming the file and the reason (not parseable, damaged)."""
    p = Path(path)
    require_regular(str(p))
    what, load = LOADERS[kind]
    try:
        return load(p)
    except SourceError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError) as e:
        # The readers check what they use; a model damaged in a way they did not foresee still
        # gets one line naming the file, never a traceback.
        raise SourceError(f"{p}: damaged {what} model ({type(e).__name__}: {e})") from e
