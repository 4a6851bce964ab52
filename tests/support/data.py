"""The test data everyone reaches: the repository's fixture folders, the download cache, the text image
PP-OCR's detector reads, and PP-OCR cls with one op's output broken on a simulated NPU side."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"  # in the repository: a fresh clone needs nothing beside it
ASCEND_FIXTURES = FIXTURES / "ascend-dump"
RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
CACHE = Path(os.environ.get("ACCUSCOPE_TEST_CACHE", Path.home() / ".cache" / "accuscope-tests"))


def text_image_nchw() -> np.ndarray:
    """A 320x96 RGB image of two lines of text drawn with Pillow's built-in font (one black, one blue),
    normalised as PP-OCR's detector takes it ((x / 255 - 0.5) / 0.5), NCHW float32."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("RGB", (320, 96), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    draw.text((8, 20), "accuracy 42 hello", fill=(0, 0, 0), font=ImageFont.load_default())
    draw.text((8, 60), "the quick brown fox", fill=(20, 20, 200), font=ImageFont.load_default())
    return ((np.asarray(img, np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


def cls_with_planted_fault(cls_model: Path, root: Path, op: str, breaker):
    """PP-OCR cls run by onnxruntime into root/golden, and an Ascend-style fp16 NPU dump of it in
    root/npu whose values are the golden ones except op's output 0, replaced by breaker(array).
    Returns npusim's Simulation (model_json, ...)."""
    import shutil

    import numpy as np

    from accuscope.engine.demo.npusim import simulate
    from accuscope.engine.runs.ortdump import dump_onnx
    from accuscope.engine.sides.registry import load_graph, open_golden

    x = np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32)
    dump_onnx(cls_model, root / "golden", {"x": x}, timestamp=1700000000000000)
    shutil.copytree(root / "golden", root / "npu-values")
    bad = root / "npu-values" / f"{op}.0.1700000000000000.npy"
    np.save(bad, breaker(np.load(bad)))
    return simulate(load_graph(cls_model), open_golden(root / "npu-values"), str(root / "npu"), model_name="cls")
