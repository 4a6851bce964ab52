"""tpu-mlir's way of judging: euclid_sim, sqnr and the EQUAL / CLOSE / SIMILAR / NOT_SIMILAR ladder
(its npz_tool compare), against a direct float64 implementation of its formulas, on the kernel and
the numpy paths, and through `accuscope compare --tolerance` on the PP-OCR classifier's outputs."""
from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest

from accuscope.engine.compare import metrics as M
from accuscope.engine.compare.thresholds import Thresholds, parse_tolerance
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope


def tpu_reference(x, y, cos_tol=0.99, euclid_tol=0.90):
    """tpu-mlir's TensorCompare.compare written out in float64; npu x, golden y (the reference:
    allclose's b and, as our brief has it, SQNR's signal)."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    if np.array_equal(x, y):
        return "EQUAL", None, None
    if np.allclose(x, y, rtol=1e-3, atol=1e-8, equal_nan=True):
        return "CLOSE", None, None
    x, y = np.nan_to_num(x, nan=0.0, posinf=1e4, neginf=-1e4), np.nan_to_num(y, nan=0.0, posinf=1e4, neginf=-1e4)
    ed = math.sqrt(np.sum((x - y) ** 2))
    sr = math.sqrt(np.sum(((x + y) / 2) ** 2)) + 1e-7
    euclid = 0.0 if math.isinf(ed) or math.isinf(sr) else 1 - ed / sr
    noise = y - x
    signal_var, noise_var = np.sum((y - y.mean()) ** 2), np.sum((noise - noise.mean()) ** 2)
    sqnr = math.inf if signal_var == 0 or noise_var == 0 else 10 * math.log10(signal_var / noise_var)
    with np.errstate(invalid="ignore"):  # a zero side: NaN, not similar (tpu-mlir says 0)
        cos = np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))
    return ("SIMILAR" if cos > cos_tol and euclid > euclid_tol else "NOT_SIMILAR"), euclid, sqnr


@pytest.fixture(autouse=True, params=["kernel", "numpy"])
def implementation(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(M, "_kernel", None)
    return request.param


def verdict(m: M.PairMetrics) -> str:
    """The ladder as Thresholds finishes it (default tolerance 0.99, 0.90)."""
    if m.tpu_verdict:
        return m.tpu_verdict
    return "SIMILAR" if m.values["cos"] > 0.99 and m.values["euclid_sim"] > 0.90 else "NOT_SIMILAR"


def check(x, y, sqnr_rel=1e-9):
    m = M.compare_arrays(x, y)
    want, euclid, sqnr = tpu_reference(x, y)
    assert verdict(m) == want
    if euclid is not None:
        assert m.values["euclid_sim"] == pytest.approx(euclid, rel=1e-9, abs=1e-12)
        assert m.values["sqnr"] == pytest.approx(sqnr, rel=sqnr_rel)
    return m


rng = np.random.default_rng(3)
BASE = rng.standard_normal(70_000)  # more than one chunk (1 << 16)


@pytest.mark.parametrize("chunk", [1 << 16, 1 << 10])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("noise", [0.0, 1e-5, 0.01, 0.2, 3.0])
def test_euclid_sqnr_and_ladder_equal_tpu_mlirs_formulas(monkeypatch, chunk, dtype, noise):
    monkeypatch.setattr(M, "CHUNK", chunk)
    y = BASE.astype(dtype)
    x = (BASE * (1 + noise * rng.standard_normal(BASE.size))).astype(dtype)
    check(x, y)


def test_float16_rounding_is_close_and_a_shift_is_not():
    y = BASE.astype(np.float32)
    assert check(y.astype(np.float16).astype(np.float32), y).tpu_verdict == "CLOSE"
    whole = np.round(y * 100).astype(np.float32)
    m = check(whole + np.float32(5), whole)
    assert m.values["sqnr"] == math.inf  # the noise is a constant: zero variance, as tpu-mlir says
    assert verdict(m) == "SIMILAR" and m.values["euclid_sim"] < 0.99
    # A noise all but constant (float32 rounding of a shift): the sums keep ~eps * sum(d^2) / var(d)
    # of the variance, here 1e-4 of it, 0.02 dB of 151 dB.
    m = check(y + np.float32(0.05), y, sqnr_rel=1e-3)
    assert 150 < m.values["sqnr"] < 153


def test_close_needs_every_element_and_counts_atol_near_zero():
    y = np.linspace(-1, 1, 5000)
    x = y * (1 + 9e-4)
    assert check(x, y).tpu_verdict == "CLOSE"
    x[4321] = y[4321] * 1.0011  # one element past rtol 1e-3
    assert check(x, y).tpu_verdict == ""
    z = np.zeros(100)
    assert check(z + 5e-9, z).tpu_verdict == "CLOSE"  # within atol 1e-8 of a zero golden
    assert check(z + 2e-8, z).tpu_verdict == ""


@pytest.mark.parametrize("x, y", [
    (np.zeros(64), np.zeros(64)),  # EQUAL
    (np.zeros(64), np.ones(64)),  # euclid 1 - 8/4 = -1; sqnr: constant golden, inf
    (np.ones(64), np.zeros(64)),
    (np.full(64, 2.0), np.full(64, 3.0)),  # constants: both variances 0
    (np.full(64, 0.1), np.arange(64.0)),  # constant npu: the noise varies as the golden does
    (-np.arange(64.0), np.arange(64.0)),  # (x + y)/2 = 0: only the 1e-7 guard
], ids=["zeros", "npu-zero", "golden-zero", "constants", "constant-npu", "opposite"])
def test_degenerate_pairs(x, y):
    check(x, y)


def test_opposite_sides_have_the_guard_only():
    m = check(-np.arange(64.0), np.arange(64.0))
    assert m.values["euclid_sim"] == pytest.approx(1 - math.sqrt(4 * np.sum(np.arange(64.0) ** 2)) / 1e-7)


def test_nan_and_inf_at_the_same_positions_count_as_tpu_mlir_replaces_them():
    y = BASE[:3000].copy()
    x = y * (1 + 0.05 * rng.standard_normal(y.size))
    for v, at in ((np.nan, [3, 70]), (np.inf, [5, 9, 11]), (-np.inf, [100])):
        x[at], y[at] = v, v
    m = check(x, y)
    assert m.reason.startswith("npu has 2 NaN and 4 inf")
    y2 = BASE[:3000].copy()
    y2[[5, 9]] = np.inf
    assert check(y2.copy(), y2).tpu_verdict == "EQUAL"  # inf == inf for array_equal
    y2[70] = np.nan
    assert check(y2.copy(), y2).tpu_verdict == "CLOSE"  # NaN != NaN, but allclose(equal_nan)


def test_nan_at_different_positions_is_not_similar():
    y = BASE[:300].copy()
    x = y.copy()
    x[7] = np.nan
    m = M.compare_arrays(x, y)
    assert m.tpu_verdict == "" and math.isnan(m.values["euclid_sim"]) and math.isnan(m.values["sqnr"])
    assert verdict(m) == "NOT_SIMILAR"
    # where we part: tpu-mlir reads the NaN as 0 and finds the rest similar; we never let a NaN
    # on one side pass as a plausible number (metrics.md section 2)
    assert tpu_reference(x, y)[0] == "SIMILAR"


def test_tolerance_is_two_thresholds_kept_in_task_json_form():
    assert parse_tolerance(" 0.98 , 0.8") == (0.98, 0.8)
    for bad in ("0.99", "a,b", "0.9,0.9,0.9", "nan,0.9"):
        with pytest.raises(ValueError, match="COS,EUCLID"):
            parse_tolerance(bad)
    t = Thresholds()
    assert t.tolerance() == (0.99, 0.90)
    t.set_tolerance(0.95, 0.8)
    assert str(t) == "cos < 0.95, euclid_sim < 0.8"  # tpu-mlir's judging: msit's other thresholds are not asked for
    assert t.ladder and not Thresholds().ladder
    back = Thresholds.from_dict(t.to_dict())
    assert back.tolerance() == (0.95, 0.8) and back.ladder and str(back) == str(t)


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_cli_tolerance_judges_cls_outputs_as_tpu_mlir(tmp_path, cls_run, implementation):  # noqa: F811
    golden = {out: a for _, _, out, a in cls_run if a.dtype == np.float32}
    npu = {k: a.astype(np.float16).astype(np.float32) for k, a in golden.items()}
    broken = sorted(k for k, a in golden.items() if a.size > 100)[0]
    npu[broken] = npu[broken] + np.random.default_rng(1).standard_normal(npu[broken].shape).astype(np.float32)
    np.savez(tmp_path / "npu.npz", **npu)
    np.savez(tmp_path / "golden.npz", **golden)
    env = {"ACCUSCOPE_KERNEL": "numpy"} if implementation == "numpy" else {}
    r = accuscope("compare", "--npu", tmp_path / "npu.npz", "--golden", tmp_path / "golden.npz",
                  "--out", tmp_path / "task", "--tolerance", "0.99,0.90", **env)  # type: ignore[arg-type]  # env: variables only
    assert r.returncode in (0, 1), r.stderr
    task = tmp_path / "task"
    meta = json.loads((task / "task.json").read_text())
    assert meta["thresholds"]["euclid_sim"] == {"fail_if": "<", "value": 0.9}
    assert meta["thresholds"]["cos"] == {"fail_if": "<", "value": 0.99}
    rows = read_rows(task / meta["csv"])
    assert {"EuclideanSimilarity", "SQNR", "TpuVerdict"} <= set(rows[0])
    by_name = {row["NPUDump"]: row for row in rows}
    assert len(by_name) == len(golden)
    for name, row in by_name.items():
        want, euclid, sqnr = tpu_reference(npu[name], golden[name])
        assert row["TpuVerdict"] == want, name
        if euclid is not None:
            assert float(row["EuclideanSimilarity"]) == pytest.approx(euclid, rel=1e-5, abs=1e-9)
            if math.isfinite(sqnr):
                assert float(row["SQNR"]) == pytest.approx(sqnr, rel=1e-5)
        # the tolerance judges as tpu-mlir: fails exactly what it does not pass, nothing else
        assert (row["IsPrecisionError"] == "YES") == (want == "NOT_SIMILAR"), name
    verdicts = [row["TpuVerdict"] for row in rows]
    assert by_name[broken]["TpuVerdict"] == "NOT_SIMILAR" and by_name[broken]["IsPrecisionError"] == "YES"
    assert {"CLOSE", "SIMILAR", "NOT_SIMILAR"} <= set(verdicts)  # float16 rounding: 233, 18, 1
    assert "judged as tpu-mlir's npz_tool compare --tolerance 0.99,0.9 (fails: NOT_SIMILAR)" in r.stdout
    assert f"NOT_SIMILAR {verdicts.count('NOT_SIMILAR')}" in r.stdout
    task = load_task(tmp_path / "task")  # the tolerance comes back from task.json, the verdicts with it
    assert task.thresholds is not None
    assert task.thresholds.tolerance() == (0.99, 0.9)
    assert task.table is not None
    assert list(task.table.columns["tpu_verdict"]) == verdicts
    mask = task.table.filter_mask('tpu_verdict == "NOT_SIMILAR"')
    assert list(task.table.columns["npu_op"][mask]) == [broken]
    r = accuscope("compare", "--npu", tmp_path / "npu.npz", "--golden", tmp_path / "golden.npz",
                  "--out", tmp_path / "bad", "--tolerance", "0.99")
    assert r.returncode == 2 and "--tolerance" in r.stderr and "Traceback" not in r.stderr


def test_op_table_shows_euclid_sqnr_and_the_verdict(implementation):
    from accuscope.engine.compare.results import ResultTable
    from support.optable import lines, run

    y = BASE[:4096]
    pairs = {"same": y, "fp16": y.astype(np.float16).astype(np.float64), "noisy": y + 0.3 * rng.standard_normal(y.size)}
    rows = []
    for name, x in pairs.items():
        m = M.compare_arrays(x, y)
        rows.append(dict(npu_op=name, golden_op=name, tensor=f"{name}:output:0", cos=m.values["cos"],
                         euclid_sim=m.values["euclid_sim"], sqnr=m.values["sqnr"], tpu_verdict=m.tpu_verdict,
                         npu_nonfinite=0, golden_nonfinite=0))
    thresholds = Thresholds()
    thresholds.set_tolerance(0.99, 0.90)

    async def test(pilot, w, app):
        text = lines(w)
        assert re.search(r"cos\s+euclid\s+sqnr\s+verdict", text[0])
        assert "EQUAL" in text[1] and "inf" in text[1]
        assert "CLOSE" in text[2]
        assert text[3].startswith("✗") and "NOT_SIMILAR" in text[3]  # euclid_sim < 0.90 fails
    run(test, size=(120, 10), table=ResultTable.from_rows(rows), thresholds=thresholds)
