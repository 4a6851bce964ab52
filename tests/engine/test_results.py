"""Result table: construction, sorting, filter expressions, search, next failing row, thresholds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import NUMERIC_METRICS
from accuscope.engine.compare.results import FilterError, ResultTable
from accuscope.engine.compare.thresholds import Thresholds, parse_assignment
from support.narrow import present

nan = math.nan
TYPES = ["Conv2D", "Relu", "Add", "MatMul", "TransData", "Data", "Cast", "Softmax", "LayerNorm"]


def _random_rows(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    types = rng.choice(TYPES, n)
    values = {k: rng.random(n) for k in NUMERIC_METRICS}
    values["cos"] = 1 - rng.random(n) ** 3 * 0.2
    for k in values:
        values[k][rng.random(n) < 0.05] = nan
    rows = []
    for i in range(n):
        name = f"layer{i // 3}/{types[i].lower()}_{i}"
        rows.append(dict(type=str(types[i]), npu_op=name, golden_op="*" if i % 17 == 0 else f"g_{name}",
                         tensor=f"{name}:{'input' if i % 4 == 0 else 'output'}:0", shape="[1,64,56,56]",
                         op_seq=i // 3 if i % 5 else -1, std="(0.100;0.200),(0.100;0.200)",
                         **{k: float(v[i]) for k, v in values.items()},
                         Plug=f"{values['kl'][i]:.4f}" if i % 7 else "n/a"))
    return rows


@pytest.fixture(scope="module")
def big() -> ResultTable:
    return ResultTable.from_rows(_random_rows(50_000), custom=["Plug"])


def _small(**columns) -> ResultTable:
    n = len(next(iter(columns.values())))
    rows = [{k: v[i] for k, v in columns.items()} for i in range(n)]
    return ResultTable.from_rows(rows, custom=[k for k in columns if k[0].isupper()])


# ---- construction ---------------------------------------------------------------------------------
def test_from_rows_fills_defaults_and_derives_flags():
    t = ResultTable.from_rows([
        dict(type="Conv2D", npu_op="conv1", golden_op="conv1", tensor="conv1:output:0", cos=0.99, kl=0.1),
        dict(type="Relu", npu_op="relu1", golden_op="*", tensor="relu1:input:0", Alg="0.5"),
    ], custom=["Alg"])
    assert len(t) == 2
    row = t.row(1)
    assert row["index"] == 1 and row["op_seq"] == -1 and row["npu_address"] == "NaN"
    assert row["io"] == "input" and row["is_npu_only"] is True and row["fail"] is False
    assert math.isnan(row["cos"]) and row["std"] == "" and row["npu_nonfinite"] == -1
    assert row["Alg"] == "0.5" and t.row(0)["Alg"] == ""
    assert t.metric_keys == ["cos", "kl"]  # display order, only metrics that were given
    assert t.columns["type"].dtype == object and t.columns["cos"].dtype == np.float64
    assert len(ResultTable.empty()) == 0 and ResultTable.empty().metric_keys == []


def test_append_rows_grows_like_one_big_table():
    rows = _random_rows(3000, seed=3)
    whole = ResultTable.from_rows(rows, custom=["Plug"])
    live = ResultTable.empty(custom=["Plug"])
    for k in range(0, len(rows), 7):
        live.append_rows(rows[k:k + 7])
    judgement.apply(live, Thresholds())  # replacing a column between appends must not lose it
    live.append_rows([])
    assert len(live) == len(whole)
    for key, col in whole.columns.items():
        if key != "fail":
            assert np.array_equal(col, live.columns[key], equal_nan=col.dtype.kind == "f"), key
    assert np.array_equal(live.columns["index"], np.arange(3000))
    assert len(live._buf["cos"]) < 2 * 3000 + 16  # capacity doubles, it does not explode
    assert live.search("layer999/", None, -1) is not None


# ---- sorting --------------------------------------------------------------------------------------
def test_sort_puts_nan_last_both_ways_and_keeps_ties_in_order():
    t = _small(npu_op=list("abcdef"), cos=[0.5, nan, 0.5, 0.9, nan, 0.1])
    assert t.sort_order("cos").tolist() == [5, 0, 2, 3, 1, 4]
    assert t.sort_order("cos", descending=True).tolist() == [3, 0, 2, 5, 1, 4]
    assert t.sort_order("CosineSimilarity", rows=[4, 3, 2, 1]).tolist() == [2, 3, 4, 1]


def test_sort_text_case_insensitive_empty_last_and_plugin_numbers_first():
    t = _small(type=["relu", "Add", "", "conv2d", "ADD"], Alg=["0.5", "oops", "", "-1e3", "0.25"])
    assert t.sort_order("type").tolist() == [1, 4, 3, 0, 2]
    assert t.sort_order("OpType", descending=True).tolist() == [0, 3, 1, 4, 2]
    assert t.sort_order("Alg").tolist() == [3, 4, 0, 1, 2]
    assert t.sort_order("Alg", descending=True).tolist() == [0, 4, 3, 1, 2]


def test_sort_unknown_op_sequence_last_and_unknown_column_named():
    t = _small(op_seq=[3, -1, 1, 2])
    assert t.sort_order("op_seq").tolist() == [2, 3, 0, 1]
    assert t.sort_order("op_seq", descending=True).tolist() == [0, 3, 2, 1]
    with pytest.raises(FilterError, match="unknown column 'coss'; did you mean cos"):
        t.sort_order("coss")


def test_sort_big_table_matches_numpy(big):
    cos = big.columns["cos"]
    order = big.sort_order("cos", descending=True)
    finite = order[: np.count_nonzero(~np.isnan(cos))]
    assert np.all(np.diff(cos[finite]) <= 0) and np.isnan(cos[order[len(finite):]]).all()
    view = np.flatnonzero(big.columns["type"] == "Conv2D")
    assert sorted(big.sort_order("kl", rows=view).tolist()) == view.tolist()


# ---- filter expressions ---------------------------------------------------------------------------
def _c(t, k):
    return t.columns[k]


def _lower(t, k):
    return np.array([s.lower() for s in t.columns[k]])


def _plug(t):
    out = []
    for s in t.columns["Plug"]:
        try:
            out.append(float(s))
        except ValueError:
            out.append(nan)
    return np.array(out)


VALID = [
    ("cos < 0.99", lambda t: _c(t, "cos") < 0.99),
    ("0.9 < cos < 0.99", lambda t: (_c(t, "cos") > 0.9) & (_c(t, "cos") < 0.99)),
    ('cos < 0.99 and type == "Conv2D"', lambda t: (_c(t, "cos") < 0.99) & (_c(t, "type") == "Conv2D")),
    ('CosineSimilarity >= 0.95 or OPTYPE == "relu"',
     lambda t: (_c(t, "cos") >= 0.95) | (_c(t, "type") == "Relu")),
    ('not (red > 0.5) AND kl <= 0.2', lambda t: ~(_c(t, "red") > 0.5) & (_c(t, "kl") <= 0.2)),
    ("cos != 0.5", lambda t: ~np.isnan(_c(t, "cos"))),
    ('"CONV" in name', lambda t: np.char.find(_lower(t, "npu_op"), "conv") >= 0),
    ('"relu" not in op and io == "output"',
     lambda t: (np.char.find(_lower(t, "npu_op"), "relu") < 0) & (_c(t, "io") == "output")),
    ('type in ("Conv2D", "matmul")', lambda t: np.isin(_c(t, "type"), ["Conv2D", "MatMul"])),
    ('golden == "*"', lambda t: _c(t, "golden_op") == "*"),
    ("is_npu_only", lambda t: _c(t, "golden_op") == "*"),
    ("isnan(kl) or isnan(rmse)", lambda t: np.isnan(_c(t, "kl")) | np.isnan(_c(t, "rmse"))),
    ("nan", lambda t: np.isnan(np.stack([_c(t, k) for k in NUMERIC_METRICS])).any(axis=0)),
    ("not nan", lambda t: ~np.isnan(np.stack([_c(t, k) for k in NUMERIC_METRICS])).any(axis=0)),
    ("max_abs > 10 * mean_abs", lambda t: _c(t, "max_abs") > 10 * _c(t, "mean_abs")),
    ("abs(cos - 1) > 0.1", lambda t: np.abs(_c(t, "cos") - 1) > 0.1),
    ("op_seq >= 100 and op_seq < 200", lambda t: (_c(t, "op_seq") >= 100) & (_c(t, "op_seq") < 200)),
    ("OpSequence < 3", lambda t: (_c(t, "op_seq") < 3) & (_c(t, "op_seq") >= 0)),
    ("index < 10 or Index >= 49990", lambda t: (np.arange(len(t)) < 10) | (np.arange(len(t)) >= 49990)),
    ("Plug > 0.5", lambda t: _plug(t) > 0.5),
    ('plug == "N/A"', lambda t: _c(t, "Plug") == "n/a"),
    ("npu_op == golden_op", lambda t: _c(t, "npu_op") == _c(t, "golden_op")),
    ("fail", lambda t: _c(t, "fail")),
    ("not fail and cos < 0.99", lambda t: ~_c(t, "fail") & (_c(t, "cos") < 0.99)),
    ("True", lambda t: np.ones(len(t), bool)),
    ("  ", lambda t: np.ones(len(t), bool)),
]


@pytest.mark.parametrize("expression, expected", VALID, ids=[e for e, _ in VALID])
def test_filter_matches_numpy(big, expression, expected):
    judgement.apply(big, Thresholds())
    with np.errstate(invalid="ignore"):
        want = expected(big)
    got = big.filter_mask(expression)
    assert got.dtype == bool and got.shape == (len(big),)
    assert np.array_equal(got, want)


ERRORS = [
    ("cos <", "incomplete: '<' needs something after it", 5),
    ("cos < 0.9 and", "incomplete: 'and' needs something after it", 13),
    ("coss < 0.9", "unknown column 'coss'; did you mean cos?", 0),
    ("CosineSimilarty > 1", "did you mean CosineSimilarity?", 0),
    ("type < 5", 'type holds text; compare it with text in quotes, e.g. type < "5"', 7),
    ('cos == "high"', 'cos holds numbers; compare it with a number, not "high"', 7),
    ('5 > type', 'type holds text; compare it with text in quotes', 0),
    ('Plug > "0.5" and Plug < 1 and fail == "yes"', 'fail is true or false; write fail or not fail', 38),
    ("cos = 0.5", "use == to compare", 4),
    ("cos < 1 && fail", "use 'and' / 'or'", 8),
    ('name ~ "conv"', '"conv" in name', 5),
    ("!fail", "use 'not'", 0),
    ("(cos < 1", "unbalanced parentheses", 0),
    ("cos < 'x", "a quoted text is not closed", 6),
    ("cos", "'cos' is not a condition, e.g. cos < 0.99", 0),
    ("cos < 1 or red", "'red' is not a condition", 11),
    ('name.startswith("x")', 'write "text" in column', 0),
    ("exp(cos) > 1", "'exp()' is not available", 0),
    ('5 in name', "'in' looks for a text inside a text column", 0),
    ('cos == nan', "isnan(cos)", 7),
    ("cos[0] > 1", "is not supported", 0),
]


@pytest.mark.parametrize("expression, message, position", ERRORS, ids=[e for e, _, _ in ERRORS])
def test_filter_errors_say_what_is_wrong_and_where(big, expression, message, position):
    with pytest.raises(FilterError) as info:
        big.filter_mask(expression)
    assert message in str(info.value)
    assert info.value.position == position
    assert f"(at column {position + 1})" in str(info.value)


# ---- search and next failing ----------------------------------------------------------------------
def test_search_wraps_and_goes_backwards():
    t = _small(npu_op=["conv1", "relu1", "Conv2", "add", "conv3"], type=["Conv2D", "Relu", "Conv2D", "Add", "X"],
               golden_op=["a", "b", "c", "d", "CONVX"])
    view = np.array([4, 3, 2, 1, 0])  # e.g. sorted descending
    assert t.search("CONV", view, -1) == 0
    assert t.search("conv", view, 0) == 2  # view[1] = row 3 "add" does not match
    assert t.search("conv", view, 4) == 0  # wraps past the end
    assert t.search("conv", view, 2, backwards=True) == 0
    assert t.search("conv", view, 0, backwards=True) == 4  # wraps past the top
    assert t.search("relu", view, 3) == 3  # the only match is the start itself: found last
    assert t.search("conv2d", view, -1) == 2  # type column is searched too
    assert t.search("nothing", view, 0) is None and t.search("", view, 0) is None
    assert t.search("add", [], 0) is None


def test_search_big_table(big):
    view = big.sort_order("cos")
    pos = big.search("layer12345/", view, -1)
    assert big.columns["npu_op"][view[pos]].startswith("layer12345/")


def test_next_failing_follows_execution_order_in_a_sorted_view():
    t = _small(cos=[0.999, 0.5, 0.999, 0.9, 0.95, 0.999], type=["Add"] * 6)
    judgement.apply(t, Thresholds())
    assert t.columns["fail"].tolist() == [False, True, False, True, True, False]
    view = t.sort_order("cos")  # rows 1, 3, 4, 0, 2, 5
    assert view.tolist() == [1, 3, 4, 0, 2, 5]
    assert view[t.next_failing(view, -1)] == 1
    assert view[t.next_failing(view, 0)] == 3  # after row 1 comes row 3, not the next in the view
    assert view[t.next_failing(view, 1)] == 4
    assert view[t.next_failing(view, 2)] == 1  # wraps
    assert view[t.next_failing(view, 4)] == 3  # from row 2 (passing), the next failing is row 3
    assert t.next_failing(np.array([0, 2, 5]), 0) is None


# ---- thresholds -----------------------------------------------------------------------------------
def test_default_thresholds_are_msits():
    th = Thresholds()
    assert [str(t) for t in th.items] == ["cos < 0.99", "red > 0.05", "kl > 0.005", "rmse > 1",
                                         "mean_rel > 1"]


def test_thresholds_flag_rows_ignore_nan_and_exempt_inputs_layout_and_device_only():
    t = _small(type=["Conv2D", "Conv2D", "TransData", "Data", "Relu", "MatMul", "Add"],
               golden_op=["a", "b", "c", "d", "*", "f", "g"],
               cos=[0.98, nan, 0.5, 0.5, 0.5, 0.999, 0.999],
               kl=[0.0, 0.0, 0.0, 0.0, 0.0, 0.01, nan],
               rmse=[0.1, nan, 0.1, 0.1, 0.1, 0.1, 2.0])
    th = Thresholds()
    judgement.apply(t, th)
    assert t.columns["fail"].tolist() == [True, False, False, False, False, True, True]
    assert judgement.broken_keys(t, th, 0) == ["cos"] and judgement.broken_keys(t, th, 5) == ["kl"] and judgement.broken_keys(t, th, 6) == ["rmse"]
    assert judgement.broken_keys(t, th, 2) == [] and judgement.broken_keys(t, th, 1) == []


def test_more_nan_inf_on_the_npu_side_fails_even_with_nan_metrics():
    """An fp16 overflow leaves every metric NaN: the row still fails, and says why."""
    t = _small(type=["Pow", "Pow", "Mask", "Relu"], golden_op=["a", "b", "c", "d"],
               cos=[nan, 0.999, nan, nan], npu_nonfinite=[138, 0, 4, -1], golden_nonfinite=[0, 0, 4, -1])
    th = Thresholds()
    judgement.apply(t, th)
    assert t.columns["fail"].tolist() == [True, False, False, False]
    assert judgement.broken_keys(t, th, 0) == ["npu_nonfinite"]


def test_thresholds_editing_and_round_trip():
    th = Thresholds()
    th.set(*parse_assignment("cos=0.98"))
    th.set(*parse_assignment("MaxAbsoluteError=2.5"))
    th.set(*parse_assignment("kl=off"))
    assert present(th.get("cos")).value == 0.98 and th.get("kl") is None
    assert present(th.get("max_abs")).op == ">" and present(th.get("max_abs")).value == 2.5
    again = Thresholds.from_dict(th.to_dict())
    assert again == th
    assert Thresholds.from_dict(None) == Thresholds() and Thresholds.from_dict({}).items == []
    t = _small(type=["Add", "Add"], cos=[0.985, 0.97], max_abs=[3.0, 0.0], kl=[9.0, 9.0])
    judgement.apply(t, th)
    assert t.columns["fail"].tolist() == [True, True] and judgement.broken_keys(t, th, 0) == ["max_abs"]


@pytest.mark.parametrize("text, message", [
    ("coss=0.9", "unknown metric 'coss' for a threshold; did you mean cos?"),
    ("std=1", "unknown metric 'std'"),
    ("cos", "expected NAME=VALUE"),
    ("cos=high", "'high' is not a number"),
    ("cos=nan", "NaN is not a threshold"),
])
def test_threshold_assignment_errors(text, message):
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        parse_assignment(text)


def test_every_result_column_has_one_record():
    from accuscope.engine.compare.columns import METRIC
    from accuscope.engine.compare.fields import CSV_NAMES, FIELD, FIELD_TABLE
    from accuscope.engine.compare.results import COLUMNS
    keys = [k for k, _ in COLUMNS]
    assert len(keys) == len(set(keys)) and set(keys) == set(FIELD) | set(METRIC) and not set(FIELD) & set(METRIC)
    assert all(f.kind in ("int", "text", "bool") for f in FIELD_TABLE)
    # a CSV name read back names one column: the sides' DataType and Address are placed by position
    assert "DataType" not in CSV_NAMES and "Address" not in CSV_NAMES and CSV_NAMES["NPUDump"] == "npu_op"


def test_golden_ops_of_a_ground_truth():
    from accuscope.engine.compare.pair import DEVICE_ONLY, golden_ops
    assert golden_ops("conv1,bn1,relu1") == ["conv1", "bn1", "relu1"]
    assert golden_ops(DEVICE_ONLY) == [] and golden_ops("") == [] and golden_ops("conv1") == ["conv1"]
