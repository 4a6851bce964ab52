"""What a LiteRT side of `dump`/`run` costs against LiteRT itself doing the same: make an interpreter that
keeps every tensor (`experimental_preserve_all_tensors`), run once, read every op output (`get_tensor`).
accuscope's dump (runs/litertrun.dump_litert) does that and also reads the model's flatbuffer, runs an
interpreter made as LiteRT's users make it (its network outputs, LiteRT's own bit for bit), dequantizes
the int8 tensors, copies the model and writes every tensor as npy. Prints the best of --repeat for each
and the ratio (dump / LiteRT's own; in brackets against LiteRT making both interpreters and runs):

    python benchmarks/bench_litert.py [--repeat 5] [--dir /dev/shm]

The dumps are written under --dir (default: the system's temporary folder): a dump writes every activation
as float32 and a copy of the model (MobileNetV2: 27 + 14 MB), so on a busy disk the files are most of its
time; a tmpfs (/dev/shm) leaves the disk out.

Models: the test fixture CNN (tests/fixtures/litert, float and int8, 1x16x16x3) and MobileNetV2 (224x224,
float and int8) from ~/.cache/accuscope-tests/litert-models, written there by
`python3 tests/fixtures/litert/make_fixtures.py --mobilenet ~/.cache/accuscope-tests/litert-models`
(TensorFlow's converter in its own venv; the benchmark skips them where absent).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tui"))

MODELS = Path(os.path.expanduser("~/.cache/accuscope-tests/litert-models"))
CASES = [("cnn float", ROOT / "tests/fixtures/litert/cnn_float.tflite"),
         ("cnn int8", ROOT / "tests/fixtures/litert/cnn_int8.tflite"),
         ("mobilenetv2 float", MODELS / "mobilenetv2_float.tflite"),
         ("mobilenetv2 int8", MODELS / "mobilenetv2_int8.tflite")]


def own(path: str, x: np.ndarray, both: bool = False) -> None:
    """LiteRT alone: an interpreter keeping every tensor, run once, every op output read (`both`: and one
    made as users make it, run on the same input, the two runs a dump makes)."""
    from ai_edge_litert.interpreter import Interpreter
    for preserve in ((False, True) if both else (True,)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            it = Interpreter(model_path=path, experimental_preserve_all_tensors=preserve)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        if preserve:
            for op in it._get_ops_details():
                if op["op_name"] != "DELEGATE":
                    for t in op["outputs"]:
                        it.get_tensor(int(t))
        else:
            it.get_tensor(it.get_output_details()[0]["index"])


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str]) -> int:
    from ai_edge_litert.interpreter import Interpreter

    from accuscope.engine.runs.litertrun import dump_litert
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the dumps are written (default: the temporary folder)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for name, path in CASES:
            if not path.is_file():
                print(f"{name}: {path} is absent (make_fixtures.py --mobilenet writes it); skipped")
                continue
            shape = [int(n) for n in Interpreter(model_path=str(path)).get_input_details()[0]["shape"]]
            x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
            runs = iter(range(10_000))
            theirs = best(partial(own, str(path), x), args.repeat)
            both = best(partial(own, str(path), x, True), args.repeat)
            key = next(iter(dump_litert(path, os.path.join(tmp, f"{name}-probe"), random_inputs=True).inputs))
            mine = best(lambda path=path, x=x, name=name, runs=runs, key=key: dump_litert(
                path, os.path.join(tmp, f"{name}-{next(runs)}"), {key: x}), args.repeat)
            print(f"{name} {shape}: LiteRT alone {theirs * 1e3:.1f} ms (both interpreters "
                  f"{both * 1e3:.1f} ms) · accuscope dump {mine * 1e3:.1f} ms · ratio {mine / theirs:.2f} "
                  f"({mine / both:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
