"""Open whatever path a user hands us: an NPU dump, a golden dump or a model graph."""
from __future__ import annotations

import json
import os
from typing import Union

from .golden import GoldenDump, open_golden
from .graph import Graph, load_graph
from .names import parse_dump_name
from .npudump import find_runs, open_npu_dump, NpuDump
from .tensor import SourceError

Source = Union[NpuDump, GoldenDump, Graph]
GRAPH_SUFFIXES = (".onnx", ".prototxt")
GOLDEN_SUFFIXES = (".npz", ".bin", ".bmrt", ".dat")


def detect(path: str) -> str:
    """'npu', 'golden' or 'graph'; SourceError when the path is none of them."""
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    name = os.path.basename(path.rstrip(os.sep)).lower()
    if os.path.isdir(path):
        if find_runs(path):
            return "npu"
        return "golden"
    if name.endswith(GRAPH_SUFFIXES):
        return "graph"
    if name.endswith(GOLDEN_SUFFIXES):
        return "golden"
    if name.endswith(".json"):
        return "golden" if _is_polygraphy(path) else "graph"
    if parse_dump_name(os.path.basename(path)):
        return "npu"
    raise SourceError(f"{path}: not a dump, golden data or model file accuscope knows "
                      "(Ascend dump, npy folder, .npz, .bin, Polygraphy .json, .onnx, OM .json, .prototxt)")


def _is_polygraphy(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if b'"RunResults"' in head:
        return True
    try:
        return json.loads(head).get("polygraphy_class") == "RunResults"
    except (ValueError, AttributeError):
        return False


def open_source(path: str | os.PathLike, **options) -> Source:
    """Open `path` as what it is. options: shape/dtype for raw .bin, pick/run for NPU dumps."""
    path = os.fspath(path)
    kind = detect(path)
    if kind == "npu":
        return open_npu_dump(path, pick=options.get("pick", "newest"), run=options.get("run"))
    if kind == "graph":
        return load_graph(path)
    pick = options.get("pick", "newest")
    return open_golden(path, shape=options.get("shape"), dtype=options.get("dtype"),
                       pick=pick if pick in ("newest", "oldest") else "newest")
