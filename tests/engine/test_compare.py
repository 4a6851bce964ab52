"""Whole-network comparison on a real model: planted fault found, pool equals inline, ranges,
plugins, cancellation, and the `accuscope compare` command end to end."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.metrics import compiled_kernel
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sides.registry import load_graph
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.data import cls_with_planted_fault

FAULTY = "Relu@4"  # last member of a fused Conv+BatchNorm+Relu device op


@pytest.fixture(scope="module")
def case(cls_model, tmp_path_factory):
    """A golden dump of PP-OCR cls, and an Ascend-style fp16 dump of it with one op's output broken."""
    root = tmp_path_factory.mktemp("cmp")
    noise = np.random.default_rng(1)
    sim = cls_with_planted_fault(cls_model, root, FAULTY, lambda a: a + noise.standard_normal(a.shape).astype(
        np.float32) * a.std())
    return root, sim


def spec(root, sim, **kw):
    return CompareSpec(str(root / "npu" / "dump"), str(root / "golden"), model=sim.model_json, **kw)


def test_planted_fault_is_the_only_failing_op_and_the_rest_agree_to_fp16(case):
    root, sim = case
    table = engine.execute(engine.plan(spec(root, sim)))
    assert table is not None
    c = table.columns
    out_rows = c["fail"] & (c["io"] == "output")
    assert set(c["npu_op"][out_rows]) == {"Conv@7Relu@4"}
    om = load_graph(sim.model_json)
    consumers = {n.name for n, _ in om.consumers("Conv@7Relu@4:0")}
    assert set(c["npu_op"][c["fail"] & (c["io"] == "input")]) == consumers  # they read the broken tensor
    ok = ~c["fail"] & ~np.isnan(c["cos"])
    assert ok.sum() > 400 and np.all(c["cos"][ok] > 0.9999)
    assert np.all(c["golden_op"][c["is_npu_only"]] == "*")
    assert c["is_output"].sum() >= 1


def test_process_pool_gives_the_same_numbers_as_inline(case, monkeypatch):
    root, sim = case
    plan = engine.plan(spec(root, sim, algorithms=["cos", "MaxAbsoluteError", "kl", "std"]))
    inline = engine.execute(plan, workers=1)
    monkeypatch.setattr(engine, "INLINE_BYTES", 0)
    pooled = engine.execute(plan, workers=2)
    for key in ("cos", "max_abs", "kl"):  # BLAS may sum in another order with other thread counts
        assert inline is not None
        assert pooled is not None
        np.testing.assert_allclose(inline.columns[key], pooled.columns[key], rtol=1e-12, atol=1e-15)
    assert inline is not None
    assert pooled is not None
    assert list(inline.columns["std"]) == list(pooled.columns["std"])
    assert np.isnan(inline.columns["rmse"]).all()  # not chosen


def test_range_keeps_ops_by_sequence_id(case):
    root, sim = case
    plan = engine.plan(spec(root, sim, op_range="3,-1,50"))
    seqs = sorted(set(r["op_seq"] for r in plan.rows))
    last = max(n.seq_id for n in load_graph(sim.model_json).nodes)
    assert seqs[0] == 3 and seqs[-1] == last and all((s - 3) % 50 == 0 for s in seqs[:-1])


def test_batch_callers_compare_with_the_collector_paused_and_interactive_ones_keep_it(case):
    """A row's objects hold no cycle: execute pauses the cyclic collector (gcpause), except for the app
    (inline_bytes=0), whose UI thread runs beside it; either way it is on again afterwards."""
    root, sim = case
    plan = engine.plan(spec(root, sim))
    for inline_bytes, on in ((None, False), (0, True)):
        seen: list[bool] = []
        table = engine.execute(plan, lambda p, seen=seen: seen.append(gc.isenabled()), workers=1,  # type: ignore[misc]  # (seen: this round's)
                               inline_bytes=inline_bytes)
        assert table is not None and seen and set(seen) == {on} and gc.isenabled()


def test_a_pause_empties_the_young_generations_and_leaves_what_another_froze_frozen():
    """After a pause what it made is in the oldest generation (no young collection walks it); where something
    is frozen already (the app's start-up), it stays frozen."""
    from accuscope.engine.compare import gcpause
    with gcpause.pause():
        made = [[k] for k in range(1000)]
    assert gc.isenabled() and gc.get_count()[0] < 10 and gc.get_freeze_count() == 0 and made  # not its 1,000
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gcpause.pause():
            more = [[k] for k in range(1000)]
        assert frozen and gc.get_freeze_count() == frozen and gc.isenabled() and more
    finally:
        gc.unfreeze()


def test_cancel_stops_early_and_returns_nothing(case):
    root, sim = case
    cancel = threading.Event()
    seen = []

    def progress(p):
        seen.append(p.done)
        cancel.set()
    plan = engine.plan(spec(root, sim))
    assert engine.execute(plan, progress, cancel, workers=1) is None
    assert len(seen) == 1 and seen[0] < len(plan.pairs)  # stopped after the first batch (a group of small pairs)


def test_plugin_column_and_failure_reason(case, tmp_path):
    root, sim = case
    (tmp_path / "algorithm").mkdir()
    (tmp_path / "algorithm" / "alg_MaxRatio.py").write_text(
        "import numpy as np\n"
        "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
        "    if my_output_dump_data.size < 100:\n"
        "        raise ValueError('too small')\n"
        "    return f'{float(np.abs(my_output_dump_data).max()):.3f}', ''\n")
    table = engine.execute(engine.plan(spec(root, sim, custom_dir=str(tmp_path), ops=["Conv@0BatchNormalization@0"])))
    assert table is not None
    assert table.custom == ["MaxRatio"] and all(v != "NaN" for v in table.columns["MaxRatio"])


def test_cli_compare_writes_a_task_and_flags_failures(case, tmp_path):
    root, sim = case
    args = ["compare", "--npu", root / "npu" / "dump", "--golden", root / "golden", "--model", sim.model_json,
            "--out", tmp_path / "task"]
    r = accuscope(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "first failing: Conv@7Relu@4:output:0" in r.stdout
    assert ("numpy fallback" in r.stdout) == (not compiled_kernel())
    task = load_task(tmp_path / "task")
    assert task.table is not None
    assert task.doc.state == "done" and len(task.table) > 400
    r = accuscope(*args[:-1], tmp_path / "slow", ACCUSCOPE_KERNEL="numpy")
    assert r.returncode == 0 and "metrics ran on the numpy fallback" in r.stdout
    slow = load_task(tmp_path / "slow").table
    for key in ("cos", "red", "kl", "mean_rel", "rel_0.1%"):
        assert slow is not None
        np.testing.assert_allclose(slow.columns[key], task.table.columns[key], rtol=1e-11, err_msg=key)
    # the exit code is the verdict's: the planted fault stays local (the output passes), so 0 with rows failing ...
    r = accuscope(*args[:-1], tmp_path / "local", "--fail-on-error")
    assert r.returncode == 0 and "verdict ✓ pass" in r.stdout and "first failing: Conv@7Relu@4" in r.stdout, r.stdout
    # ... and 1 once the output itself breaks a threshold
    r = accuscope(*args[:-1], tmp_path / "judged", "--fail-on-error", "--threshold", "cos=0.99999999999")
    assert r.returncode == 1, r.stdout
    assert load_task(tmp_path / "judged").doc.verdict == "fail" and "verdict ✗ fail" in r.stdout
    r = accuscope(*args, "--threshold", "coss=0.5")
    assert r.returncode == 2 and "did you mean cos" in r.stderr
    r = accuscope(*args[:-1], tmp_path / "t2", "--algorithms", "cos,nope")
    assert r.returncode == 2 and "unknown algorithm 'nope'" in r.stderr
    r = accuscope("compare", "--npu", tmp_path / "missing", "--golden", root / "golden", "--out", tmp_path / "t3")
    assert r.returncode == 2 and "missing: no such file or folder" in r.stderr


def test_a_plugin_that_ends_its_process_costs_only_its_own_row(case, tmp_path, monkeypatch):
    """A custom algorithm that kills its interpreter on one tensor ends only the plugin host
    (plugins never run in accuscope's own or the workers' processes): that row says so, every other
    row is still compared. (A worker dying is tested in test_faults.)"""
    root, sim = case
    (tmp_path / "algorithm").mkdir()
    (tmp_path / "algorithm" / "alg_Crash.py").write_text(
        "import os\n"
        "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
        f"    if '{FAULTY}' in os.path.basename(args['my_output_dump_file']):\n"
        "        os._exit(3)\n"
        "    return '1.0', ''\n")
    monkeypatch.setattr(engine, "INLINE_BYTES", 0)
    plan = engine.plan(spec(root, sim, custom_dir=str(tmp_path)))
    table = engine.execute(plan, workers=2)
    assert table is not None
    died = [i for i in range(len(table)) if "Crash ended its process (exit code 3)" in table.columns["reason"][i]]
    assert len(died) >= 1
    assert all(FAULTY in table.columns["npu_op"][i] for i in died)
    compared = [i for i in range(len(table)) if table.columns["Crash"][i] == "1.0"]
    assert len(compared) + len(died) == sum(p.golden is not None for p in plan.pairs)


def test_cli_compare_against_a_raw_bin_golden_needs_and_records_its_shape(tmp_path):
    """A bare .bin golden (e.g. from a TensorRT or bmodel run) is one tensor: shape and dtype come
    from the command line and are kept in task.json, so the task can be re-run."""
    from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
    y = np.random.default_rng(3).standard_normal((1, 8, 4, 4)).astype(np.float32)
    (tmp_path / "npu").mkdir()
    write_dump_file(tmp_path / "npu" / "Conv2D.conv1.3.1700000000000000", "conv1",
                    outputs=[DumpTensor((y * 1.01).astype(np.float16))])
    y.tofile(tmp_path / "conv1.bin")
    common = ["compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "conv1.bin"]
    r = accuscope(*common, "--out", tmp_path / "no")
    assert r.returncode == 2 and "needs both shape and dtype" in r.stderr
    r = accuscope(*common, "--shape", "1,8,4,4", "--dtype", "float32", "--out", tmp_path / "task")
    assert r.returncode == 0, r.stderr
    task = load_task(tmp_path / "task")
    assert task.table is not None
    [row] = [task.table.row(i) for i in range(len(task.table)) if task.table.columns["io"][i] == "output"]
    assert row["cos"] > 0.9999 and 0.009 < row["max_rel"] < 0.011
    spec = task.doc.spec(task.thresholds)
    assert spec.golden_shape == (1, 8, 4, 4) and spec.golden_dtype == "float32"
    assert len(engine.plan(spec).pairs) == 1


def test_a_pair_whose_sizes_differ_is_a_row_with_the_reason(tmp_path):
    from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
    (tmp_path / "npu").mkdir()
    write_dump_file(tmp_path / "npu" / "Conv2D.conv1.3.1700000000000000", "conv1",
                    outputs=[DumpTensor(np.ones((1, 8, 4, 4), np.float16))])
    np.ones((2, 8, 4, 4), np.float32).tofile(tmp_path / "conv1.bin")
    table = engine.execute(engine.plan(CompareSpec(str(tmp_path / "npu"), str(tmp_path / "conv1.bin"),
                                                          golden_shape=(2, 8, 4, 4), golden_dtype="float32")))
    assert table is not None
    [row] = [table.row(i) for i in range(len(table))]
    assert np.isnan(row["cos"])
    assert row["reason"] == "shape [1, 8, 4, 4] of the NPU tensor does not match shape [2, 8, 4, 4] of golden conv1"
