"""The compiled dump.json scanner (engine/sources/_dumpscan.c) and its Python twin (msprobe._scan over
msprobe._parse) give the same columns, bit for bit, for every valid document: numbers of every shape
(integers of 1 to 5,000 digits, -0, exponents, floats past float's range, NaN and Infinity), strings
with escapes, a call named twice, nesting. The rules where JSON leaves a choice (what json.loads and
float() make of the text, as msprobe's own compare reads it):

- a call named twice in "data": one call, where its name first stands, with the last one's tensors;
- an integer statistic: float(int), correctly rounded; past float's range (-)inf, past Python's int()
  digit limit too; `-0` is the integer 0, so 0.0 (`-0.0` and `-0e0` are floats: -0.0);
- the outcome never depends on the build: with or without the scanner, with or without orjson.

The documents are written as text here (json.dumps would never write -0, a 5,000-digit integer or a
key twice). Where the scanner returns None (an escape where a value matters, a key twice in an object
it walks, a statistic as text, nesting past its depth), Python reads the text: the columns are then
Python's, and the test holds the end-to-end columns (msprobe.recorded) alike too."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accuscope.engine.sources import msprobe
from support.narrow import present

needs_scanner = pytest.mark.skipif(msprobe._dumpscan is None, reason="no compiled scanner (test_kernel says why)")
NAMES = ("calls", "call_of", "slot", "index", "names", "dtypes", "shapes", "stats", "has", "md5", "data_name",
         "values")


def python_columns(raw: bytes, *, orjson: bool = True):
    """The Python twin's columns (None where `read` would not give them), through msprobe's own parse."""
    saved = msprobe._orjson
    if not orjson:
        msprobe._orjson = lambda: None  # type: ignore[assignment]  # no orjson: a stand-in for the cached import
    try:
        doc, _why = msprobe._parse(raw)
    finally:
        msprobe._orjson = saved
    if doc is None or not isinstance(doc.get("data"), dict):
        return None
    return msprobe._scan(doc["data"])


def assert_same(a, b) -> None:
    """The same columns; statistics the same bits (-0.0 is not 0.0), NaN where either is NaN."""
    assert (a is None) == (b is None)
    if a is None:
        return
    for name, x, y in zip(NAMES, a, b):
        if name == "stats":
            x, y = np.frombuffer(x), np.frombuffer(y)
            assert np.array_equal(np.isnan(x), np.isnan(y)), name
            known = ~np.isnan(x)
            assert np.array_equal(x[known], y[known]) and np.array_equal(np.signbit(x[known]), np.signbit(y[known])), \
                (name, x, y)
        elif name == "values":  # a value's JSON text: as written (the scanner) or as json writes it (Python)
            assert [v if v is None else msprobe.raw_value_text(v) for v in x] == \
                [v if v is None else msprobe.raw_value_text(v) for v in y], name
        else:
            assert x == y, name


# ---- JSON text, written by hand ----------------------------------------------------------------------
def obj(pairs) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def text(value: str, escape: bool = False) -> str:
    """A JSON string; `escape`: every non-ASCII character as \\uXXXX, and a `/` as `\\/`."""
    out = json.dumps(value, ensure_ascii=escape)
    return out.replace("/", "\\/") if escape else out


def integer(digits: int):
    """Integers of exactly `digits` digits, either sign."""
    return st.tuples(st.booleans(), st.integers(1, 9), st.integers(0, 9)).map(
        lambda t: ("-" if t[0] else "") + str(t[1]) + str(t[2]) * (digits - 1))


numbers = st.one_of(
    st.sampled_from(["0", "-0", "0.0", "-0.0", "-0e0", "0e5", "-0E-3", "1e400", "-1e400", "1e-400", "-1e-400",
                     "1E+2", "2.5e-3", "NaN", "Infinity", "-Infinity", "9007199254740993", "18446744073709551616",
                     "-9223372036854775809", "1.7976931348623157e308", "1.7976931348623159e308", "4.9e-324",
                     "2.4703282292062327e-324", "0.1", "123456789012345678901234567890"]),
    st.integers(1, 5000).flatmap(integer),
    st.sampled_from([308, 309, 310, 400, 4299, 4300, 4301, 5000]).flatmap(integer),
    st.integers(-10**30, 10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.tuples(st.integers(-10**6, 10**6), st.integers(0, 10**9), st.integers(-400, 400)).map(
        lambda t: f"{t[0]}.{t[1]}e{t[2]}"),
)
statistic = st.one_of(numbers, numbers, st.sampled_from(["null", "true", "false", "[1]", "{}"]))
as_text = st.sampled_from(['"1.5"', '"x"', '"-0"', '"1e400"', '"1_0"'])  # a statistic as text: float() decides
dims = st.lists(st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["-0", "-1", "2.0", "1e2", "true", "null",
                                                                           "9" * 18, "1" + "0" * 19])),
                max_size=4).map(lambda ds: "[" + ", ".join(ds) + "]")
shape = st.one_of(dims, dims, st.sampled_from(["null", '"2"', "{}"]))
plain = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)  # type: ignore[arg-type]  # hypothesis's Literal category names: 'Cs' (surrogates) is one


@st.composite
def tensor(draw, escapes: bool):
    fields = [(text("type"), text("torch.Tensor")),
              (text("dtype"), text(draw(st.sampled_from(["torch.float32", "torch.bfloat16", "Float16", "int64",
                                                         "tørch/x"])), escapes and draw(st.booleans()))),
              (text("shape"), draw(shape))]
    for key in draw(st.lists(st.sampled_from(["Max", "Min", "Mean", "Norm"]), max_size=4, unique=True)):
        fields.append((text(key), draw(st.one_of(statistic, as_text) if escapes else statistic)))
    if draw(st.booleans()):
        fields.append((text("md5"), draw(st.sampled_from(['"0a1b2c3d"', '""', "null", "false"]))))
    if draw(st.booleans()):
        fields.append((text("data_name"), draw(st.sampled_from(['""', '"x.pt"', '"\\u0078.pt"', "null", "3"]))))
    if escapes and draw(st.integers(0, 9)) == 0:  # a field twice: the scanner leaves it to Python
        fields.append(draw(st.sampled_from(fields)))
    return obj(draw(st.permutations(fields)))


def argument(escapes: bool):
    leaf = st.one_of(tensor(escapes), tensor(escapes),
                     st.builds(lambda v: obj([(text("type"), text("int")), (text("value"), v)]), numbers),
                     numbers, st.sampled_from(["null", "true", '"s"', "[]", "{}"]))
    key = plain.map(lambda k: text(k, escapes)) if escapes else st.sampled_from(['"a"', '"b"', '"key"', '"0"'])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: "[" + ", ".join(vs) + "]"),
        st.lists(st.tuples(key.filter(lambda k: k != '"type"'), inner), max_size=3,
                 unique_by=(lambda kv: kv[0]) if not escapes else (lambda kv: json.loads(kv[0]))).map(obj)),
        max_leaves=8)


SLOTS = ["input_args", "input_kwargs", "parameters", "output", "parameters_grad", "is_recompute"]
CALLS = ["Functional.linear.0.forward", "Tensor.__mul__.1.forward", "Module.layers.0.Linear.forward.0",
         "Functional.relu.2.backward", "Torch.cat.3.forward", "ø.0.forward"]


@st.composite
def document(draw, escapes: bool) -> bytes:
    """A document whose calls may stand twice in "data"; with `escapes`, also what the scanner leaves
    to Python (escaped call names, keys and dtypes; a key twice in a tensor; a statistic as text;
    nesting past 200)."""
    calls = []
    for _ in range(draw(st.integers(0, 6))):
        slots = draw(st.lists(st.sampled_from(SLOTS), max_size=4, unique=True))
        entry = obj([(text(s), draw(argument(escapes))) for s in slots])
        name = draw(st.sampled_from(CALLS))
        calls.append((text(name, escapes and draw(st.booleans())), entry))
    if escapes and draw(st.integers(0, 9)) == 0:  # deeper than the scanner goes
        depth = draw(st.integers(190, 400))
        calls.append((text("Functional.deep.0.forward"), obj([(text("output"), "[" * depth + "]" * depth)])))
    head = [(text("task"), text("statistics")), (text("level"), text("L1")), (text("dump_data_dir"), "null")]
    ws = draw(st.sampled_from(["", " ", "\n", "\t \r\n"]))
    raw = obj([*head, (text("data"), obj(calls))])
    return (raw.replace(", ", "," + ws) if ws else raw).encode("utf-8")


# ---- the tests ------------------------------------------------------------------------------------
@needs_scanner
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(document(escapes=False))
def test_the_scanner_reads_every_number_and_a_call_twice_as_python_does(raw):
    fast = msprobe._dumpscan.scan(raw)
    assert fast is not None  # nothing here is left to Python: no escape, no key twice inside a call
    assert_same(fast, python_columns(raw))


@needs_scanner
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(document(escapes=True))
def test_what_the_scanner_reads_python_reads_alike(raw):
    fast, slow = msprobe._dumpscan.scan(raw), python_columns(raw)
    assert slow is not None
    if fast is not None:
        assert_same(fast, slow)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(document(escapes=True))
def test_python_reads_alike_with_and_without_orjson(raw):
    assert_same(python_columns(raw), python_columns(raw, orjson=False))


def test_the_rules_where_json_leaves_a_choice():
    def tensor(value: str) -> str:
        return '{"type": "t", "dtype": "d", "shape": [2], "Max": ' + value + "}"
    raw = ('{"data": {"A.0.forward": {"output": [' + tensor("1") + ", " + tensor("2") + ']}, '
           '"B.0.forward": {"output": [' + tensor("3") + ']}, '
           '"A.0.forward": {"input_args": [' + ", ".join(tensor(v) for v in
                                                          ("-0", "-0.0", "9" * 400, "-" + "9" * 5000, "1" + "0" * 4300))
           + "]}}}").encode()
    found = python_columns(raw)
    assert found[0] == ["A.0.forward", "B.0.forward"]  # A where it first stands, with its last tensors
    assert found[4] == [f"A.0.forward.input.{i}" for i in range(5)] + ["B.0.forward.output.0"]
    stats = np.frombuffer(found[7]).reshape(-1, 4)[:, 0]
    assert stats[0] == 0 and not math.copysign(1, stats[0]) < 0  # -0: the integer 0
    assert stats[1] == 0 and math.copysign(1, stats[1]) < 0  # -0.0: a float
    assert list(stats[2:5]) == [math.inf, -math.inf, math.inf] and stats[5] == 3
    assert_same(found, python_columns(raw, orjson=False))
    if msprobe._dumpscan is not None:
        assert_same(msprobe._dumpscan.scan(raw), found)


def dump(folder, tensors: str) -> str:
    rank = os.path.join(folder, "step0", "rank0")
    os.makedirs(rank)
    with open(os.path.join(rank, "dump.json"), "w") as fh:
        fh.write('{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": '
                 '{"Functional.linear.0.forward": {"input_args": [' + tensors + '], "output": [' + tensors + "]}}}")
    return str(folder)


def test_recorded_and_read_give_the_same_statistics_with_and_without_the_scanner(tmp_path, monkeypatch):
    huge = '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": %s, "Min": -0, "Mean": 1e999, ' \
           '"Norm": 0.5}' % ("9" * 400)
    path = dump(tmp_path / "d", huge + ", " + huge.replace("9" * 400, "-" + "7" * 5000))
    want = [[math.inf, 0.0, math.inf, 0.5], [-math.inf, 0.0, math.inf, 0.5]] * 2
    fast = msprobe.recorded(path, stats_only=True)
    read = [list(present(t.stats)) for t in msprobe.read(path, stats_only=True)[0]]
    monkeypatch.setattr(msprobe, "_dumpscan", None)
    slow = msprobe.recorded(path, stats_only=True)
    assert fast is not None
    assert slow is not None
    for stats in (fast.stats.tolist(), slow.stats.tolist(), read):
        assert stats == want and not any(math.copysign(1, present(s[1])) < 0 for s in stats)


def test_stats_only_compare_of_a_400_digit_statistic_is_the_same_with_either_build(tmp_path):
    big = '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": %s, "Min": 0.0, "Mean": 0.5, ' \
          '"Norm": 1.0}' % ("9" * 400)
    npu, golden = dump(tmp_path / "npu", big), dump(tmp_path / "golden", big.replace("9" * 400, "1.0"))
    outcomes = []
    for kernel in ("", "numpy"):  # the compiled scanner, then msprobe._scan
        r = subprocess.run([sys.executable, "-P", "-m", "accuscope", "compare", "--npu", npu, "--golden", golden,
                            "--stats-only", "--out", str(tmp_path / f"t{kernel}")], capture_output=True, text=True,
                           env={**os.environ, "ACCUSCOPE_KERNEL": kernel}, timeout=300)
        assert r.returncode in (0, 1), r.stderr  # never 3 (OverflowError)
        assert "Traceback" not in r.stderr + r.stdout
        said = [line.split(" · open")[0] for line in r.stdout.splitlines() if line.startswith(("ranks", "verdict"))]
        outcomes.append((r.returncode, said))
    assert outcomes[0] == outcomes[1]
