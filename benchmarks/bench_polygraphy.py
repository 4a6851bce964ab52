"""accuscope against Polygraphy on Polygraphy's own files and flow, measured side by side in one run.

Setup (not timed, kept in --dir): the PP-OCRv4 text detector (--model det, input 1x3xSIZExSIZE) or
recognizer (--model rec, input 1x3x48x320) from the rapidocr-onnxruntime wheel (the test suite's cache),
its onnxruntime `quantize_dynamic` int8 version, one input tensor x.npy, and for (a) `polygraphy run
MODEL --onnxrt --onnx-outputs mark all --save-outputs` of both models (ref.json, cand.json: every tensor
of the network, about 0.9 and 1.3 GB for the detector at SIZE 640).

  (a) two RunResults files compared
      polygraphy  polygraphy run --load-outputs ref.json cand.json       (its default `simple` comparison)
      accuscope   accuscope compare --npu cand.json --golden ref.json --out TASK  (all ten metrics)
  (b) the whole ONNX flow, from the two models and x.npy to a verdict
      polygraphy  polygraphy run REF --onnxrt --onnx-outputs mark all --save-outputs ref.json, then
                  polygraphy run CAND --onnxrt --onnx-outputs mark all --load-outputs ref.json
                  --compare cosine_similarity                                  (inputs from x.npy)
      accuscope   accuscope run REF CAND --input x=x.npy --out TASK            (all ten metrics)
  (c) reading a ~1 GB RunResults file (8 float32 tensors of 96 MiB, written by RunResults.save), every
      tensor visited once: Polygraphy's RunResults.load against accuscope's streaming reader

Each command runs in its own process; wall time, and the peak RSS of its whole process tree (summed
VmRSS sampled every 20 ms, or the largest single VmHWM when higher). Prints time and memory ratios;
(b) over --rounds alternating rounds, the median of the rounds' ratios.

    python benchmarks/bench_polygraphy.py [--model det|rec] [--size 640] [--rounds 1]
        [--dir /tmp/accuscope-bench-polygraphy] [--only a,b,c]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
POLYGRAPHY = str(Path(sys.executable).parent / "polygraphy")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tui"), os.environ.get("PYTHONPATH", "")]),
       "POLYGRAPHY_AUTOINSTALL_DEPS": "0"}
LOADER = """import numpy as np

def load_data():
    yield {"x": np.load(%r)}
"""
READ_POLYGRAPHY = """import sys
from polygraphy.comparator import RunResults
results = RunResults.load(sys.argv[1])
print(sum(int(a.size) for _name, iterations in results.items() for it in iterations for a in it.values()))
"""
READ_ACCUSCOPE = """import sys
from accuscope.engine.sources import polygraphy
entries, _ = polygraphy.read(sys.argv[1])
print(sum(int(t.load().size) for t in entries))
"""


# --- measuring ---------------------------------------------------------------------------------

def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return pids


def measure(label: str, cmd: list[str], cwd: str | None = None, ok=(0,)) -> tuple[float, float]:
    """Run cmd; (wall seconds, peak RSS MB of its process tree)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = [0]

    def sample():
        while proc.poll() is None:
            pids = _tree(proc.pid)
            total = sum(_status_kb(p, "VmRSS") for p in pids)
            single = max((_status_kb(p, "VmHWM") for p in pids), default=0)
            peak[0] = max(peak[0], total, single)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.stdout.read().decode(errors="replace")
    proc.wait()
    seconds = time.perf_counter() - start
    sampler.join()
    if proc.returncode not in ok:
        sys.exit(f"{label}: exit {proc.returncode}\n{output[-3000:]}")
    mb = peak[0] / 1024
    print(f"  {label:<44} {seconds:8.1f} s  {mb:8.0f} MB")
    return seconds, mb


def ratios(name: str, theirs: tuple[float, float], ours: tuple[float, float], target: float) -> None:
    speed, memory = theirs[0] / ours[0], theirs[1] / ours[1]
    print(f"  => {name}: accuscope {speed:.1f}x faster (target >= {target:g}x), "
          f"{memory:.1f}x less memory (target >= 3x)")


# --- setup -------------------------------------------------------------------------------------

MODELS = {"det": "ch_PP-OCRv4_det_infer.onnx", "rec": "ch_PP-OCRv4_rec_infer.onnx"}


def models(which: str = "det") -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import _rapidocr_models  # the test suite's cached PyPI wheel models
    return _rapidocr_models() / MODELS[which]


def input_shape(which: str, size: int) -> tuple[int, ...]:
    """det: a SIZE x SIZE image; rec: a text line of 48 x 320 (rapidocr's recognizer input)."""
    return (1, 3, size, size) if which == "det" else (1, 3, 48, 320)


def quantized(ref: Path, folder: Path) -> Path:
    """onnxruntime's quantize_dynamic of the model (its weights moved from Constant nodes first)."""
    target = folder / f"{ref.stem}_int8.onnx"
    if target.exists():
        return target
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    from accuscope.engine.runs.onnxedit import constants_as_initializers
    model = constants_as_initializers(onnx.load(str(ref)))
    weights = folder / f"{ref.stem}_initializers.onnx"
    onnx.save(model, str(weights))
    quantize_dynamic(str(weights), str(target))
    return target


def setup(folder: Path, size: int, which: str = "det") -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    ref = models(which)
    cand = quantized(ref, folder)
    shape = input_shape(which, size)
    x = folder / f"x-{'x'.join(map(str, shape[2:]))}.npy"
    if not x.exists():
        np.save(x, np.random.default_rng(0).random(shape, dtype=np.float32))
    return ref, cand, x


def has_run_command() -> bool:
    probe = subprocess.run([sys.executable, "-m", "accuscope", "run", "-h"], env=ENV, capture_output=True)
    return probe.returncode == 0


# --- the three comparisons ---------------------------------------------------------------------

def bench_files(folder: Path, ref: Path, cand: Path, x: Path) -> None:
    (folder / "loader.py").write_text(LOADER % str(x))
    a, b = (folder / f"{model.stem}-{x.stem}.json" for model in (ref, cand))
    for model, path in ((ref, a), (cand, b)):
        if not path.exists():
            print(f"setup: polygraphy run {model.name} ... --save-outputs {path.name}")
            subprocess.run([POLYGRAPHY, "run", str(model), "--onnxrt", "--onnx-outputs", "mark", "all",
                            "--data-loader-script", str(folder / "loader.py"), "--save-outputs", str(path)],
                           env=ENV, check=True, capture_output=True)
    print(f"(a) two RunResults files: {a.name} {a.stat().st_size / 1e9:.2f} GB, "
          f"{b.name} {b.stat().st_size / 1e9:.2f} GB")
    theirs = measure("polygraphy run --load-outputs A B", [POLYGRAPHY, "run", "--load-outputs", str(a), str(b)],
                     ok=(0, 1))  # 1: the int8 outputs fail its default tolerances, as expected
    task = folder / "task-a"
    shutil.rmtree(task, ignore_errors=True)
    ours = measure("accuscope compare --npu B --golden A", [sys.executable, "-m", "accuscope", "compare",
                   "--npu", str(b), "--golden", str(a), "--out", str(task)])
    ratios("(a)", theirs, ours, 3)


def bench_flow(folder: Path, ref: Path, cand: Path, x: Path, rounds: int = 1) -> None:
    """Polygraphy's two steps and `accuscope run`, alternating round by round; the median of the
    rounds' ratios (both see the same load in a round)."""
    print(f"(b) whole ONNX flow: {ref.name} vs {cand.name}, input {x.name}, {rounds} alternating round(s)")
    if not has_run_command():
        print("  accuscope run: not in this tree yet")
        return
    loader = folder / "loader.py"
    loader.write_text(LOADER % str(x))
    saved, task = folder / "flow-ref.json", folder / "task-b"
    speed, memory = [], []
    for _ in range(rounds):
        first = measure("polygraphy run REF --save-outputs", [POLYGRAPHY, "run", str(ref), "--onnxrt", "--onnx-outputs",
                        "mark", "all", "--data-loader-script", str(loader), "--save-outputs", str(saved)])
        second = measure("polygraphy run CAND --load-outputs (cosine)", [POLYGRAPHY, "run", str(cand), "--onnxrt",
                         "--onnx-outputs", "mark", "all", "--data-loader-script", str(loader),
                         "--load-outputs", str(saved), "--compare", "cosine_similarity"], ok=(0, 1))
        saved.unlink()
        theirs = (first[0] + second[0], max(first[1], second[1]))
        print(f"  {'polygraphy, both steps':<44} {theirs[0]:8.1f} s  {theirs[1]:8.0f} MB")
        shutil.rmtree(task, ignore_errors=True)
        ours = measure("accuscope run REF CAND --input x=x.npy", [sys.executable, "-m", "accuscope", "run", str(ref),
                       str(cand), "--input", f"x={x}", "--out", str(task)], ok=(0, 1))
        speed.append(theirs[0] / ours[0])
        memory.append(theirs[1] / ours[1])
    print(f"  => (b): accuscope {statistics.median(speed):.1f}x faster (rounds: "
          f"{', '.join(f'{r:.1f}' for r in speed)}; target >= 5x), {statistics.median(memory):.1f}x less memory")


def bench_read(folder: Path) -> None:
    big = folder / "big.json"
    if not big.exists():
        print("setup: RunResults.save of 8 x 96 MiB float32 tensors")
        subprocess.run([sys.executable, "-c", f"""
import numpy as np
from polygraphy.comparator import RunResults
from polygraphy.comparator.struct import IterationResult
outs = {{f"t{{i}}": np.random.default_rng(i).standard_normal((1, 96, 512, 512)).astype(np.float32) for i in range(8)}}
results = RunResults()
results.append(("onnxrt-runner-N0", [IterationResult(outs, runner_name="onnxrt-runner-N0")]))
results.save({str(big)!r})
"""], env=ENV, check=True, capture_output=True)
    print(f"(c) reading {big.name} ({big.stat().st_size / 1e9:.2f} GB, largest tensor 96 MiB), every tensor once")
    theirs = measure("Polygraphy RunResults.load", [sys.executable, "-c", READ_POLYGRAPHY, str(big)])
    ours = measure("accuscope polygraphy.read + Tensor.load", [sys.executable, "-c", READ_ACCUSCOPE, str(big)])
    ratios("(c)", theirs, ours, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=640, help="input image side (default 640)")
    parser.add_argument("--dir", default="/tmp/accuscope-bench-polygraphy")
    parser.add_argument("--only", default="a,b,c", help="which comparisons, e.g. a,c")
    parser.add_argument("--model", choices=sorted(MODELS), default="det",
                        help="(a), (b): PP-OCRv4's detector (default) or recognizer, against its int8 version")
    parser.add_argument("--rounds", type=int, default=1, help="(b): alternating rounds (median of their ratios)")
    args = parser.parse_args()
    folder = Path(args.dir)
    only = set(args.only.split(","))
    ref, cand, x = setup(folder, args.size, args.model) if only & {"a", "b"} else (None, None, None)
    if "a" in only:
        bench_files(folder, ref, cand, x)
    if "b" in only:
        bench_flow(folder, ref, cand, x, args.rounds)
    if "c" in only:
        bench_read(folder)


if __name__ == "__main__":
    main()
