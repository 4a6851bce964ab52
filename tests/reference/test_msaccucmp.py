"""Cross-check of compare_arrays against msaccucmp, the reference implementation Huawei ships in the
`mindstudio-probe` wheel on PyPI (metrics.md section 1), run on CPU in a subprocess.

msaccucmp's per-file mode, `msaccucmp.py file_compare -m npu.npy -g golden.npy -out DIR`, logs a
line of eight metric names and a line of values on stderr and writes the same to
`DIR/file_result_<timestamp>.txt` ("CosineSimilarity: 0.999999", ...). It casts both tensors to
float32 and prints every number with six decimals, so each pair is checked three ways:

1. the unmodified `file_compare` command: its eight numbers agree with ours to their six decimals;
2. msaccucmp's own metric functions (`algorithm_manager/builtin_algorithm/alg_*.py`, all ten)
   called on float64 copies of the data: the same formulas, so agreement to 1e-9 relative;
3. its two-file `compare -m a.npy -g b.npy` mode (file_compare's code path, plus
   KullbackLeiblerDivergence and StandardDeviation) with the six-decimal formatting replaced by
   repr(), i.e. its real float32 numbers in full: agreement to 1e-6 relative, except where its
   float32 arithmetic cannot deliver that (`FLOAT32_ABS` below says where and why).

Degenerate pairs that we deliberately handle differently (metrics.md section 2) are run too:
msaccucmp's output is recorded, and our documented behaviour is asserted.

msaccucmp needs nothing of mindstudio-probe's long dependency list but numpy and protobuf
(`google.protobuf`, imported by its dump parser), both dependencies of accuscope already.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare.columns import KEY_OF
from accuscope.engine.compare.metrics import compare_arrays
from support.data import CACHE

MINDSTUDIO_PROBE = "mindstudio-probe==26.2.0"  # 26.x: the first releases whose wheel holds msaccucmp
EPS32 = float(np.finfo(np.float32).eps)
FILE_COMPARE_METRICS = ["CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError",
                        "RelativeEuclideanDistance", "MeanAbsoluteError", "RootMeanSquareError",
                        "MaxRelativeError", "MeanRelativeError"]
ALL_METRICS = ["CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
               "KullbackLeiblerDivergence", "StandardDeviation", "MeanAbsoluteError", "RootMeanSquareError",
               "MaxRelativeError", "MeanRelativeError"]


# --------------------------------------------------------------------------------------------------
# msaccucmp, from the wheel


def _msaccucmp_script() -> Path:
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    version = MINDSTUDIO_PROBE.split("==")[1]
    found = sorted(wheels.glob(f"mindstudio_probe-{version}-*.whl"))
    if not found:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
                               MINDSTUDIO_PROBE], capture_output=True, text=True)
        found = sorted(wheels.glob(f"mindstudio_probe-{version}-*.whl"))
        if proc.returncode != 0 or not found:
            pytest.fail(f"could not download {MINDSTUDIO_PROBE} from PyPI (needed for the msaccucmp "
                        f"cross-check): {proc.stderr.strip()[-2000:]}")
    target = CACHE / f"mindstudio-probe-{version}"
    script = target / "msprobe" / "msaccucmp" / "msaccucmp.py"
    if not script.exists():
        with zipfile.ZipFile(found[0]) as zf:
            zf.extractall(target, [n for n in zf.namelist() if n.startswith("msprobe/msaccucmp/")])
    if not script.exists():
        pytest.fail(f"{found[0].name} holds no msprobe/msaccucmp/msaccucmp.py")
    return script


@pytest.fixture(scope="session")
def msaccucmp() -> Path:
    """Path of msaccucmp.py; the download is never skipped, only a missing dependency skips."""
    script = _msaccucmp_script()
    missing = []
    for module, pip_name in (("numpy", "numpy"), ("google.protobuf", "protobuf")):
        try:
            __import__(module)
        except ImportError:
            missing.append(pip_name)
    if missing:
        pytest.skip(f"msaccucmp needs {', '.join(missing)}: pip install {' '.join(missing)} into {sys.executable}")
    return script


# Runs msaccucmp.py for many pairs in one interpreter, each run as `python msaccucmp.py ...` would
# (its folder first on sys.path, the script run as __main__), a marker line on stderr before each:
# 1. the unmodified `file_compare` command for every pair (result file in <pair>/out);
# 2. then, with its '{:.6f}' number formatting replaced by repr(): its ten metric functions on
#    float64 copies (<pair>/float64.json), and its two-file `compare` command (float32, ten metrics).
DRIVER = r"""
import importlib, json, os, runpy, sys
script, names, pairs = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
sys.path.insert(0, os.path.dirname(script))
import numpy as np


def msaccucmp(*argv):
    sys.argv = [script, *argv]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code:
            raise


for pair in pairs:
    print("=== file_compare " + pair, file=sys.stderr, flush=True)
    os.mkdir(pair + "/out")
    msaccucmp("file_compare", "-m", pair + "/npu.npy", "-g", pair + "/golden.npy", "-out", pair + "/out")

from cmp_utils import utils
from algorithm_manager.algorithm_parameter import AlgorithmParameter
utils.format_value = lambda value: repr(float(value))
for pair in pairs:
    x, y = np.load(pair + "/npu.npy"), np.load(pair + "/golden.npy")
    params = AlgorithmParameter()
    params.__dict__ = {"my_output_dump_file": pair + "/npu.npy", "ground_truth_dump_file": pair + "/golden.npy",
                       "shape_type": utils.get_shape_type(x.shape)}
    x64, y64 = x.reshape(-1).astype(np.float64), y.reshape(-1).astype(np.float64)
    result = {}
    for name in names:
        module = importlib.import_module("algorithm_manager.builtin_algorithm.alg_" + name)
        try:
            result[name] = module.compare(x64, y64, params)[0]
        except Exception:  # as msaccucmp itself does (empty tensors)
            result[name] = "NaN"
    with open(pair + "/float64.json", "w") as f:
        json.dump(result, f)
    print("=== compare " + pair, file=sys.stderr, flush=True)
    msaccucmp("compare", "-m", pair + "/npu.npy", "-g", pair + "/golden.npy", "-out", pair + "/out")
"""


def _logged_table(stderr: str, must_have: str) -> dict[str, str]:
    """The line of names and the line of values msaccucmp logs ('... - [INFO] CosineSimilarity ...')."""
    lines = [line.split("[INFO] ", 1)[1] for line in stderr.splitlines() if "[INFO] " in line]
    for i, line in enumerate(lines):
        if line.startswith("CosineSimilarity") and must_have in line:
            return dict(zip(line.split(), lines[i + 1].split()))
    raise AssertionError(f"no metric table in msaccucmp's output:\n{stderr}")


def _result_file(out: Path) -> dict[str, str]:
    files = list(out.glob("file_result_*.txt"))
    assert len(files) == 1, files
    return dict(line.split(": ", 1) for line in files[0].read_text().splitlines() if line)


def _run_msaccucmp(script: Path, pairs: dict[str, tuple[np.ndarray, np.ndarray]], root: Path) -> dict[str, dict]:
    """{pair name: {file, file_stderr, float64, float32}} from one run of DRIVER."""
    for name, (x, y) in pairs.items():
        (root / name).mkdir(parents=True)
        np.save(root / name / "npu.npy", x)
        np.save(root / name / "golden.npy", y)
    (root / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, str(root / "driver.py"), str(script), ",".join(ALL_METRICS),
                           *(str(root / name) for name in pairs)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    logs = dict(re.findall(r"^=== (\w+ \S+)\n(.*?)(?=^=== |\Z)", proc.stderr, re.M | re.S))
    results = {}
    for name in pairs:
        pair = root / name
        results[name] = {"file": _result_file(pair / "out"), "file_stderr": logs[f"file_compare {pair}"],
                         "float64": json.loads((pair / "float64.json").read_text()),
                         "float32": _logged_table(logs[f"compare {pair}"], "KullbackLeiblerDivergence")}
    return results


# --------------------------------------------------------------------------------------------------
# the pairs

PAIR_NAMES = ["float32_noise", "float16_noise", "relu_zeros_in_golden", "constant_golden", "int8_quantized",
              "large_1M"]


@cache
def _pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Realistic (npu, golden) pairs with ordinary data."""
    rng = np.random.default_rng(20240607)
    pairs = {}
    y = rng.standard_normal((1, 16, 16, 16)).astype(np.float32)
    pairs["float32_noise"] = ((y + rng.normal(0, 1e-3, y.shape)).astype(np.float32), y)
    y = rng.standard_normal((2, 8, 16, 16)).astype(np.float16)
    pairs["float16_noise"] = ((y * (1 + rng.normal(0, 1e-3, y.shape))).astype(np.float16), y)
    # ReLU output: about half the golden values are exactly zero (relative errors skip them)
    y = np.maximum(rng.standard_normal((1, 32, 8, 8)), 0).astype(np.float32)
    pairs["relu_zeros_in_golden"] = ((y + rng.normal(0, 1e-3, y.shape)).astype(np.float32), y)
    # constant golden (max == min: KL takes its values unscaled)
    y = np.full((4, 250), 3.0, np.float32)
    pairs["constant_golden"] = ((y + rng.normal(0, 1e-2, y.shape)).astype(np.float32), y)
    # int8-like fake quantization: a real error, KL well above float32 noise
    y = rng.standard_normal((8, 512)).astype(np.float32)
    scale = np.abs(y).max() / 127
    pairs["int8_quantized"] = ((np.round(y / scale) * scale).astype(np.float32), y)
    # about 1e6 elements: many of our chunks, long float32 sums in msaccucmp
    y = rng.standard_normal((1, 64, 128, 128)).astype(np.float32)
    pairs["large_1M"] = ((y + rng.normal(0, 1e-3, y.shape)).astype(np.float32), y)
    assert list(pairs) == PAIR_NAMES
    return pairs


_rng = np.random.default_rng(7)
_x100 = _rng.standard_normal(100).astype(np.float32)
NAN, FINITE = "nan", "finite"
_NINE = ["cos", "max_abs", "acc_rel", "red", "kl", "mean_abs", "rmse", "max_rel", "mean_rel"]
# Where msaccucmp and we part ways on purpose (metrics.md section 2), and two where we agree.
# name: (x, y, what msaccucmp 26.2.0's file_compare writes (recorded), our values, our reasons)
DEGENERATE: dict[str, tuple[np.ndarray, np.ndarray, dict[str, float | str], dict[str, float | str], list[str]]] = {
    "empty": (
        np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32),
        # a perfect cosine and zero errors for a tensor that holds nothing
        {"CosineSimilarity": 1.0, "AccumulatedRelativeError": 0.0, "RelativeEuclideanDistance": 0.0,
         "MaxAbsoluteError": NAN, "MeanAbsoluteError": NAN, "RootMeanSquareError": NAN,
         "MaxRelativeError": NAN, "MeanRelativeError": NAN},
        dict.fromkeys(_NINE, NAN),
        ["empty tensor"]),
    "all_zero_golden": (
        _x100, np.zeros(100, np.float32),
        # relative distance and relative errors 0, i.e. "no error", against an all-zero golden
        {"CosineSimilarity": NAN, "RelativeEuclideanDistance": 0.0, "AccumulatedRelativeError": 0.0,
         "MaxRelativeError": 0.0, "MeanRelativeError": 0.0,
         "MaxAbsoluteError": FINITE, "MeanAbsoluteError": FINITE, "RootMeanSquareError": FINITE},
        {"cos": NAN, "red": NAN, "acc_rel": NAN, "max_rel": NAN, "mean_rel": NAN, "rel_0.1%": NAN,
         "rel_0.5%": NAN, "max_abs": FINITE, "mean_abs": FINITE, "rmse": FINITE},
        ["all the data is zero in the golden tensor", "golden is all zero: relative metrics are undefined"]),
    "nan_in_npu_only": (
        np.array([1, np.nan, 3, 4], np.float32), np.array([1, 2, 3, 4.1], np.float32),
        # every metric 'nan', nothing says where it came from
        dict.fromkeys(FILE_COMPARE_METRICS, NAN),
        dict.fromkeys(_NINE, NAN),
        ["NaN/inf: npu has 1 NaN and 0 inf, golden has 0 NaN and 0 inf at different positions; "
         "metrics not computed"]),
    # both all zero: nothing differs, and we agree with msaccucmp (cosine 1, every error 0)
    "both_all_zero": (
        np.zeros((10, 10), np.float32), np.zeros((10, 10), np.float32),
        {"CosineSimilarity": 1.0, **dict.fromkeys(FILE_COMPARE_METRICS[1:], 0.0)},
        {"cos": 1.0, "red": 0.0, "max_abs": 0.0, "mean_abs": 0.0, "rmse": 0.0, "max_rel": 0.0,
         "mean_rel": 0.0, "acc_rel": 0.0},
        []),
    # one element: cosine 1 with a reason, in both
    "scalar": (
        np.array([2.0], np.float32), np.array([1.0], np.float32),
        dict.fromkeys(FILE_COMPARE_METRICS, 1.0),
        {"cos": 1.0, "max_abs": 1.0, "mean_abs": 1.0, "rmse": 1.0, "red": 1.0, "max_rel": 1.0,
         "mean_rel": 1.0, "acc_rel": 1.0},
        ["this tensor is scalar"]),
}


@pytest.fixture(scope="session")
def reference(msaccucmp, tmp_path_factory) -> dict[str, dict]:
    """msaccucmp's results for every pair, ordinary and degenerate, from one interpreter."""
    pairs = {**_pairs(), **{name: case[:2] for name, case in DEGENERATE.items()}}
    return _run_msaccucmp(msaccucmp, pairs, tmp_path_factory.mktemp("msaccucmp"))


@cache
def _ours(name: str):
    return compare_arrays(*_pairs()[name])


def _num(text: str) -> float:
    return float(text)  # msaccucmp writes 'NaN', 'nan', '1.0', '0.999999', ...


# --------------------------------------------------------------------------------------------------
# ordinary data: the same numbers


# Extra absolute tolerance, over 1e-6 relative, for msaccucmp's float32 arithmetic (v = our value,
# n = element count):
# - MaxRelativeError, MeanRelativeError: msaccucmp forms x/y - 1 in float32. For x/y near 1 the
#   quotient is off by up to eps32/2 * (1 + r) absolutely, and subtracting 1 keeps that absolute
#   error, so r = 0.004 (float16 noise) is only good to ~1.5e-5 relative there (seen: 1.1e-5).
#   The mean of such terms is off by at most the same absolute amount.
# - AccumulatedRelativeError: the sum of n such terms, n times that.
# - KullbackLeiblerDivergence: msaccucmp's two normalising sums (float32) carry a relative error of
#   a few eps32, which shifts every ln(p_x/p_y), hence KL, by that much absolutely. KL of the
#   small-noise pairs is ~1e-8, below that noise (msaccucmp's float32 KL of the 1e6 pair even
#   comes out negative); test_same_formulas_as_msaccucmp checks the KL formula to 1e-9 instead.
# CosineSimilarity, the absolute errors, RootMeanSquareError and RelativeEuclideanDistance reach
# 1e-6 relative as they are (seen: at most 5e-8).
FLOAT32_ABS = {
    "MaxRelativeError": lambda v, n: EPS32 * (1 + v),
    "MeanRelativeError": lambda v, n: EPS32 * (1 + v),
    "AccumulatedRelativeError": lambda v, n: EPS32 * (n + v),
    "KullbackLeiblerDivergence": lambda v, n: 4 * EPS32,
}


def _float32_tolerance(metric: str, mine: float, n: int) -> float:
    extra = FLOAT32_ABS.get(metric)
    return 1e-6 * abs(mine) + (extra(abs(mine), n) if extra else 0.0)


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_file_compare_result_file_matches(reference, name):
    """The unmodified `file_compare` command: the eight numbers it writes, to their six decimals."""
    y = _pairs()[name][1]
    ours = _ours(name)
    written = reference[name]["file"]
    assert list(written) == FILE_COMPARE_METRICS
    assert _logged_table(reference[name]["file_stderr"], "CosineSimilarity") == written
    for metric, text in written.items():
        assert re.fullmatch(r"\d+\.\d{6}", text), text  # '{:.6f}'
        mine = ours.values[KEY_OF[metric]]
        assert abs(mine - _num(text)) <= 5e-7 + _float32_tolerance(metric, mine, y.size), (metric, mine, text)


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_same_formulas_as_msaccucmp(reference, name):
    """msaccucmp's own ten metric functions, fed float64: agreement to 1e-9 relative."""
    ours = _ours(name)
    theirs = reference[name]["float64"]
    assert theirs["StandardDeviation"] == ours.std
    for metric in ALL_METRICS:
        if metric != "StandardDeviation":
            assert ours.values[KEY_OF[metric]] == pytest.approx(_num(theirs[metric]), rel=1e-9, abs=1e-15), metric


@pytest.mark.parametrize("name", PAIR_NAMES)
def test_agrees_with_msaccucmp_float32_numbers(reference, name):
    """msaccucmp's `compare` command on the two .npy files, its float32 numbers printed in full."""
    y = _pairs()[name][1]
    ours = _ours(name)
    theirs = reference[name]["float32"]
    assert list(theirs) == ALL_METRICS
    assert theirs["StandardDeviation"] == ours.std
    for metric in ALL_METRICS:
        if metric != "StandardDeviation":
            mine, ref = ours.values[KEY_OF[metric]], _num(theirs[metric])
            assert abs(mine - ref) <= _float32_tolerance(metric, mine, y.size), (metric, mine, ref)
    # a KL divergence is never negative: ours (float64) is not, whatever msaccucmp's float32 gives
    assert ours.values["kl"] >= 0
    assert ours.reasons == []


# --------------------------------------------------------------------------------------------------
# degenerate pairs


def _check(value: float, expected, what: str) -> None:
    if expected == NAN:
        assert math.isnan(value), what
    elif expected == FINITE:
        assert math.isfinite(value), what
    else:
        assert value == pytest.approx(expected, abs=1e-6), what


@pytest.mark.parametrize("name", DEGENERATE)
def test_degenerate_pair_documented_behaviour(reference, name):
    x, y, theirs_expected, ours_expected, reasons = DEGENERATE[name]
    ours = compare_arrays(x, y)
    for key, expected in ours_expected.items():
        _check(ours.values[key], expected, f"ours {key}")
    assert ours.reasons == reasons
    # msaccucmp's output, as recorded; where both are finite we give the same number
    written = reference[name]["file"]
    assert list(written) == FILE_COMPARE_METRICS
    for metric, expected in theirs_expected.items():
        theirs = _num(written[metric])
        _check(theirs, expected, f"msaccucmp {metric}")
        mine = ours.values[KEY_OF[metric]]
        if math.isfinite(mine) and math.isfinite(theirs):
            assert mine == pytest.approx(theirs, abs=1e-6), metric


def test_file_compare_command_line_on_an_all_zero_golden(msaccucmp, tmp_path):
    """The plain command a user types. For an all-zero golden msaccucmp warns about the cosine only
    and then prints RelativeEuclideanDistance and the relative errors as 0.000000; we say why they
    are undefined instead."""
    np.save(tmp_path / "npu.npy", _x100)
    np.save(tmp_path / "golden.npy", np.zeros(100, np.float32))
    proc = subprocess.run([sys.executable, str(msaccucmp), "file_compare", "-m", str(tmp_path / "npu.npy"),
                           "-g", str(tmp_path / "golden.npy"), "-out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Cannot compare by Cosine Similarity. All the data is zero in" in proc.stderr
    table = _logged_table(proc.stderr, "CosineSimilarity")
    assert list(table) == FILE_COMPARE_METRICS
    assert table["RelativeEuclideanDistance"] == table["MaxRelativeError"] == table["MeanRelativeError"] == "0.000000"
    assert _result_file(tmp_path) == table
    ours = compare_arrays(_x100, np.zeros(100, np.float32))
    assert "golden is all zero: relative metrics are undefined" in ours.reason
    assert math.isnan(ours.values["red"]) and math.isnan(ours.values["mean_rel"])
