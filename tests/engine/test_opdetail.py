"""Single-operator detail: TopN against a full sort, the error sketch against exact counts,
statistics, per-channel numbers, msaccucmp-compatible files, and `accuscope op` end to end."""
from __future__ import annotations

import csv
import math
import threading

import numpy as np
import pytest

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.diagnose import opdetail as od
from accuscope.engine.diagnose import opfiles, oppair
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import load_task, save_task
from accuscope.engine.tasks.taskrun import run_task
from support.cli import accuscope
from support.data import cls_with_planted_fault
from support.errors import EPS64, brute_errors, brute_top
from support.narrow import present


def nasty_pair(shape, seed=0):
    """Small integers and halves (many ties, exact zero errors, zero goldens), NaN and inf on each
    side, some NaN/inf identical on both sides, a few tiny nonzero goldens."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    y = rng.integers(-3, 4, n).astype(np.float32)
    x = y + rng.integers(-2, 3, n).astype(np.float32) * np.float32(0.5)
    for v, count in ((np.nan, 6), (np.inf, 3), (-np.inf, 2)):
        x[rng.integers(0, n, count)] = v
        y[rng.integers(0, n, count)] = v
    same = rng.integers(0, n, 4)
    x[same[:2]] = y[same[:2]] = np.nan
    x[same[2:]] = y[same[2:]] = np.inf
    y[rng.integers(0, n, 3)] = np.float32(1e-30)  # not zero, yet below eps64: no relative error
    return x.reshape(shape), y.reshape(shape)


@pytest.mark.parametrize("shape,chunk,top", [((2, 5, 7, 9), 100, 17), ((3, 4, 1000), 777, 1),
                                             ((1, 3, 64, 64), 4096, 300), ((40000,), 65536, 20),
                                             ((2, 3, 4, 5, 6), 50, 10000)])
def test_topn_equals_a_full_sort_with_ties_nan_and_zeros(shape, chunk, top):
    x, y = nasty_pair(shape, seed=len(shape) + top)
    d = od.detail_arrays(x, y, top=top, chunk=chunk)
    for by in od.METRICS:
        e = brute_errors(x, y, by)
        assert d is not None
        t = d.top(by)
        want = brute_top(e, top)
        assert t.index.tolist() == want.tolist(), by
        assert np.array_equal(t.nonfinite, ~(np.isfinite(x.ravel()[want]) & np.isfinite(y.ravel()[want])))
        if t.nonfinite.any():  # NaN/inf mismatches come first
            assert t.nonfinite[:int(t.nonfinite.sum())].all()
        np.testing.assert_array_equal(t.npu, x.ravel()[want].astype(np.float64))
        finite = np.isfinite(t.abs_err)
        np.testing.assert_array_equal(t.abs_err[finite], e[want][finite] if by == "abs" else
                                      brute_errors(x, y, "abs")[want][finite])
        g = np.abs(t.golden)
        assert np.isnan(t.rel_err[g <= EPS64]).all()  # golden 0 (or ~0): no relative error
    assert d is not None
    assert d.layout == {4: "N C H W", 3: "N C H W", 1: "ID", 5: "N C D H W"}[len(shape)]


def test_cumulative_counts_are_exact_at_edges_and_bounded_between():
    x, y = nasty_pair((4, 8, 50, 50), seed=3)
    rng = np.random.default_rng(5)
    x = x + rng.standard_normal(x.shape).astype(np.float32) * np.float32(1e-3)  # a spread of magnitudes
    d = od.detail_arrays(x, y, top=50, chunk=3000)
    for by in od.METRICS:
        e = brute_errors(x, y, by)
        assert d is not None
        sk = d.sketch(by)
        assert sk.total == x.size and sk.undefined == int(np.isnan(e).sum())
        assert sk.zeros == int((e == 0).sum()) and sk.nonfinite == int(np.isinf(e).sum())
        finite = e[np.isfinite(e)]
        assert sk.max == finite.max() and sk.min == finite.min()
        thresholds, above = sk.curve()
        assert len(thresholds) > 20
        for c, count in zip(thresholds, above):
            assert count == np.count_nonzero(e > c)
            assert sk.count_above(c) == (count, count)
        for c in np.concatenate([10.0 ** rng.uniform(-6, 1, 200), [0.0, -1.0, 0.5, 1.0, np.inf]]):
            low, high = sk.count_above(c)
            true = int(np.count_nonzero(e > c))
            assert low <= true <= high
            assert low <= sk.estimate_above(c) <= high
            if c >= sk.top[-1]:  # at or above the kept TopN errors: exact
                assert low == high == true
        c = 0.0007
        assert od.exact_count(od.array_source(x, y, 999), c, by) == np.count_nonzero(e > c)
        h = sk.histogram(max_bins=12)
        assert len(h.counts) <= 12 and np.all(np.diff(h.edges) > 0)
        assert h.counts.sum() + h.zeros + h.nonfinite + h.undefined == x.size
        for lo_edge, hi_edge, count in zip(h.edges[:-1], h.edges[1:], h.counts):
            assert count == np.count_nonzero((finite > lo_edge) & (finite <= hi_edge))
    n = int(np.count_nonzero(brute_errors(x, y, "abs") > 0.5))
    assert d is not None
    assert d.abs.sentence(0.5) == (f"{100 * n / x.size:.4g}% of tensor elements ({n:,} elements) have an "
                                   f"absolute error greater than 0.5")


def test_statistics_of_both_tensors_count_nan_and_inf_apart():
    x, y = nasty_pair((3, 4, 10, 10), seed=8)
    d = od.detail_arrays(x, y, chunk=128)
    assert d is not None
    for s, v in ((d.npu_stats, x.ravel().astype(np.float64)), (d.golden_stats, y.ravel().astype(np.float64))):
        f = v[np.isfinite(v)]
        assert (s.finite, s.nan, s.inf) == (f.size, int(np.isnan(v).sum()), int(np.isinf(v).sum()))
        assert (s.min, s.max) == (f.min(), f.max())
        assert s.mean == pytest.approx(f.mean(), rel=1e-12) and s.std == pytest.approx(f.std(), rel=1e-9)
    both = np.isfinite(x.ravel()) & np.isfinite(y.ravel())
    xs, ys = x.ravel()[both].astype(np.float64), y.ravel()[both].astype(np.float64)
    assert d.cosine == pytest.approx(xs @ ys / np.sqrt((xs @ xs) * (ys @ ys)), rel=1e-12)
    assert d.mean_abs == pytest.approx(np.abs(xs - ys).mean(), rel=1e-12)


@pytest.mark.parametrize("shape,chunk", [((2, 16, 12, 12), 1000), ((1, 6, 300, 300), 65536),
                                         ((1, 8, 2, 6, 5), 37)])
def test_one_broken_channel_stands_out(shape, chunk):
    rng = np.random.default_rng(1)
    y = rng.standard_normal(shape).astype(np.float32)
    x = y + rng.standard_normal(shape).astype(np.float32) * np.float32(1e-3)
    x[:, 3] = rng.standard_normal(x[:, 3].shape)  # channel 3 is garbage
    x[0, 1].flat[7] = np.nan  # a NaN in channel 1
    d = od.detail_arrays(x, y, chunk=chunk)
    assert d is not None
    ch = d.channels
    assert ch is not None and len(ch) == shape[1]
    assert ch.worst(1, by="cos")[0] == 3
    assert ch.nonfinite.tolist() == [0, 1] + [0] * (shape[1] - 2) and ch.max_abs[1] == np.inf
    assert ch.worst(2, by="max_abs").tolist() == [1, 3]
    others = [c for c in range(shape[1]) if c != 3]
    assert ch.cos[3] < 0.5 and np.all(ch.cos[others] > 0.9999)
    xm, ym = np.moveaxis(x, 1, 0).reshape(shape[1], -1), np.moveaxis(y, 1, 0).reshape(shape[1], -1)
    ok = np.isfinite(xm)
    xs, ys = np.where(ok, xm, 0).astype(np.float64), np.where(ok, ym, 0).astype(np.float64)
    np.testing.assert_allclose(ch.cos, (xs * ys).sum(1) / np.sqrt((xs * xs).sum(1) * (ys * ys).sum(1)), rtol=1e-10)
    np.testing.assert_allclose(ch.mean_abs, np.abs(xs - ys).sum(1) / ok.sum(1), rtol=1e-10)
    top = d.top_abs  # the NaN first, then the broken channel; coordinates in the logical layout
    assert top.nonfinite[0] and top.coords[0][1] == 1
    assert np.all(top.coords[1:, 1] == 3)
    i = int(top.index[1])
    assert tuple(top.coords[1]) == np.unravel_index(i, shape + (1,) * (4 - len(shape)) if len(shape) < 4 else shape)


def test_layouts_pad_like_msaccucmp():
    assert od.layout_of((2, 3)) == ("N C H W", (2, 3, 1, 1))
    assert od.layout_of((2, 3, 4, 5, 6)) == ("N C D H W", (2, 3, 4, 5, 6))
    assert od.layout_of((7,)) == ("ID", (7,))
    assert od.layout_of(()) == ("ID", (1,))
    assert od.layout_of((1, 2, 3, 4, 5, 6)) == ("ID", (720,))
    d = od.detail_arrays(np.arange(6.0).reshape(2, 3) + 1, np.arange(6.0).reshape(2, 3), top=2)
    assert d is not None
    assert d.top_abs.coord_text(0) == "0 0 0 0" and d.top_abs.coord_text(1) == "0 1 0 0"


def test_degenerate_inputs():
    with pytest.raises(ValueError, match="1..10000"):
        od.detail_arrays(np.ones(3), np.ones(3), top=0)
    with pytest.raises(ValueError, match="does not match"):
        od.detail_arrays(np.ones(3), np.ones(4))
    d = od.detail_arrays(np.zeros(0), np.zeros(0))
    assert d is not None
    assert d.n == 0 and len(d.top_abs) == 0 and math.isnan(d.abs.max) and d.abs.count_above(0.1) == (0, 0)
    d = od.detail_arrays(np.array([1.0, 2.0]), np.zeros(2))  # golden all zero: no relative error at all
    assert d is not None
    assert len(d.top_rel) == 0 and d.rel.undefined == 2 and math.isnan(d.rel.max) and d.abs.max == 2.0
    d = od.detail_arrays(np.array([True, False, True]), np.array([True, True, True]))
    assert d is not None
    assert d.abs.max == 1.0 and d.top_abs.index[0] == 1
    cancel = threading.Event()
    cancel.set()
    assert od.detail_arrays(np.ones(10), np.ones(10), cancel=cancel) is None
    seen = []
    od.detail_arrays(np.ones(1000), np.ones(1000), chunk=100, progress=lambda p: seen.append((p.done, p.total)))
    assert seen[-1] == (1000, 1000)


def test_files_follow_the_msaccucmp_single_op_format(tmp_path):
    x, y = nasty_pair((1, 4, 6, 6), seed=2)
    d = od.detail_arrays(x, y, top=15)
    assert d is not None
    d.info = od.PairInfo("conv/1", "output", 0, "conv_a,relu_b", "Conv2D", "/d/npu.file", "/d/golden.npy")
    files = opfiles.write_detail(d, tmp_path / "out")
    assert [f.name for f in files] == ["conv_1_output_0_summary.txt", "conv_1_output_0_absolute_error_topn.csv",
                                       "conv_1_output_0_relative_error_topn.csv"]
    summary = dict(line.split(":", 1) for line in files[0].read_text().splitlines())
    assert summary["TotalCount"] == str(x.size) and summary["NPUDump"] == "conv/1"
    assert summary["GroundTruth"] == "conv_a relu_b" and summary["Format"] == "N C H W"
    e = brute_errors(x, y, "abs")
    assert summary["MaxAbsoluteError"] == f"{e[np.isfinite(e)].max():.6f}"
    assert summary["MinAbsoluteError"] == "0.000000"
    for path, by in zip(files[1:], od.METRICS):
        rows = list(csv.reader(path.open()))
        assert rows[0] == ["Index", "N C H W", "NPUDump", "GroundTruth", "AbsoluteError", "RelativeError"]
        body = rows[1:]
        assert len(body) == 15 and all(len(r) == 6 for r in body)
        want = brute_top(brute_errors(x, y, by), 15)
        assert [int(r[0]) for r in body] == want.tolist()
        for r, i in zip(body, want):
            assert r[1] == " ".join(map(str, np.unravel_index(i, x.shape)))
            for cell, v in ((r[2], x.ravel()[i]), (r[3], y.ravel()[i])):
                assert cell == ("-" if not np.isfinite(v) else f"{v:.6f}")
            if abs(float(y.ravel()[i])) <= EPS64 or not np.isfinite(x.ravel()[i]) or not np.isfinite(y.ravel()[i]):
                assert r[5] == "-"
        finite = [float(r[4]) for r in body if r[4] != "-" and "-" not in (r[2], r[3])]
        if by == "abs":
            assert finite == sorted(finite, reverse=True)  # largest first
    d = od.detail_arrays(np.ones(10), np.ones(10))
    assert d is not None
    d.info = od.PairInfo("x" * 300, "input", 2)
    names = [f.name for f in opfiles.write_detail(d, tmp_path / "long")]
    assert all(len(n) <= 255 and "_input_2_" in n for n in names)


# ------------------------------------------------------------------ on a real task, through the CLI

FAULTY = "Relu@4"  # planted in the NPU values: device op Conv@7Relu@4 (Conv+BN+Relu fused)
OP = "Conv@7Relu@4"


@pytest.fixture(scope="module")
def task(cls_model, tmp_path_factory):
    """A task folder of PP-OCR cls: golden dump, a simulated Ascend fp16 dump with one op broken."""
    root = tmp_path_factory.mktemp("opdetail")

    def break_channel_5(a):
        a[0, 5] += np.float32(3.0)
        return a
    sim = cls_with_planted_fault(cls_model, root, FAULTY, break_channel_5)
    spec = CompareSpec(str(root / "npu" / "dump"), str(root / "golden"), model=sim.model_json)
    table = engine.execute(engine.plan(spec), workers=1)
    folder = root / "task"
    assert table is not None
    save_task(folder, {"npu": spec.npu, "golden": spec.golden, "model": spec.model}, table, spec.thresholds)
    return folder


def test_open_op_finds_the_pair_and_its_broken_channel(task):
    pair = oppair.open_op(task, f"{OP}:output:0")
    assert pair.info.tensor == f"{OP}:output:0" and FAULTY in pair.info.golden_op
    d = pair.detail(top=5)
    assert d is not None
    assert d.layout == "N C H W" and d.channels is not None
    assert d.channels.worst(1)[0] == 5 and np.all(d.top_abs.coords[:, 1] == 5)
    with pytest.raises(SourceError, match="close matches: .*Conv@7Relu@4"):
        oppair.open_op(task, "Conv@7Relu@5")
    with pytest.raises(SourceError, match="index out of range"):
        oppair.open_op(task, OP, "input", 7)


def test_open_op_reuses_the_tasks_plan_until_the_task_is_rerun(tmp_path):
    """The op screen opens tensor after tensor: one plan serves them all, and a task re-run on
    other dumps is planned afresh."""
    golden = tmp_path / "golden"
    golden.mkdir()
    y = np.arange(12, dtype=np.float32)
    np.save(golden / "conv1.0.1.npy", y)
    np.save(golden / "relu1.0.1.npy", y)

    def dump(folder, scale):
        folder.mkdir()
        for k, op in enumerate(("conv1", "relu1")):
            write_dump_file(folder / f"Conv2D.{op}.{k + 1}.{1700000000000000 + k}", op, outputs=[DumpTensor(y * scale)])
        run_task(CompareSpec(str(folder), str(golden)), tmp_path / "task", workers=1)
    dump(tmp_path / "a", 2)
    task = load_task(tmp_path / "task")
    first = oppair.open_op(task, "conv1")
    assert oppair.open_op(task, "relu1").npu.source.startswith(str(tmp_path / "a"))
    assert present(first.detail()).npu_stats.max == 22
    plan = task.plan
    assert oppair.open_op(task, "conv1").npu is first.npu  # no second read of every dump header
    dump(tmp_path / "b", 3)
    assert load_task(tmp_path / "task").plan is not plan
    again = oppair.open_op(tmp_path / "task", "conv1")
    assert again.npu.source.startswith(str(tmp_path / "b")) and present(again.detail()).npu_stats.max == 33


def test_cli_op_prints_the_top_table_and_writes_msaccucmp_files(task, tmp_path):
    r = accuscope("op", task, OP, "--top", "5", "--threshold", "0.5")  # NAME=VALUE elsewhere: not guessed
    assert r.returncode == 2 and "the element error bound of `op` is --above C" in r.stderr
    r = accuscope("op", task, OP, "--top", "5", "--above", "0.5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Top 5 by absolute error" in r.stdout and "N C H W" in r.stdout
    assert "of tensor elements (" in r.stdout and "have an absolute error greater than 0.5" in r.stdout
    assert ": 5 (cos" in r.stdout.split("worst channels of")[1]  # the broken channel first
    folder = task / "op" / OP
    for suffix in ("summary.txt", "absolute_error_topn.csv", "relative_error_topn.csv"):
        assert (folder / f"{OP}_output_0_{suffix}").is_file()
    rows = list(csv.reader((folder / f"{OP}_output_0_absolute_error_topn.csv").open()))
    assert len(rows) == 6 and rows[0][1] == "N C H W" and rows[1][1].split()[1] == "5"
    r = accuscope("op", task, OP, "--input", "0", "--by", "rel", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Top 20 by relative error" in r.stdout and (tmp_path / "o" / f"{OP}_input_0_summary.txt").is_file()


def test_cli_op_unusable_input_exits_2(task, tmp_path):
    r = accuscope("op", task, "Conv@7Relu@5")
    text = r.stderr.replace("\n", "")
    assert r.returncode == 2 and "close matches: " in text and "Conv@7Relu@4" in text.split("close matches: ")[1]
    r = accuscope("op", task, OP, "--output", "3")
    assert r.returncode == 2 and "index out of range" in r.stderr.replace("\n", " ")
    r = accuscope("op", tmp_path / "nowhere", OP)
    assert r.returncode == 2 and "not a task folder" in r.stderr.replace("\n", " ")
    r = accuscope("op", task, OP, "--top", "0")
    assert r.returncode == 2 and "1..10000" in r.stderr
    assert "Traceback" not in r.stderr
