"""What an OpenVINO side of `dump`/`run` costs against OpenVINO itself doing the same: read the model, make
every op output a model output (`add_outputs`), compile on CPU, infer once. accuscope's dump
(runs/openvinorun.dump_openvino) does that and also compiles and runs the model as it is (its network
outputs, OpenVINO's own bit for bit), saves the model that ran and writes every tensor as npy. Prints the
best of --repeat for each (the three run in turn) and the ratio (dump / OpenVINO's own; in brackets against OpenVINO making both
runs one after the other), per model:

    python benchmarks/bench_openvino.py [--repeat 5]

Models: PP-OCR cls (1x3x48x192) and det (PP-OCRv4, 1x3x320x320) from ~/.cache/accuscope-tests/rapidocr-models
(the tests' conftest unzips them), converted to IR fp32 here.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))

MODELS = Path(os.path.expanduser("~/.cache/accuscope-tests/rapidocr-models"))
CASES = [("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
         ("det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320))]


def own(xml: str, x: np.ndarray, as_is: bool = False) -> None:
    """OpenVINO alone: every op output a model output, compiled, run once (`as_is`: and the model as it is
    compiled and run too, the two runs a dump makes)."""
    import openvino as ov
    core = ov.Core()
    model = core.read_model(xml)
    if as_is:
        core.compile_model(model.clone(), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({0: x})
    model.add_outputs([out for op in model.get_ordered_ops() if op.get_type_name() not in ("Constant", "Result")
                       for out in op.outputs()])
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    compiled({0: x})


def best(fns: list, repeat: int) -> list[float]:
    """The best time of each of `fns`, run in turn `repeat` times (interleaved: a machine shared with other
    work slows them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, mine in zip(fns, times):
            start = time.perf_counter()
            fn()
            mine.append(time.perf_counter() - start)
    return [min(t) for t in times]


def main(argv: list[str]) -> int:
    import openvino as ov

    from accuscope.engine.runs.openvinorun import dump_openvino
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name, file, shape in CASES:
            xml = os.path.join(tmp, f"{name}.xml")
            ov.save_model(ov.convert_model(str(MODELS / file)), xml, compress_to_fp16=False)
            x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
            runs = iter(range(10_000))
            theirs, both, mine = best([partial(own, xml, x), partial(own, xml, x, True),
                                       lambda xml=xml, x=x, name=name, runs=runs: dump_openvino(
                                           xml, os.path.join(tmp, f"{name}-{next(runs)}"), {"x": x})], args.repeat)
            print(f"{name} {shape}: OpenVINO alone {theirs * 1e3:.0f} ms (with the model as it is too "
                  f"{both * 1e3:.0f} ms) · accuscope dump {mine * 1e3:.0f} ms · ratio {mine / theirs:.2f} "
                  f"({mine / both:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
