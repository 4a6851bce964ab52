"""One metric table, one owner of row state (engine only).

Every list of metrics the engine keeps is derived from the records of engine/compare/columns.py:
these tests walk the records and ask each consumer about each one, so a record a consumer misses
fails here by name. Then the row state: the thresholds' RowState is built once per change and read
by everyone, and on a real task whose thresholds changed, the result CSV and the advisor agree
about every row."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from accuscope.engine.compare import columns as mt
from accuscope.engine.compare import judgement, pairjob
from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.compare.results import KIND, METRIC_COLUMNS, NUMERIC_ORDER, ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.summary import summarize
from accuscope.engine.compare.thresholds import Thresholds, resolve_key
from accuscope.engine.diagnose.oprerun import metrics as isolated_metrics
from accuscope.engine.tasks.csvio import read_result_csv, write_result_csv
from support.data import cls_with_planted_fault
from support.metrics import every_cell
from support.narrow import present

RECORDS = mt.METRIC_TABLE
ids = [m.key for m in RECORDS]


def test_records_are_unique_and_well_formed():
    assert len({m.key for m in RECORDS}) == len(RECORDS) and len({m.csv for m in RECORDS}) == len(RECORDS)
    for m in RECORDS:
        assert m.kind in ("float", "int", "text") and m.help and len(m.badge) <= 4, m
        assert m.width >= len(m.title), m  # the header fits its column
        if m.msit_threshold is not None or m.tpu_threshold is not None:
            assert m.numeric, m
    assert [key for _, key in mt.METRICS][:10] == ["cos", "max_abs", "acc_rel", "red", "kl", "std", "mean_abs",
                                                   "rmse", "max_rel", "mean_rel"]  # msaccucmp's CSV order


@pytest.mark.parametrize("m", RECORDS, ids=ids)
def test_every_engine_list_holds_the_metric(m):
    assert mt.KEY_OF[m.csv] == m.key and mt.CSV_OF[m.key] == m.csv and mt.HELP[m.key] == m.help
    assert KIND[m.key] == m.kind and m.key in METRIC_COLUMNS
    assert ((m.key, m.csv) in [(k, c) for c, k in mt.METRICS + mt.EXTRAS])
    assert (m.key in NUMERIC_ORDER) == (m.kind == "float")
    assert (m.key in mt.THRESHOLD_KEYS) == m.numeric
    if m.numeric:  # a threshold may name it by key or CSV name, in its direction
        assert resolve_key(m.key) == m.key == resolve_key(m.csv.upper())
        t = Thresholds()
        t.set(m.key, 1.0)
        assert present(t.get(m.key)).op == ("<" if m.lower_is_worse else ">")
    if m.msit_threshold is not None:
        assert present(Thresholds().get(m.key)).value == m.msit_threshold
    else:
        assert Thresholds().get(m.key) is None
    assert (m.key in mt.ALGORITHMS) == (m.origin == "msaccucmp")
    assert (m.key in mt.TABLE_ORDER) != (m.key in mt.TABLE_TAIL)  # the op table shows it, once


def test_a_comparison_fills_every_metric_and_the_csv_and_filters_carry_it():
    x = np.linspace(-1, 1, 1000)
    y = x + np.random.default_rng(0).normal(0, 1e-3, x.shape)
    cells = pairjob.metric_cells(compare_arrays(x, y), tuple(mt.ALGORITHMS))
    assert set(cells) == {r.key for r in RECORDS if not r.recorded and not r.apart}  # the tensor comparison's
    cells = every_cell(x, y)
    assert set(cells) == {r.key for r in RECORDS}  # with the recorded statistics' comparison's and the third side's
    for r in RECORDS:
        if r.kind == "float":
            assert not math.isnan(cells[r.key]), r.key
    iso = isolated_metrics(x, y)
    assert all(iso[k] is not None for k in mt.ISOLATED)  # an op re-run reports each of them

    table = ResultTable.from_rows([dict(index=0, npu_op="a", golden_op="a", tensor="a:output:0", **cells)])
    assert table.present == {r.key for r in RECORDS}
    for r in RECORDS:  # filters name it by key and by CSV name
        assert table.resolve(r.key) == r.key == table.resolve(r.csv)


def test_the_csv_writes_and_reads_every_metric(tmp_path):
    x = np.linspace(-1, 1, 100)
    cells = every_cell(x, x * 1.01)
    table = ResultTable.from_rows([dict(index=0, npu_op="a", golden_op="a", tensor="a:output:0", **cells)])
    judgement.apply(table, Thresholds())
    path = write_result_csv(table, tmp_path / "result_1.csv")
    header = next(csv.reader(path.open()))
    assert all(r.csv in header for r in RECORDS), [r.csv for r in RECORDS if r.csv not in header]
    back, warnings = read_result_csv(path)
    assert not warnings and back.present == table.present
    for r in RECORDS:
        if r.kind == "float":
            assert back.columns[r.key][0] == pytest.approx(table.columns[r.key][0], rel=1e-3), r.key


# ------------------------------------------------------------------ row state


def _rows() -> ResultTable:
    base = dict(type="Conv2D", io="output", reason="", npu_nonfinite=0, golden_nonfinite=0, golden_op="g")
    return ResultTable.from_rows([
        dict(base, npu_op="a", tensor="a:output:0", cos=0.999, red=0.01),
        dict(base, npu_op="b", tensor="b:output:0", cos=0.95, red=0.01),
        dict(base, npu_op="c", tensor="c:output:0", type="TransData", cos=0.5, red=0.5),  # exempt
        dict(base, npu_op="d", tensor="d:output:0", cos=math.nan, red=math.nan, reason="no golden tensor"),
        dict(base, npu_op="e", tensor="e:output:0", cos=0.999, red=0.01, npu_nonfinite=3),
    ])


def test_row_state_is_built_once_per_change_and_read_by_all():
    table, th = _rows(), Thresholds()
    state = judgement.evaluate(table, th)
    assert state.fail.tolist() == [False, True, False, False, True]
    assert state.exempt.tolist() == [False, False, True, False, False]
    assert state.not_compared.tolist() == [False, False, False, True, False]
    assert state.nonfinite.tolist() == [False, False, False, False, True]
    assert state.broken_keys(1) == ["cos"] and state.broken_keys(4) == ["npu_nonfinite"] and state.broken_keys(2) == []
    assert judgement.evaluate(table, th) is state and judgement.evaluate(table, Thresholds()) is state  # same thresholds: no rebuild
    assert judgement.apply(table, th) is state and table.columns["fail"] is state.fail  # writing the judgement keeps it
    assert summarize(table, th).failing == 2

    th.edit("cos=0.9")
    changed = judgement.evaluate(table, th)
    assert changed is not state and changed.fail.tolist() == [False, False, False, False, True]
    table.append_rows([dict(type="Relu", npu_op="f", tensor="f:output:0", golden_op="f", cos=0.1, red=0.0,
                            npu_nonfinite=0, golden_nonfinite=0)])
    grown = judgement.evaluate(table, th)
    assert grown is not changed and grown.fail.tolist() == [False, False, False, False, True, True]
    table.set_column("origin", ["x"] * len(table))  # an added column: a change, and a column filters see
    assert judgement.evaluate(table, th) is not grown and "origin" in table.custom
    assert table.filter_mask('origin == "x"').all()


def test_the_csv_and_the_advisor_agree_after_a_threshold_change(cls_model, tmp_path):
    """A real task (PP-OCR cls against an fp16 NPU dump with one op broken), its thresholds
    tightened as the app does it: the re-saved CSV, task.json's counts, the reloaded task's row
    state and the advisor's failing ops say the same rows fail."""
    from accuscope.engine.diagnose.advisor import advise
    from accuscope.engine.tasks.task import load_task
    from accuscope.engine.tasks.taskrun import run_task

    noise = np.random.default_rng(1)
    sim = cls_with_planted_fault(cls_model, tmp_path, "Relu@4", lambda a: a + noise.standard_normal(
        a.shape).astype(np.float32) * a.std())
    spec = CompareSpec(str(tmp_path / "npu" / "dump"), str(tmp_path / "golden"), model=sim.model_json)
    run_task(spec, tmp_path / "task", workers=1)
    task = load_task(tmp_path / "task")
    assert task.table is not None
    before = int(task.table.columns["fail"].sum())
    advise(tmp_path / "task")  # the app shows its origin and iso_cos beside the table, never in it (tests/app)
    assert task.thresholds is not None
    tight = Thresholds.from_dict(task.thresholds.to_dict())
    tight.edit("max_abs=0.0001 red=off")  # fp16 rounding now fails rows; the planted fault still does
    task.set_thresholds(tight)

    again = load_task(tmp_path / "task")
    assert again.table is not None and again.thresholds is not None
    state = judgement.evaluate(again.table, again.thresholds)
    assert again.csv is not None
    with again.csv.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    in_csv = np.array([r["IsPrecisionError"] == "YES" for r in rows])
    assert len(rows) == len(again.table) and in_csv.sum() > before
    assert "origin" not in rows[0] and again.table.custom == [] and np.array_equal(task.table.columns["fail"], in_csv)
    assert np.array_equal(in_csv, state.fail)
    assert again.doc.failing == int(state.fail.sum())
    advice = advise(tmp_path / "task")
    c = again.table.columns
    csv_ops = {r["NPUDump"] for r, bad in zip(rows, in_csv) if bad and ":output:" in r["TensorIndex"]}
    assert advice is not None
    assert {o.op for o in advice.ops} == {op for op, io, bad in zip(c["npu_op"], c["io"], in_csv)
                                          if bad and io == "output"} == csv_ops
