"""`--shards`: a tensor/pipeline-parallel msprobe run merged into one, on the files msprobe wrote
(tests/fixtures/msprobe/tp, make_tp.py: a Megatron-style model at TP=1, TP=2, TP=2 x PP=2 and TP=1 x PP=2, torch
CPU over gloo, tensor and statistics mode). Merged TP=2 against TP=1 passes on every call both sides hold; a wrong shard
order fails exactly the rows a concatenation or a vocabulary split made; statistics merge to TP=1's."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import judgement, shards
from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.npyfile import npy_file_tensor, read_npy_file
from accuscope.engine.sources.tensor import SourceError, Tensor, TensorError

TP = Path(__file__).parents[1] / "fixtures" / "msprobe" / "tp"
MERGED = "TP merge: "
BOOKKEEPING = shards.BOOKKEEPING


def compared(npu, golden, layout: str = "names"):
    p = plan(CompareSpec(str(npu), str(golden), shards=layout))
    table = execute(p, workers=1)
    assert table is not None
    state = judgement.evaluate(table, p.spec.thresholds)
    return p, [table.row(i) for i in range(len(table))], state.fail


def rule(row: dict) -> str:
    text = row["conversion"]
    return next((r for r in ("identical", "concat", "sum of", "rows by vocabulary") if r in text), "")


@pytest.mark.parametrize("npu", ["tp2", "tp2pp2"])
def test_merged_run_matches_tp1_on_every_call_both_hold(npu):
    p, rows, fail = compared(TP / npu, TP / "tp1")
    assert not fail.any(), [r["tensor"] for r, f in zip(rows, fail) if f]
    paired = [r for r, pair in zip(rows, p.pairs) if pair.golden is not None]
    assert len(paired) >= 50
    for row in paired:
        assert MERGED in row["conversion"] or BOOKKEEPING in row["reason"], row
        if BOOKKEEPING in row["reason"]:  # masks and local ids: per-rank values, listed and not compared
            assert row["npu_op"].startswith(("Tensor.", "Functional.embedding")), row
            continue
        if row["npu_value"]:  # a non-tensor argument or output: compared as a value, equal or not
            assert row["npu_value"] == row["golden_value"] and rule(row), row
            continue
        assert row["cos"] > 0.9999 and rule(row), row
    assert {rule(r) for r in paired} >= {"identical", "concat", "sum of" if npu == "tp2" else "concat"}
    if npu == "tp2":  # the vocabulary-parallel lookups, rows picked from the rank owning each id
        assert any(rule(r) == "rows by vocabulary" and r["npu_op"] == "Functional.embedding.0.forward" for r in paired)


def test_pipeline_stages_stitched_into_one_order():
    p, rows, _ = compared(TP / "tp2pp2", TP / "tp1")
    calls = list(dict.fromkeys(r["npu_op"] for r in rows))
    # stage 1 numbers its layers from 0 again: renumbered after stage 0's; forward of both stages, then the
    # backward of stage 1 before stage 0's
    assert calls.index("Module.layers.0.ParallelMLP.forward.0") < calls.index("Module.layers.1.ParallelMLP.forward.0") \
        < calls.index("Module.head.Linear.forward.0") < calls.index("Module.layers.1.ParallelMLP.backward.0") \
        < calls.index("Module.layers.0.ParallelMLP.backward.0")
    stage = {r["npu_op"]: r["conversion"].rsplit("PP stage ", 1)[1] for r in rows}
    assert stage["Module.layers.1.fc1.ColumnParallelLinear.forward.0"] == "1"
    assert stage["Module.embedding.VocabParallelEmbedding.forward.0"] == "0"
    grads = [r for r in rows if r["npu_op"] == "Module.layers.1.fc2.RowParallelLinear.parameters_grad.0"]
    assert {r["shape"] for r in grads} == {"[8,32]", "[8]"} and all(r["cos"] > 0.9999 for r in grads)


def test_wrong_shard_order_fails_the_split_rows(tmp_path):
    swapped = tmp_path / "swapped"
    shutil.copytree(TP / "tp2", swapped)
    step = swapped / "step0"
    (step / "rank0").rename(step / "tmp")
    (step / "rank1").rename(step / "rank0")
    (step / "tmp").rename(step / "rank1")
    _, rows, fail = compared(swapped, TP / "tp1")
    split = {r["tensor"] for r in rows if rule(r) in ("concat", "rows by vocabulary")}
    failing = {r["tensor"] for r, f in zip(rows, fail) if f}
    assert failing == split and len(split) >= 20
    assert all(rule(r) in ("identical", "sum of") for r, f in zip(rows, fail) if not f and rule(r))


@pytest.mark.parametrize("npu", ["tp2_stats", "tp2pp2_stats"])
def test_statistics_merge_to_tp1s_and_say_what_cannot(npu):
    p, rows, fail = compared(TP / npu, TP / "tp1_stats")
    assert not fail.any(), [r["tensor"] for r, f in zip(rows, fail) if f]
    checked = {"identical": 0, "concat": 0, "sum of": 0}
    for pair, row in zip(p.pairs, rows):
        if pair.golden is None or pair.npu.stats is None:
            continue
        for mine, theirs in zip(pair.npu.stats, pair.golden.stats):
            if mine is not None and theirs is not None:
                assert math.isclose(mine, theirs, rel_tol=1e-5, abs_tol=1e-6), (row["tensor"], pair.npu.stats,
                                                                                pair.golden.stats)
        checked[rule(row)] += 1
        if rule(row) == "sum of":  # a sum's Mean is the sum of the means; its Max, Min and Norm are not derivable
            assert pair.npu.stats[2] is not None and pair.npu.stats[0] is None
            assert "not derivable from the shards' statistics: Max, Min, Norm" in row["conversion"]
    assert all(n > 3 for n in checked.values()), checked
    vocab = [r for r in rows if rule(r) == "rows by vocabulary"]
    assert vocab and all("Max, Min, Mean, Norm" in r["conversion"] and r["reason"] for r in vocab)
    assert any(BOOKKEEPING in r["reason"] for r in rows)


def test_layout_file_says_the_split(tmp_path):
    layout = tmp_path / "layout.yaml"
    layout.write_text("tp: 2\npp: 2\nlayers: layers\nmodules:\n  \"layers.*.fc1\": column\n  RowParallelLinear: row\n")
    _, rows, fail = compared(TP / "tp2pp2", TP / "tp1", str(layout))
    assert not fail.any() and any("concat dim 0" in r["conversion"] and "fc1" in r["npu_op"] for r in rows)
    flipped = tmp_path / "flipped.yaml"  # fc1 said to be row-parallel: its weight joined along the wrong dimension
    flipped.write_text("modules:\n  \"*.fc1\": row\n")
    p, rows, fail = compared(TP / "tp2", TP / "tp1", str(flipped))
    # its (16, 8) weight shards joined along dim 1 hold as many elements as TP=1's (32, 8) weight: the shape
    # tells, the row is not compared element by element, and the comparison is never a pass
    weight = next(r for r in rows if r["tensor"] == "Module.layers.0.fc1.ColumnParallelLinear.forward.0:input:1")
    assert "shape [16, 16] of the NPU tensor does not match shape [32, 8]" in weight["reason"]
    assert "(merged from shards)" in weight["reason"] and math.isnan(weight["cos"])
    assert not any(f and "fc1" in r["npu_op"] for r, f in zip(rows, fail))
    assert any("do not have the other side's shape" in w and "--shards" in w for w in p.coverage.warnings)
    p, _, _ = compared(TP / "tp2", TP / "tp1")
    assert not p.coverage.misshapen and not p.coverage.warnings


def test_statistics_shape_mismatch_is_the_rows_reason(tmp_path):
    """fc1 said to be row-parallel: its (16, 8) weight shards joined along dim 1 into (16, 16), statistics all equal
    to TP=1's (32, 8) weight's; the shape is what tells, and the row says so instead of passing."""
    flipped = tmp_path / "flipped.yaml"
    flipped.write_text("modules:\n  \"*.fc1\": row\n")
    _, rows, fail = compared(TP / "tp2_stats", TP / "tp1_stats", str(flipped))
    wrong = [r for r in rows if "fc1" in r["npu_op"] and "does not match" in r["reason"]]
    assert not fail.any() and sum("does not match" in r["reason"] for r in rows) > len(wrong)
    assert len(wrong) == 12  # fc1's module calls (forward, backward, parameter gradients); its linear calls too
    row = next(r for r in wrong if r["tensor"] == "Module.layers.0.fc1.ColumnParallelLinear.parameters_grad.0:output:1")
    assert "shape [16, 16] of the NPU tensor does not match shape [32, 8] of golden" in row["reason"]
    assert math.isnan(row["max_diff"]) and math.isnan(row["stat_mag"])
    _, rows, _ = compared(TP / "tp2_stats", TP / "tp1_stats")  # the class names: fc1's shapes are right
    assert not [r for r in rows if "fc1" in r["npu_op"] and "does not match" in r["reason"]]


@pytest.mark.parametrize(("npu", "golden", "paired"), [("tp1pp2", "tp1", 53), ("tp1pp2_stats", "tp1_stats", 209)])
def test_pipeline_without_tensor_parallelism_needs_no_layout(npu, golden, paired):
    """TP=1 x PP=2 (make_tp.py): rank1 makes other module calls than rank0, so no TP group holds two ranks; the
    stages are stitched with no layout file and every call both runs make agrees with TP=1's."""
    run = shards.merge(str(TP / npu), shards="names")
    assert (run.tp, run.pp) == (1, 2) and not run.decisions and "TP=1: rank1 makes other module calls" in run.found
    assert run.stitched == len(run.tensors) and run.renamed > 0
    p, rows, fail = compared(TP / npu, TP / golden)
    assert not fail.any(), [r["tensor"] for r, f in zip(rows, fail) if f]
    both = [r for r, pair in zip(rows, p.pairs) if pair.golden is not None]
    assert len(both) == paired and all("PP stage" in r["conversion"] for r in rows)
    alone = {r["npu_op"].split(".")[1] for r, pair in zip(rows, p.pairs) if pair.golden is None}
    assert alone <= {"send", "recv"}  # the stages' point-to-point calls: TP=1 makes none
    calls = list(dict.fromkeys(r["npu_op"] for r in rows))
    assert calls.index("Module.layers.0.ParallelMLP.forward.0") < calls.index("Module.layers.1.ParallelMLP.forward.0") \
        < calls.index("Module.layers.1.ParallelMLP.backward.0") < calls.index("Module.layers.0.ParallelMLP.backward.0")


def test_ranks_of_different_runs_are_not_a_pipeline(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(TP / "tp1pp2_stats", run)
    shutil.rmtree(run / "step0" / "rank1")
    shutil.copytree(TP / "tp1_stats" / "step0" / "rank0", run / "step0" / "rank1")  # the whole model: embedding too
    with pytest.raises(SourceError) as err:
        shards.merge(str(run), shards="names")
    assert str(run / "step0" / "rank1") in str(err.value) and "which rank0 calls too" in str(err.value)


@pytest.mark.parametrize(("text", "said"), [
    ("modules:\n  fc1: diagonal\n", "'diagonal' is not one of column, row, vocab, replicated"),
    ("tp: two\n", "tp: 'two' is not a positive whole number"),
    ("sharding: 2\n", "unknown keys sharding"),
    ("tp: 3\n", "missing: TP=3 x PP=1 needs rank0..rank2"),
    ("pp: 3\n", "do not divide into TP=0 x PP=3"),
])
def test_bad_layout_is_a_message_naming_the_file(tmp_path, text, said):
    layout = tmp_path / "layout.yaml"
    layout.write_text(text)
    with pytest.raises(SourceError, match=r".*") as err:
        plan(CompareSpec(str(TP / "tp2"), str(TP / "tp1"), shards=str(layout)))
    assert said in str(err.value) and (str(layout) in str(err.value) or "rank2" in str(err.value))


def test_missing_rank_and_shape_mismatch(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(TP / "tp2pp2_stats", run)
    shutil.rmtree(run / "step0" / "rank1")
    with pytest.raises(SourceError) as err:
        plan(CompareSpec(str(run), str(TP / "tp1_stats"), shards="names"))
    assert str(run / "step0" / "rank1") in str(err.value) and "missing" in str(err.value)
    shutil.copytree(TP / "tp2_stats" / "step0" / "rank1", run / "step0" / "rank1")  # another run's rank
    with pytest.raises(SourceError, match="module calls differ from rank0's"):
        plan(CompareSpec(str(run), str(TP / "tp1_stats"), shards="names"))
    shutil.rmtree(run / "step0" / "rank1")
    shutil.copytree(TP / "tp2pp2_stats" / "step0" / "rank1", run / "step0" / "rank1")
    shutil.rmtree(run / "step0" / "rank3")
    with pytest.raises(SourceError, match=r"3 ranks \(rank0..rank2\) do not divide into TP=2"):
        plan(CompareSpec(str(run), str(TP / "tp1_stats"), shards="names"))

    bent = tmp_path / "bent"
    shutil.copytree(TP / "tp2_stats", bent)
    doc = bent / "step0" / "rank1" / "dump.json"
    data = json.loads(doc.read_text())
    data["data"]["Functional.linear.0.forward"]["output"][0]["shape"] = [2, 3, 15]
    doc.write_text(json.dumps(data))
    p, rows, _ = compared(bent, TP / "tp1_stats")
    row = next(r for r in rows if r["tensor"] == "Functional.linear.0.forward:output:0")
    assert "shard shapes differ (rank0 [2, 3, 16], rank1 [2, 3, 15])" in row["reason"]


def test_shards_needs_a_parallel_side():
    with pytest.raises(SourceError, match="nothing to merge"):
        plan(CompareSpec(str(TP / "tp1"), str(TP / "tp1"), shards="names"))
    with pytest.raises(SourceError, match="--rank picks one"):
        plan(CompareSpec(str(TP / "tp2"), str(TP / "tp1"), shards="names", rank="0"))


def test_split_dimension_from_parameter_shapes_and_the_other_side():
    """Outside a parallel module (the optimizer's updates, the GELU between fc1 and fc2) nothing but sizes said
    the dimension: a parallel module's parameter shard of the same shape decides it, else the other side's shape,
    and a dimension still guessed says so on the row."""
    run = shards.merge(str(TP / "tp2_stats"), shards="names")
    by_parameter = [d for d in run.decisions if "as the shard of" in d.why]
    assert len(by_parameter) == 21 and all(d.call.startswith("Tensor.add_.") for d in by_parameter)
    assert {d.dim for d in by_parameter if "embedding.weight" in d.why} == {0}
    guessed = [d for d in run.decisions if d.why.startswith(shards.GUESSED)]
    assert len(guessed) == shards.survey(run)["concat_dim_guessed"] == 8
    assert {d.call.split(".")[1] for d in guessed} == {"gelu"}
    p, rows, fail = compared(TP / "tp2_stats", TP / "tp1_stats")
    assert not fail.any() and not any(shards.GUESSED in r["conversion"] for r in rows)
    assert not any("does not match" in r["reason"] for r in rows)  # the updates of the (16, 8) shards: (32, 8)
    gelu = [r for r in rows if r["npu_op"].startswith("Functional.gelu.")]
    assert len(gelu) == 8 and all("dim 2 as the golden side's shape [2, 3, 32] says" in r["conversion"] for r in gelu)


def test_settle_joins_along_the_dimension_the_other_side_makes():
    tensors, _, _ = shards.read(str(TP / "tp2"), shards="names")
    gelu = next(t for t in tensors if t.name == "Functional.gelu.0.forward:output:0")
    assert gelu.shape == (2, 3, 32) and shards.GUESSED in gelu.conversion
    assert shards.settle(gelu, (2, 3, 32)).shape == (2, 3, 32)
    assert shards.settle(gelu, (4, 3, 32)) is gelu  # no dimension makes it: left guessed (a shape mismatch)
    moved = shards.settle(gelu, (2, 6, 16), "NPU")
    assert moved.shape == (2, 6, 16) and "concat dim 1 of rank0,rank1, dim 1 as the NPU side's shape" in moved.conversion
    whole = gelu.load()
    assert (moved.load() == np.concatenate([whole[..., :16], whole[..., 16:]], axis=1)).all()


def test_vocabulary_split_needs_the_shard_size():
    """A vocab-parallel lookup's rows are picked by the rank owning each token id: rank k owns rows k*size
    and on, so without the embedding weight's shard (its size) the output is not merged, and says why
    (it was merged by vocabulary before, and loading it raised a TypeError)."""
    f32 = np.dtype(np.float32)

    def shard(rank: int) -> Tensor:
        return Tensor("embedding", "output", 0, f32, (2, 3, 8), f"rank{rank}", stats=(float(rank), 0.0, 0.0, 0.0))
    ids: list[Tensor | None] = [Tensor("embedding", "input", 0, np.dtype(np.int64), (2, 3), f"rank{r}") for r in (0, 1)]
    how, _, why = shards.rule([shard(0), shard(1)], shards.VOCAB, None, ids)
    assert how == "" and "shard size is unknown" in why
    assert shards.rule([shard(0), shard(1)], shards.VOCAB, 16, ids)[0] == shards.BY_VOCAB


@pytest.mark.parametrize("npu", ["tp2pp2_stats", "tp1pp2", "tp2"])
def test_merged_module_tree_is_one_tree_of_the_rows_names(npu):
    """The graph pane's modules of a merged side: every stage's modules in one tree (not rank0's alone), its
    calls named as the merged rows are (layers and API counters renumbered), TP=1's module calls."""
    from accuscope.engine.graphs.msprobegraph import load_msprobe
    graph = shards.merged_modules(str(TP / npu), shards="names")
    run = shards.merge(str(TP / npu), shards="names", stats_only=True)
    names = [n.name for n in graph.nodes]
    assert len(names) == len(set(names))
    assert {t.op for t in run.tensors if t.value is None} <= set(names)  # every merged row's call is a node
    assert f"(merged TP={run.tp} x PP={run.pp})" in graph.name
    assert graph.label == f"merged TP={run.tp} x PP={run.pp}"  # what the graph pane says
    modules = {n.attrs["module"] for n in graph.nodes if "module" in n.attrs}
    rank0 = {n.attrs["module"] for n in load_msprobe(str(TP / npu), rank=0).nodes if "module" in n.attrs}
    assert rank0 <= modules and {"layers.0", "layers.1"} <= modules
    tp1 = load_msprobe(str(TP / ("tp1_stats" if npu.endswith("_stats") else "tp1")))
    ours = [n.name for n in graph.nodes if "module" in n.attrs and ".forward" in n.name]
    assert ours == [n.name for n in tp1.nodes if "module" in n.attrs and ".forward" in n.name]
    module = {n.name: n.attrs.get("module") for n in graph.nodes}
    held = {n.name: module.get(n.subgraph) for n in graph.nodes}  # each call under its module, stage 1's renumbered
    calls = [t for t in run.tensors if t.op_type and not t.op.startswith("Module.") and not t.op_type == "optimizer"]
    assert all(held[t.op] == t.op_type for t in calls)
    assert any(held[name] == "layers.1" for name in names)


def test_merged_data_read_into_place_are_the_shards_joined(tmp_path):
    """Shards too large to be kept from their header's read are read from their files straight into the merged
    tensor (a concatenation along dim 0, a sum's or a replicated tensor's first shard) or through one scratch
    buffer (along a later dim, the other shards): the values numpy's concatenate and sum of the shards give; a
    replicated shard that differs, or one cut short, is a TensorError."""
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((64, 48), dtype=np.float32) for _ in range(4)]  # 12 KB: not kept, read from the file

    def shard(name: str, data: np.ndarray) -> Tensor:
        path = str(tmp_path / f"{name}.npy")
        np.save(path, data)
        meta, offset, kept = read_npy_file(path, keep=True)
        assert kept is None
        return npy_file_tensor(name, path, meta, offset, None)
    split = tuple(shard(f"part{k}", p) for k, p in enumerate(parts))
    labels = "rank0,rank1,rank2,rank3"
    for dim in (0, 1):
        assert np.array_equal(shards.load_merged(shards.CONCAT, dim, split, None, labels, 64), np.concatenate(parts, dim))
    assert np.array_equal(shards.load_merged(shards.SUM, 0, split, None, labels, None),
                          ((parts[0] + parts[1]) + parts[2]) + parts[3])
    copies = tuple(shard(f"copy{k}", parts[0]) for k in range(4))
    assert np.array_equal(shards.load_merged(shards.ONCE, 0, copies, None, labels, None), parts[0])
    with pytest.raises(TensorError, match="shard 2 differs from the first"):
        shards.load_merged(shards.ONCE, 0, (copies[0], copies[1], split[1], copies[3]), None, labels, None)
    with open(split[2].source, "r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(TensorError, match="file ends before the tensor's last byte") as err:
        shards.load_merged(shards.CONCAT, 1, split, None, labels, 48)
    assert split[2].source in str(err.value)
