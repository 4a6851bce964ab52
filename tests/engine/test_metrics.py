"""The metrics against independent, straightforward formulas (metrics.md section 1) and every
degenerate case of section 2, each through both implementations: the compiled kernel and the
numpy fallback that runs where no C compiler was at install."""
from __future__ import annotations

import math

import numpy as np
import pytest

import accuscope.engine.compare.metrics as M
from accuscope.engine.compare.metrics import compare_arrays

EPS64 = np.finfo(np.float64).eps
EPS32 = np.finfo(np.float32).eps


def reference(x, y):
    """Each metric straight from its definition, whole arrays in float64."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    d = x - y
    r = np.where(np.abs(y) > EPS64, np.abs(x / np.where(y == 0, 1, y) - 1), 0.0)

    def dist(v):
        lo, hi = v.min(), v.max()
        s = (v - lo) / (hi - lo) if hi != lo else v.copy()
        s = np.maximum(s, EPS32)
        return s / s.sum()
    px, py = dist(x), dist(y)
    kl = float(np.sum(px * np.log(px / py)))
    return {
        "cos": min(float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))), 1.0),
        "red": float(np.sqrt(np.sum(d * d) / np.sum(y * y))),
        "max_abs": float(np.max(np.abs(d))), "mean_abs": float(np.mean(np.abs(d))),
        "rmse": float(np.sqrt(np.mean(d * d))), "max_rel": float(r.max()), "mean_rel": float(r.sum() / r.size),
        "acc_rel": float(r.sum()), "kl": 0.0 if abs(kl) < EPS64 else kl,
        "rel_0.1%": float(np.mean(r > 0.001)), "rel_0.5%": float(np.mean(r > 0.005)),
        "std": "({};{}),({};{})".format(*(f"{v:.3f}" if abs(v) >= 0.001 else "0.000"
                                          for v in (x.mean(), x.std(), y.mean(), y.std()))),
    }


@pytest.fixture(autouse=True, params=["kernel", "numpy"])
def implementation(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(M, "_kernel", None)
    return request.param


def assert_matches(got, want, rel=1e-9):
    for key, value in want.items():
        if key == "std":
            assert got.std == value
        else:
            assert got.values[key] == pytest.approx(value, rel=rel, abs=1e-12), key


@pytest.mark.parametrize("n, chunk", [(1000, M.CHUNK), (300_001, 1 << 12), (5, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_metrics_equal_the_definitions_single_and_many_chunks(monkeypatch, n, chunk, dtype):
    monkeypatch.setattr(M, "CHUNK", chunk)
    rng = np.random.default_rng(n)
    y = (rng.standard_normal(n) * 3 + 1).astype(dtype)
    y[::97] = 0  # golden zeros: relative error counts them as 0
    x = (y.astype(np.float64) + rng.standard_normal(n) * 0.02).astype(dtype)
    got = compare_arrays(x, y)
    assert got.reasons == []
    assert_matches(got, reference(x, y), rel=1e-7 if n > 1000 else 1e-9)


def test_integer_tensors_are_compared_as_floats():
    y = np.arange(-50, 50, dtype=np.int32).reshape(10, 10)
    x = (y + (y % 3 == 0)).astype(np.int8)
    assert_matches(compare_arrays(x, y), reference(x, y))


def test_kl_is_blind_to_scale_and_offset():
    y = np.random.default_rng(1).random(1000)
    assert compare_arrays(2 * y + 5, y).values["kl"] == 0.0


def test_identical_tensors():
    y = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    v = compare_arrays(y, y.copy()).values
    assert v["cos"] == 1.0 and v["max_abs"] == v["rmse"] == v["kl"] == v["max_rel"] == v["red"] == 0.0


def test_empty_tensor_has_no_metrics():
    got = compare_arrays(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))
    assert got.reasons == ["empty tensor"] and math.isnan(got.values["cos"])


def test_scalar_cosine_is_one_with_a_reason():
    got = compare_arrays(np.array([2.0]), np.array([3.0]))
    assert got.values["cos"] == 1.0 and "this tensor is scalar" in got.reasons
    assert got.values["max_abs"] == 1.0


def test_all_zero_golden_makes_relative_metrics_undefined_not_zero():
    got = compare_arrays(np.ones(10), np.zeros(10))
    assert math.isnan(got.values["cos"]) and math.isnan(got.values["red"]) and math.isnan(got.values["mean_rel"])
    assert "all the data is zero in the golden tensor" in got.reason
    assert "golden is all zero" in got.reason and got.values["max_abs"] == 1.0


def test_both_all_zero_agree():
    v = compare_arrays(np.zeros(10), np.zeros(10)).values
    assert v["cos"] == 1.0 and v["red"] == 0.0 and v["mean_rel"] == 0.0


def test_npu_all_zero_cosine_nan_with_reason():
    got = compare_arrays(np.zeros(10), np.ones(10))
    assert math.isnan(got.values["cos"]) and "all the data is zero in the NPU tensor" in got.reason
    assert got.values["red"] == 1.0


def test_nan_at_same_positions_compares_the_finite_rest():
    y = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    x = y + np.float32(0.01)
    x[[3, 50]] = y[[3, 50]] = np.nan
    x[7] = y[7] = np.inf
    got = compare_arrays(x, y)
    keep = np.isfinite(y)
    assert_matches(got, {k: v for k, v in reference(x[keep], y[keep]).items()})
    assert got.npu_nonfinite == got.golden_nonfinite == 3
    assert "npu has 2 NaN and 1 inf, golden has 2 NaN and 1 inf at the same positions" in got.reason


def test_nan_on_one_side_never_gives_a_plausible_number():
    y = np.ones(100, np.float32)
    x = y.copy()
    x[10] = np.nan
    got = compare_arrays(x, y)
    assert all(math.isnan(v) for v in got.values.values())
    assert got.npu_nonfinite == 1 and got.golden_nonfinite == 0 and "different positions" in got.reason


def test_bool_tensors_only_get_cosine_and_red():
    x = np.array([True, False, True, True])
    y = np.array([True, False, False, True])
    got = compare_arrays(x, y)
    ref = reference(x, y)
    assert got.values["cos"] == pytest.approx(ref["cos"]) and got.values["red"] == pytest.approx(ref["red"])
    assert math.isnan(got.values["max_abs"]) and "bool tensor" in got.reason


def test_element_count_mismatch_names_both_shapes():
    got = compare_arrays(np.ones((2, 3)), np.ones((2, 4)))
    assert "[2, 3]" in got.reason and "[2, 4]" in got.reason and math.isnan(got.values["cos"])


def test_large_offset_std_is_stable():
    y = np.full(1000, 1e4) + np.random.default_rng(4).standard_normal(1000) * 0.01
    got = compare_arrays(y, y)
    assert got.std == f"({y.mean():.3f};{y.std():.3f}),({y.mean():.3f};{y.std():.3f})"


@pytest.mark.parametrize("spread", [0.02, 0.3, 3.0])
def test_kl_where_the_sides_disagree_a_little_or_a_lot(monkeypatch, spread):
    """The series covers elements whose scaled values are within ~20% of each other; the rest take
    the logarithm. Mixes of both, across chunks, still give the definition's KL."""
    monkeypatch.setattr(M, "CHUNK", 1 << 12)
    rng = np.random.default_rng(5)
    y = rng.random(50_000).astype(np.float32)
    x = (y * np.exp(rng.standard_normal(y.size) * spread)).astype(np.float32)
    assert_matches(compare_arrays(x, y), reference(x, y), rel=1e-9)


@pytest.mark.parametrize("shift", [0.0, -1e-3])
def test_kl_of_relu_outputs_whose_zeros_meet_noise(shift):
    """Zeros of one side against small values of the other: ratios of the scaled values up to
    1/eps32, the elements the logarithm (not the series) handles."""
    rng = np.random.default_rng(8)
    g = rng.standard_normal(70_000).astype(np.float32)
    y = np.maximum(g, 0)
    x = (np.maximum(g + rng.standard_normal(g.size).astype(np.float32) * 1e-3, 0) + shift).astype(np.float32)
    assert_matches(compare_arrays(x, y), reference(x, y), rel=1e-9)



def kl_extended(x, y):
    """The definition's KL in extended precision, as sum(py f(px/py)), f(r) = r ln r - r + 1."""
    def p(v):
        v = np.asarray(v, np.longdouble)
        s = np.maximum((v - v.min()) / (v.max() - v.min()), np.longdouble(EPS32))
        return s / s.sum()
    px, py = p(x), p(y)
    r = px / py
    return float(np.sum(py * (r * np.log(r) - r + 1)))


def test_kl_where_most_elements_need_the_logarithm():
    """Unrelated sides: scaled values apart by up to 1/eps32 both ways, the logarithm's domain."""
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal(30_000), rng.standard_normal(30_000) ** 3
    x[::7] = x.min()  # elements on the eps floor of one side, not of the other
    assert compare_arrays(x, y).values["kl"] == pytest.approx(kl_extended(x, y), rel=1e-12)


def test_kl_keeps_its_digits_when_the_sides_nearly_agree():
    """KL ~ 6e-14 here; written as sum(px ln(px/py)) in float64 it is wrong in the third digit."""
    rng = np.random.default_rng(7)
    y = rng.random(20_000) + 0.5
    x = y * (1 + rng.standard_normal(y.size) * 1e-7)

    want = kl_extended(x, y)
    assert 1e-16 < want < 1e-12
    assert compare_arrays(x, y).values["kl"] == pytest.approx(want, rel=1e-6)
