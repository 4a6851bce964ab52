"""What a model format's graphs are (`ModelCapabilities`), declared on the format's entry in `sides.registry`
(`Format.model`) and carried by each Graph it loads (`Graph.caps`). The comparison, the views and the exports
ask a graph's properties (`is_device`, `converted`, `cuttable`, `runnable`), which read these, never the
graph's kind name: a new model format declares what it is, and nothing else changes. It imports nothing, so
that the registry declares it at import without the graphs (tests/cli/test_startup.py); a NamedTuple, made in
0.1 ms where a frozen dataclass takes 1 ms of every command's start-up (ARCHITECTURE.md, Start-up)."""
from __future__ import annotations

from typing import NamedTuple


class ModelCapabilities(NamedTuple):
    """What the rest of the code asks of a model format's graphs (each False where they are not)."""

    device_graph: bool = False  # an Ascend device graph (atc's JSON, a GE graph dump): its ops fused from a
    # framework model's (Node.fused, origins), its op ids the dump's sequence; it describes an Ascend dump
    converted: bool = False  # a converted model, the candidate (NPU) side's; otherwise a framework model,
    # naming the reference (golden) side's tensors
    cuttable: bool = False  # a framework graph an export can cut into a submodel
    runnable: bool = False  # its submodels run here (onnxruntime), its nodes carry Model Explorer's data


NOT_DECLARED = ModelCapabilities()  # a graph no model format loaded (msprobe's module tree, a test's)
