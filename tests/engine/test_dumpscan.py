"""The compiled dump.json scanner (engine/sources/_dumpscan.c) against its Python twin
(msprobe._scan over json.loads): the same columns for whatever msprobe may write, None (Python
decides) for what it leaves, and never a crash or a different answer on damaged text."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accuscope.engine.graphs.msprobegraph import load_msprobe
from accuscope.engine.sources import msprobe

needs_scanner = pytest.mark.skipif(msprobe._dumpscan is None, reason="no compiled scanner (test_kernel says why)")


def twin(raw: bytes):
    """What the Python reader makes of the text: its columns, or None where it would not give them."""
    doc, _why = msprobe._parse(raw)
    if doc is None or not isinstance(doc.get("data"), dict):
        return None
    return msprobe._scan(doc["data"])


def same(a, b) -> None:
    names = ("calls", "call_of", "slot", "index", "names", "dtypes", "shapes", "stats", "has", "md5", "data_name")
    for name, x, y in zip(names, a, b):
        if name == "stats":
            assert np.array_equal(np.frombuffer(x), np.frombuffer(y), equal_nan=True), name
        else:
            assert x == y, name


# ---- what msprobe writes, and more ------------------------------------------------------------
number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20), st.booleans(),
                   st.none())
key = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)  # type: ignore[arg-type]  # hypothesis's Literal category names: 'Cs' (surrogates) is one
tensor = st.fixed_dictionaries(
    {"type": st.just("torch.Tensor"), "dtype": st.sampled_from(["torch.float32", "torch.bfloat16", "Float16", "int64"]),
     "shape": st.one_of(st.lists(st.integers(0, 10**6), max_size=4), st.lists(st.integers(-3, 3), max_size=2),
                        st.just([1.0, 2]), st.none())},
    optional={"Max": number, "Min": number, "Mean": number, "Norm": number, "requires_grad": st.booleans(),
              "md5": st.one_of(st.sampled_from(["0a1b2c3d", ""]), st.none()),
              "data_name": st.sampled_from(["", "Functional.linear.0.forward.input.0.pt"])})
typed = st.fixed_dictionaries({"type": st.sampled_from(["int", "float", "slice", "torch.Size"]),
                               "value": st.one_of(st.integers(), st.lists(st.integers(), max_size=3), st.none())})
argument = st.recursive(st.one_of(tensor, typed, st.none(), st.integers(), st.text(max_size=4)),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(key.filter(lambda k: k != "type"), inner, max_size=3)),
                        max_leaves=12)
call = st.dictionaries(st.sampled_from(["input_args", "input_kwargs", "parameters", "output", "parameters_grad",
                                        "is_recompute", "mix_level"]), argument, max_size=5)
call_name = st.one_of(st.from_regex(r"(Functional|Tensor|Torch)\.[a-z_]{1,8}\.[0-9]{1,3}\.(forward|backward)",
                                    fullmatch=True),
                      st.from_regex(r"Module\.[a-z0-9_.]{1,12}\.[A-Za-z]{1,6}\.(forward|backward)\.[0-9]", fullmatch=True),
                      key)
document = st.fixed_dictionaries({"task": st.sampled_from(["statistics", "tensor"]), "level": st.just("L1"),
                                  "framework": st.just("pytorch"), "dump_data_dir": st.none(),
                                  "data": st.dictionaries(call_name, call, max_size=6)})


@needs_scanner
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document, st.sampled_from([None, 0, 1, 4]), st.booleans())
def test_scanner_and_python_give_the_same_columns(doc, indent, ascii_only):
    raw = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode("utf-8")
    fast, slow = msprobe._dumpscan.scan(raw), twin(raw)
    assert slow is not None
    if fast is None:  # left to Python only for an escape where a value matters (a call, a key walked)
        assert "\\" in raw.decode("utf-8")
        return
    same(fast, slow)


@needs_scanner
@settings(max_examples=300, deadline=None)
@given(document, st.data())
def test_damaged_text_gives_none_or_what_python_reads(doc, data):
    raw = bytearray(json.dumps(doc, indent=1).encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["cut", "flip", "insert"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if how == "cut":
            del raw[at:]
        elif how == "flip" and raw:
            raw[at] = data.draw(st.integers(0, 255))
        else:
            raw[at:at] = data.draw(st.sampled_from([b"{", b"]", b",", b'"', b"\\", b"\xff", b"\x01", b"NaN", b"-"]))
    fast = msprobe._dumpscan.scan(bytes(raw))
    if fast is not None:  # the scanner read it: Python reads it too, to the same columns
        slow = twin(bytes(raw))
        assert slow is not None
        same(fast, slow)


@needs_scanner
def test_what_the_scanner_leaves_to_python():
    def doc(data: str, head: str = '"task": "statistics", ') -> bytes:
        return ("{" + head + '"data": ' + data + "}").encode("utf-8")

    def out(value: str, more: str = "") -> str:
        tensor = '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": ' + value + "}"
        return '{"A.0.forward": {"output": [' + tensor + "]" + more + "}}"
    assert msprobe._dumpscan.scan(doc(out("1.5"))) is not None
    for data in ['{"A.0.forward": 3}',  # a call that is not an object: a problem Python names
                 '{"A\\u002e0.forward": {}}',  # an escaped call name
                 out("1", ', "output": []'),  # a slot twice
                 out('"1.5"'),  # a statistic as text: float() decides
                 out("1") + " x",  # text after the document
                 '[' * 300 + ']' * 300]:  # deeper than the scanner goes
        assert msprobe._dumpscan.scan(doc(data)) is None, data
    assert msprobe._dumpscan.scan(b'{"task": 1}') is None  # no "data"
    assert msprobe._dumpscan.scan(b"\xef\xbb\xbf" + doc("{}")) is None  # a BOM: json refuses it
    assert msprobe._dumpscan.scan(doc("{}").replace(b"statistics", b"stat\xc0\xafs")) is None  # overlong UTF-8


@needs_scanner
def test_numbers_are_read_as_python_reads_them():
    values = ["0", "-0", "1e400", "-1e400", "1e-400", "123456789012345678901234567890", "0.1", "2.5e-3",
              "NaN", "Infinity", "-Infinity", "true", "false", "null", "[1]", "{}", "9007199254740993"]
    entries = ", ".join(f'{{"type": "t", "dtype": "d", "shape": [], "Max": {v}, "Min": {v}}}' for v in values)
    raw = ('{"data": {"A.0.forward": {"output": [' + entries + "]}}}").encode()
    fast, slow = msprobe._dumpscan.scan(raw), twin(raw)
    same(fast, slow)
    stats = np.frombuffer(fast[7]).reshape(-1, 4)
    assert stats[2, 0] == math.inf and stats[5, 0] == float("123456789012345678901234567890")
    assert stats[16, 0] == 9007199254740992.0  # correctly rounded, as float() does
    assert list(np.frombuffer(fast[8], dtype=np.uint8)) == [1] * 13 + [0] * 3 + [1]  # null, [1], {}: not recorded


def test_recorded_reads_alike_with_and_without_the_scanner(tmp_path, monkeypatch):
    fix = os.path.join(os.path.dirname(__file__), "..", "fixtures", "msprobe", "cand_md5")
    fast = msprobe.recorded(fix, rank=1)
    monkeypatch.setattr(msprobe, "_dumpscan", None)
    slow = msprobe.recorded(fix, rank=1)
    assert fast is not None and slow is not None and len(fast.names) > 10
    for field in ("calls", "io", "index", "names", "modules", "dtypes", "shapes", "has", "checksums"):
        assert list(getattr(fast, field)) == list(getattr(slow, field)), field
    assert np.array_equal(fast.stats, slow.stats, equal_nan=True)
    assert (fast.checksums != "").any() and len(set(fast.modules)) > 1


def test_the_graph_pane_reads_the_same_calls_from_the_columns(tmp_path, monkeypatch):
    from accuscope.engine.demo import msprobesim
    msprobesim.write(str(tmp_path), ranks=2, steps=1)

    def nodes():
        return [(n.name, n.type, n.inputs, n.outputs, n.output_shapes, n.subgraph, n.attrs)
                for n in load_msprobe(str(tmp_path), rank=1).nodes]
    fast = nodes()
    monkeypatch.setattr(msprobe, "_as_columns", lambda *a, **k: None)  # dump.json as `read` gives it
    assert fast == nodes() and len(fast) > 3 and any(n[4] for n in fast)
