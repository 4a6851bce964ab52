"""Text columns through their dictionary codes (textcodes): every whole-column text operation (filters,
search, sort, the thresholds' exempt rows, plugin columns read as numbers) gives what the plain
column gives, in memory and paged from a columnar task's files, with empty, NaN-like, differently
cased and non-ASCII names."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from accuscope.engine.compare import judgement, textcodes
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.textcodes import encode
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.graphs.optypes import EXEMPT_TYPES
from accuscope.engine.tasks.columnstore import PagedText, read_columns, write_columns
from support.bounded import ends

NAMES = ["", "NaN", "nan", "Conv_1", "conv_1", "CONV_1", "MatMul/0", "Straße", "İstanbul", "層.3", "a\x1eb",
         "Functional.linear.5.forward.output", "*", "  ", "ǅ"]
TYPES = ["", "Conv2D", "conv2d", "TransData", "Data", "MatMul", "Ünïcode", "NaN"]
PLUGIN = ["", "1.5", "nan", "x", "-2", "1e3", "Ünï", "inf", "0.5"]


def _table(seed: int, n: int) -> ResultTable:
    rng = np.random.default_rng(seed)
    pick = lambda values: [values[i] for i in rng.integers(0, len(values), n)]  # noqa: E731
    return ResultTable.from_columns(
        {"npu_op": pick(NAMES), "golden_op": pick(NAMES), "type": pick(TYPES), "tensor": pick(NAMES),
         "npu_address": pick(NAMES), "reason": pick(["", "", "shape differs"]), "plug": pick(PLUGIN),
         "cos": rng.random(n)}, custom=["plug"])


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """(in memory, paged from column files) holding the same rows."""
    parts = [_table(1, 700), _table(2, 500)]
    folder = tmp_path_factory.mktemp("columnar")
    write_columns(folder, parts)
    paged = read_columns(folder)
    assert isinstance(paged.columns["npu_op"], PagedText)
    return ResultTable.concat(parts), paged


def _plain(table: ResultTable, key: str) -> list[str]:
    return list(table.columns[key].tolist())


def test_codes_rebuild_the_column_across_pages(tables, monkeypatch):
    monkeypatch.setattr(textcodes, "PAGE", 7)  # many pages, a partial last one
    for table in tables:
        for key in ("npu_op", "type", "plug"):
            t = encode(table.columns[key])
            assert t.codes.dtype == np.int32 and len(set(t.values.tolist())) == len(t.values)
            assert t.values[t.codes].tolist() == _plain(table, key)
    empty = encode(np.empty(0, dtype=object))
    assert len(empty.codes) == len(empty.values) == 0


FILTERS = {
    'npu_op == "conv_1"': lambda r: r["npu_op"].lower() == "conv_1",
    'npu_op != "NAN"': lambda r: r["npu_op"].lower() != "nan",
    'npu_op == ""': lambda r: r["npu_op"] == "",
    'npu_address == "nan"': lambda r: r["npu_address"].lower() == "nan",
    'npu_op < "m"': lambda r: r["npu_op"].lower() < "m",
    '"m" <= npu_op': lambda r: "m" <= r["npu_op"].lower(),
    'type in ("Conv2D", "ünïcode", "")': lambda r: r["type"].lower() in ("conv2d", "ünïcode", ""),
    'type not in ("data",)': lambda r: r["type"].lower() != "data",
    '"straß" in name': lambda r: "straß" in r["npu_op"].lower(),
    '"" in golden_op': lambda r: True,
    '"İ" in tensor': lambda r: "İ".lower() in r["tensor"].lower(),
    'npu_op == golden_op': lambda r: r["npu_op"].lower() == r["golden_op"].lower(),
    'npu_op != tensor and cos > 0.5': lambda r: r["npu_op"].lower() != r["tensor"].lower() and r["cos"] > 0.5,
    'plug == "x"': lambda r: r["plug"].lower() == "x",
    'plug > 1': lambda r: _float(r["plug"]) > 1,
    '"ü" in plug': lambda r: "ü" in r["plug"].lower(),
}


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _rows(table: ResultTable) -> list[dict]:
    return [table.row(i) for i in range(len(table))]


@pytest.mark.parametrize("expression", FILTERS)
def test_text_filters_equal_the_plain_column(tables, expression):
    expected = [FILTERS[expression](r) for r in _rows(tables[0])]
    for table in tables:
        assert table.filter_mask(expression).tolist() == expected


@pytest.mark.parametrize("needle", ["conv", "CONV_1", "", "nan", "ß", "層", ".forward.", "no such", "\x1e"])
def test_search_equals_the_plain_columns(tables, needle):
    expected = [any(needle.lower() in table_row[k].lower() for k in ("npu_op", "golden_op", "type", "tensor"))
                for table_row in _rows(tables[0])]
    for table in tables:
        assert table.match_mask(needle).tolist() == expected
        hits = np.flatnonzero(expected)
        assert table.search(needle, None, -1) == (int(hits[0]) if len(hits) and needle else None)


@pytest.mark.parametrize("key", ["npu_op", "type", "plug"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_text_equals_sorting_the_plain_column(tables, key, descending):
    rows = _rows(tables[0])
    if key == "plug":  # numbers first (by value), then text case-insensitively, empty last
        def order_key(i):
            v, num = rows[i][key], _float(rows[i][key])
            if not math.isnan(num):
                return (0, -num if descending else num, "")
            return (2 if v == "" else 1, 0, v.lower())
    else:
        def order_key(i):
            return (rows[i][key] == "", rows[i][key].lower())
    expected = sorted(range(len(rows)), key=order_key)
    if descending and key != "plug":  # text descending: reverse within the non-empty, stable
        full = [i for i in range(len(rows)) if rows[i][key]]
        empty = [i for i in range(len(rows)) if not rows[i][key]]
        ranks = sorted({rows[i][key].lower() for i in full}, reverse=True)
        expected = sorted(full, key=lambda i: ranks.index(rows[i][key].lower())) + empty
    for table in tables:
        got = table.sort_order(key, descending).tolist()
        if key == "plug" and descending:  # text ranks descend too: compare the sort keys, not rows
            assert [order_key(i)[:2] for i in got] == sorted(order_key(i)[:2] for i in got)
        else:
            assert got == expected


def test_sorting_a_view_keeps_to_its_rows(tables):
    view = np.arange(3, 900, 7)
    for table in tables:
        got = table.sort_order("name", rows=view)
        assert sorted(got.tolist()) == view.tolist()
        names = [table.columns["npu_op"][i] for i in got.tolist()]
        assert [s.lower() for s in names if s] == sorted(s.lower() for s in names if s)


def test_exempt_rows_and_the_row_state_equal_the_plain_type_column(tables):
    rows = _rows(tables[0])
    expected = [r["type"] in EXEMPT_TYPES or r["golden_op"] == "*" for r in rows]
    states = []
    for table in tables:
        assert judgement.exempt(table).tolist() == expected
        state = judgement.evaluate(table, Thresholds())
        assert state.not_compared.tolist() == [r["reason"] != "" and math.isnan(r["cos"]) for r in rows]
        states.append(state)
    assert states[0].fail.tolist() == states[1].fail.tolist()


def test_codes_follow_a_replaced_column(tables):
    table = ResultTable.from_columns({"npu_op": ["a", "b", "a"], "type": ["x", "TransData", "x"]})
    assert table.filter_mask('name == "a"').tolist() == [True, False, True]
    assert judgement.exempt(table).tolist() == [False, True, False]
    table.set_column("npu_op", ["b", "b", "a"])
    table.set_column("type", ["TransData", "x", "x"])
    assert table.filter_mask('name == "a"').tolist() == [False, False, True]
    assert judgement.exempt(table).tolist() == [True, False, False]
    table.append_rows([{"npu_op": "A", "type": "Data"}])
    assert table.filter_mask('name == "a"').tolist() == [False, False, True, True]
    assert judgement.exempt(table).tolist() == [True, False, False, True]


def test_a_columnar_task_stores_codes_for_repeating_text_and_reads_only_distinct_rows(tables):
    paged = tables[1]
    stored = paged.columns["npu_op"].encoded()
    assert stored is not None and stored.values[stored.codes].tolist() == _plain(tables[0], "npu_op")
    assert paged.columns["npu_op"][5:].encoded() is None  # a part of the column: encoded when asked


def test_text_of_too_many_distinct_values_keeps_no_codes_and_still_filters(tmp_path, monkeypatch):
    from accuscope.engine.tasks import columnstore
    monkeypatch.setattr(columnstore, "MAX_DISTINCT", 10)
    parts = [_table(3, 300), ResultTable.from_columns({"npu_op": [f"op{i}" for i in range(300)],
                                                               "plug": ["1"] * 300}, custom=["plug"])]
    write_columns(tmp_path, parts)
    paged = read_columns(tmp_path)
    assert paged.columns["npu_op"].encoded() is None and paged.columns["type"].encoded() is not None  # type: ignore[attr-defined]  # a PagedText (ResultTable types a column as an array)
    plain = ResultTable.concat(parts)
    for expression in ('name == "op7"', '"conv" in name', 'type == "conv2d"'):
        assert paged.filter_mask(expression).tolist() == plain.filter_mask(expression).tolist()


def test_codes_that_do_not_fit_their_column_are_refused_or_passed_over(tmp_path):
    plain = _table(4, 50)
    write_columns(tmp_path, [plain])
    meta = json.loads((tmp_path / "columns" / "meta.json").read_text())
    codes = tmp_path / "columns" / f"{[k for k, _ in meta['columns']].index('npu_op')}.codes.npy"
    np.save(codes, np.full(50, 999, dtype=np.int32))  # pointing past the values: the text is read
    paged = read_columns(tmp_path)
    assert paged.columns["npu_op"].encoded() is None  # type: ignore[attr-defined]  # a PagedText (ResultTable types a column as an array)
    assert paged.filter_mask('name == "conv_1"').tolist() == plain.filter_mask('name == "conv_1"').tolist()
    np.save(codes, np.zeros(7, dtype=np.int32))  # not a column of its length
    with pytest.raises(ValueError, match="codes that do not fit"):
        read_columns(tmp_path)


@pytest.mark.parametrize("member", ["meta.json", "numeric", "offsets", "text", "codes"])
def test_a_named_pipe_in_the_column_store_is_refused_not_waited_on(tmp_path, member):
    """A task folder comes from someone else: a FIFO where a column file should be fails the read with the
    file named (the task then merges its rank files), where opening it would wait for ever."""
    write_columns(tmp_path, [_table(5, 40)])
    base = tmp_path / "columns"
    meta = json.loads((base / "meta.json").read_text())
    keys = [k for k, _ in meta["columns"]]
    name = {"meta.json": "meta.json", "numeric": f"{keys.index('cos')}.npy",
            "offsets": f"{keys.index('npu_op')}.off.npy", "text": f"{keys.index('npu_op')}.txt",
            "codes": f"{keys.index('type')}.codes.npy"}[member]
    assert (base / name).is_file()
    (base / name).unlink()
    os.mkfifo(base / name)
    with pytest.raises(ValueError, match=rf"{name}: is a named pipe"):
        ends(read_columns, tmp_path, seconds=30)
