"""The kind names of what accuscope reads that code names, spelled once: a format's `kind` (sides.registry's
`Format.kind`, a source's `.kind`, a `Graph.kind` for the models) and what task.json and the result's
messages call it. Compare against these names, never against a string literal. A dump format that no code
names (it behaves by the capabilities its registry entry declares) needs no line here: its entry spells
its kind, once (ARCHITECTURE.md, "A dump format")."""
from __future__ import annotations

from typing import Final

# dumped tensors (either side of a comparison)
ASCEND: Final = "ascend"
MSPROBE: Final = "msprobe"
MINDSPORE: Final = "mindspore"
ATB: Final = "atb"
NPY: Final = "npy"
PT: Final = "pt"  # a folder of torch.save files, one tensor (or a dict, list, tuple of them) a file
TPU_MLIR_NPZ: Final = "tpu-mlir-npz"
RKNN: Final = "rknn"  # RKNN-Toolkit2 accuracy_analysis snapshot: golden/, simulator/, runtime/
NPZ: Final = "npz"
POLYGRAPHY: Final = "polygraphy"
BIN: Final = "bin"
# model graphs
ONNX: Final = "onnx"
OM: Final = "om"
GE_GRAPH: Final = "ge-graph"
MLIR: Final = "mlir"
CAFFE: Final = "caffe"
OPENVINO_IR: Final = "openvino-ir"  # OpenVINO IR: model.xml (+ model.bin)
TFLITE: Final = "tflite"  # a TFLite / LiteRT flatbuffer: model.tflite
