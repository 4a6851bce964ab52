"""msprobe dumps as a source: real fixtures written by msprobe's own PyTorch dumper (2 ranks; see
tests/fixtures/msprobe/make_fixtures.py), .pt read without torch, statistics and CRC-32 triage,
the first diverging call, the multi-rank demo, and bad input."""
from __future__ import annotations

import ast
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import statcolumns, statistics
from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo import msprobesim
from accuscope.engine.graphs.msprobegraph import load_msprobe
from accuscope.engine.sides.registry import detect, open_side
from accuscope.engine.sources import msprobe, torchpickle
from accuscope.engine.sources.tensor import SourceError, Tensor
from support.narrow import present
from support.pickles import hostile_pt, write_pt

FIX = Path(__file__).parents[1] / "fixtures" / "msprobe"
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          env=ENV, timeout=120)


def compare(npu, golden, **options):
    spec = CompareSpec(str(npu), str(golden), **options)
    p = plan(spec)
    return p, execute(p, workers=1)


# ---------------------------------------------------------------- layout and reading


def test_ranks_lists_every_step_and_rank_and_the_registry_detects_it():
    found = msprobe.ranks(str(FIX / "cand"))
    assert [(s, r) for s, r, _ in found] == [("step0", "rank0"), ("step0", "rank1")]
    assert msprobe.ranks(found[1][2]) == [("step0", "rank1", found[1][2])]  # a rank folder itself
    assert detect(str(FIX / "cand")).kind == "msprobe"
    assert detect(str(FIX / "bench_md5" / "step0")).kind == "msprobe"


def test_several_ranks_without_a_choice_is_an_error_listing_them():
    with pytest.raises(SourceError, match=r"step0/rank0, step0/rank1.*--step and --rank"):
        open_side(str(FIX / "cand"))
    with pytest.raises(SourceError, match="no folder for step any and rank 7; it holds: step0/rank0"):
        open_side(str(FIX / "cand"), rank="7")


def test_pt_tensors_read_without_torch_match_the_statistics_msprobe_recorded():
    side = open_side(str(FIX / "cand"), rank="rank1")
    assert [t.tensor_name for t in side.tensors] == ["Tensor.__mul__.0.forward.input.0",
                                                       "Tensor.__mul__.0.forward.input.1",
                                                       "Tensor.__mul__.0.forward.output.0"]
    tensors = list(side.tensors)
    scale = tensors.pop(1)  # the planted scale: an argument, read as a value
    assert (scale.value, scale.dtype_name, scale.reader, scale.index) == ("1.5", "float", None, 1)
    for t in tensors:
        data = t.load()
        assert t.source.endswith(".pt") and t.payload is not None
        mx, mn, mean, norm = present(t.stats)
        assert data.shape == t.shape == (2, 3) and data.dtype == np.float32
        assert mx is not None
        assert mn is not None
        assert math.isclose(data.max(), mx, rel_tol=1e-6) and math.isclose(data.min(), mn, abs_tol=1e-7)
        assert mean is not None
        assert norm is not None
        assert math.isclose(data.mean(), mean, rel_tol=1e-5) and math.isclose(np.linalg.norm(data), norm, rel_tol=1e-5)
    out = tensors[1].load()
    assert np.allclose(out, tensors[0].load() * 1.5)  # the planted scale of rank 1


def test_statistics_mode_calls_modules_and_construct_hierarchy():
    side = open_side(str(FIX / "cand_md5"), rank=1)
    calls = list(dict.fromkeys(t.op for t in side.tensors))
    assert calls == ["Functional.linear.0.forward", "Module.fc1.Linear.forward.0", "Functional.relu.0.forward",
                     "Module.act.ReLU.forward.0", "Tensor.__mul__.0.forward", "Functional.softmax.0.forward"]
    assert all(t.reader is None and t.stats is not None and len(t.checksum) == 8 for t in side.tensors
               if t.value is None)
    assert [(t.tensor_name, t.value) for t in side.tensors if t.value is not None] == [
        ("Functional.relu.0.forward.input.inplace", "False"), ("Tensor.__mul__.0.forward.input.1", "1.5"),
        ("Functional.softmax.0.forward.input.dim", "-1")]
    by_op = {t.op: t.op_type for t in side.tensors}
    assert by_op["Functional.linear.0.forward"] == "fc1" and by_op["Module.act.ReLU.forward.0"] == "act"
    assert by_op["Functional.softmax.0.forward"] == ""
    linear = [t for t in side.tensors if t.op == "Module.fc1.Linear.forward.0"]
    assert [t.tensor_name.split("forward.0.")[1] for t in linear] == ["input.0", "output.0",
                                                                     "parameters.weight", "parameters.bias"]
    g = load_msprobe(str(FIX / "cand_md5"), rank=1)
    assert present(g.node("Functional.relu.0.forward")).subgraph == "Module.act.ReLU.forward.0"
    assert len(g.nodes) == len(calls)


# ---------------------------------------------------------------- statistics-first triage


def test_statistics_cells_follow_msprobes_rules():
    def t(*stats, crc=""):
        return Tensor("op", "output", 0, None, (), "dump.json", stats=stats, checksum=crc)
    cells = statistics.compare(t(3.0, -1.0, 0.5, 4.0), t(2.0, -1.0, 0.0, 8.0))
    assert cells["max_diff"] == 1.0 and cells["min_diff"] == 0.0 and cells["mean_diff"] == 0.5
    assert cells["max_relerr"] == 50.0 and cells["norm_relerr"] == 50.0 and cells["mean_relerr"] == math.inf
    assert math.isclose(cells["stat_mag"], 1.0, rel_tol=1e-9)  # mean 0.5 against 0: all of its magnitude
    assert "npu_md5" not in cells
    cells = statistics.compare(t(1.0, 1.0, 1.0, 1.0, crc="0000abcd"), t(1.0, 1.0, 1.0, 1.0, crc="0000abce"))
    assert cells["stat_mag"] == 0.0 and cells["npu_md5"] != cells["golden_md5"]
    cells = statistics.compare(Tensor("op", "output", 0, None, (), "x"), t(1.0, 1.0, 1.0, 1.0))
    assert "neither data nor statistics" in cells["reason"]


def test_dump_json_reads_alike_with_and_without_orjson_and_with_nan(tmp_path, monkeypatch):
    assert msprobe._orjson() is not None  # the test extra installs it: both parsers are exercised here
    fast, _ = msprobe.read(str(FIX / "cand_md5"), rank=1)
    monkeypatch.setattr(msprobe, "_orjson", lambda: None)
    plain, _ = msprobe.read(str(FIX / "cand_md5"), rank=1)
    assert [(t.tensor_name, t.stats, t.checksum, t.shape, t.dtype_name) for t in fast] == [
        (t.tensor_name, t.stats, t.checksum, t.shape, t.dtype_name) for t in plain]
    monkeypatch.undo()
    folder = tmp_path / "step0" / "rank0"
    shutil.copytree(FIX / "cand_md5" / "step0" / "rank1", folder)
    doc = json.loads((folder / "dump.json").read_text())
    entry = next(iter(doc["data"].values()))["output"][0]
    entry.update(Max=math.nan, Min=-math.inf)
    (folder / "dump.json").write_text(json.dumps(doc))  # NaN and -Infinity, as Python's json writes them
    tensors, problems = msprobe.read(str(tmp_path))
    assert not problems and len(tensors) == len(plain)
    out = next(t for t in tensors if present(t.stats)[1] == -math.inf)
    assert out.stats is not None
    assert math.isnan(present(out.stats[0]))


def _synthetic_statistics(folder: Path, calls: int, seed: int) -> None:
    """A statistics dump.json of `calls` calls as msprobe writes it: API and module calls (parameters,
    keyword and nested arguments, construct.json), some statistics missing, some checksums."""
    rng = np.random.default_rng(seed)

    def tensor(k: int) -> dict:
        mx, mn, mean, norm = (float(v) for v in rng.standard_normal(4) * (3.0 if k % 97 == 0 else 1.0))
        entry = {"type": "torch.Tensor", "dtype": "torch.float16", "shape": [k % 5 + 1, 8], "Max": mx, "Min": mn,
                 "Mean": mean, "Norm": abs(norm), "requires_grad": False}
        if k % 13 == 0:
            entry["Mean"] = None  # msprobe writes null for a statistic it could not take
        if k % 7 == 0:
            entry["md5"] = f"{k:08x}"
        return entry
    data, construct = {}, {}
    for k in range(calls):
        if k % 10 == 0:
            call = f"Module.layers.{k}.Linear.forward.0"
            data[call] = {"input_args": [tensor(k)], "input_kwargs": {}, "output": [tensor(k + 1)],
                          "parameters": {"weight": tensor(k + 2), "bias": tensor(k + 3)}}
        else:
            call = f"Functional.linear.{k}.forward"
            data[call] = {"input_args": [tensor(k), [tensor(k + 1), tensor(k + 2)]],
                          "input_kwargs": {"bias": tensor(k + 3)}, "output": [tensor(k + 4)]}
            construct[call] = f"Module.layers.{k - k % 10}.Linear.forward.0"
    folder.mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "mix", "framework": "pytorch",
                                                  "dump_data_dir": None, "data": data}))
    (folder / "construct.json").write_text(json.dumps(construct))


def _same_rows(spec: CompareSpec) -> int:
    """The statistics columns give the rows, metric columns and coverage plan / execute give."""
    fast = statcolumns.compare(spec)
    assert fast is not None, "the columnar path did not take this comparison"
    table, coverage = fast
    p = plan(spec)
    general = execute(p, workers=1)
    assert general is not None
    assert coverage == p.coverage and table.present == general.present
    assert set(table.columns) == set(general.columns)
    for key, column in general.columns.items():
        if column.dtype.kind == "f":
            assert np.array_equal(table.columns[key], column, equal_nan=True), key
        else:
            assert table.columns[key].tolist() == column.tolist(), key
    return len(table)


def test_statistics_columns_give_the_general_paths_rows(tmp_path, monkeypatch):
    for npu, golden in (("cand_md5", "bench_md5"), ("cand", "bench")):
        for rank in ("0", "1"):
            assert _same_rows(CompareSpec(str(FIX / npu), str(FIX / golden), rank=rank, stats_only=True))
    assert _same_rows(CompareSpec(str(FIX / "cand_md5"), str(FIX / "bench_md5"), rank="1"))  # a statistics dump
    _synthetic_statistics(tmp_path / "npu" / "step0" / "rank0", 2000, seed=1)
    _synthetic_statistics(tmp_path / "golden" / "step0" / "rank0", 2000, seed=2)
    spec = CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"), stats_only=True)
    assert _same_rows(spec) == 200 * 4 + 1800 * 5  # module calls hold 4 tensors, API calls 5
    table, _ = present(statcolumns.compare(spec))
    assert table.columns["fail"].any() and (table.columns["reason"] == "").all()
    monkeypatch.setattr(msprobe, "_dumpscan", None)  # built without a C compiler: the Python twin
    assert _same_rows(spec) == 200 * 4 + 1800 * 5


def test_the_general_path_compares_what_the_columns_do_not_hold(tmp_path):
    # tensor files to read, a mapping file, mismatched tensor counts: plan / execute
    assert statcolumns.compare(CompareSpec(str(FIX / "cand"), str(FIX / "bench"), rank="1")) is None
    mapping = tmp_path / "map.csv"
    mapping.write_text("a,b\n")
    assert statcolumns.compare(CompareSpec(str(FIX / "cand_md5"), str(FIX / "bench_md5"), rank="1",
                                           mapping=str(mapping))) is None
    for side in ("npu", "golden"):
        shutil.copytree(FIX / "cand_md5" / "step0" / "rank1", tmp_path / side / "step0" / "rank1")
    doc = json.loads((tmp_path / "npu" / "step0" / "rank1" / "dump.json").read_text())
    entry = next(iter(doc["data"].values()))
    entry["output"].append(entry["output"][0])
    (tmp_path / "npu" / "step0" / "rank1" / "dump.json").write_text(json.dumps(doc))
    assert statcolumns.compare(CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"), stats_only=True)) is None


def test_md5_mode_flags_the_planted_call_and_the_advisor_names_it(tmp_path):
    r = accuscope("compare", "--npu", FIX / "cand_md5", "--golden", FIX / "bench_md5", "--rank", "1",
                  "--out", tmp_path / "t", "--advisor", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    first = next(f for f in doc["findings"] if f["rule"] == "first_call")
    assert first["op"] == "Tensor.__mul__.0.forward" and first["severity"] == "error"
    shown = accuscope("show", tmp_path / "t", "--format", "csv", "--failing")
    assert shown.returncode == 0 and "npu_md5" in shown.stdout.splitlines()[0]
    assert "Tensor.__mul__.0.forward" in shown.stdout.splitlines()[1]
    same = accuscope("compare", "--npu", FIX / "cand_md5", "--golden", FIX / "bench_md5", "--rank", "0",
                     "--out", tmp_path / "r0", "--fail-on-error")
    assert same.returncode == 0 and "failing 0" in same.stdout


def test_stats_only_reads_no_tensor_file(tmp_path):
    for side in ("cand", "bench"):
        shutil.copytree(FIX / side, tmp_path / side)
        for f in (tmp_path / side).rglob("*.pt"):
            f.write_bytes(b"not read")  # a tensor file opened would be a problem row
    p, table = compare(tmp_path / "cand", tmp_path / "bench", rank="1", stats_only=True)
    assert not p.problems
    rows = {table.columns["tensor"][i]: i for i in range(len(table))}
    out = rows["Tensor.__mul__.0.forward:output:0"]
    assert table.columns["max_diff"][out] > 0 and not table.columns["fail"][out]  # 1.5x < 0.5 rule
    scale = rows["Tensor.__mul__.0.forward:input:1"]  # what does fail: the scale argument, 1.5 against 1.0
    assert table.columns["fail"].tolist() == [False, True, False] and table.columns["fail"][scale]
    assert math.isclose(table.columns["max_relerr"][out], 50.0, rel_tol=1e-5)
    assert math.isnan(table.columns["cos"][out])


def test_tensor_mode_pairs_by_name_and_the_first_call_diverges_on_rank_1(tmp_path):
    r = accuscope("compare", "--npu", FIX / "cand", "--golden", FIX / "bench", "--rank", "rank1",
                  "--out", tmp_path / "t", "--advisor")
    assert r.returncode == 0, r.stderr
    assert "Tensor.__mul__.0.forward is the first call that diverges" in r.stdout
    assert "paired 3 of 3" in r.stdout  # the two tensors and the scale argument


def test_npy_tensors_are_opened_once(tmp_path, monkeypatch):
    """An npy dump's files are opened once, when read: the header parsed there and a small file's data
    kept, so loading it opens nothing (it was opened twice: for the header, again for the data)."""
    msprobesim.write(str(tmp_path / "d"), ranks=1, steps=1)
    opened: list[str] = []
    real = os.open

    def recorded(path, *a, **k):
        opened.append(os.fspath(path))
        return real(path, *a, **k)
    monkeypatch.setattr(os, "open", recorded)
    tensors, problems = msprobe.read(str(tmp_path / "d"), step=0, rank=0)
    files = [t for t in tensors if t.source.endswith(".npy")]
    assert files and not problems and len(opened) == len(set(opened)) >= len(files)
    opened.clear()
    for t in files:
        assert np.array_equal(t.load(), np.load(t.source))
    assert opened == []


# ---------------------------------------------------------------- bad input


def test_dump_json_cut_short_still_compares_the_tensor_files(tmp_path):
    shutil.copytree(FIX / "cand", tmp_path / "cand")
    doc = tmp_path / "cand" / "step0" / "rank1" / "dump.json"
    doc.write_bytes(doc.read_bytes()[:200])
    p, table = compare(tmp_path / "cand", FIX / "bench", rank="1")
    assert any("dump.json" in pr.path and "cut short" in pr.message for pr in p.problems)
    assert len(table) == 2 and table.columns["fail"].tolist() == [False, True]
    r = accuscope("compare", "--npu", tmp_path / "cand", "--golden", FIX / "bench", "--rank", "1", "--out",
                  tmp_path / "t")
    assert r.returncode == 0 and "Traceback" not in r.stderr + r.stdout


def test_a_rank_missing_on_one_side_is_a_message_naming_it(tmp_path):
    shutil.copytree(FIX / "cand", tmp_path / "cand")
    shutil.rmtree(tmp_path / "cand" / "step0" / "rank1")
    r = accuscope("compare", "--npu", tmp_path / "cand", "--golden", FIX / "bench", "--rank", "1", "--out",
                  tmp_path / "t")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no folder for step any and rank 1; it holds: step0/rank0" in r.stderr.replace("\n", "")


def test_mismatched_tensor_counts_are_rows_with_a_reason(tmp_path):
    shutil.copytree(FIX / "bench_md5", tmp_path / "bench")
    doc = tmp_path / "bench" / "step0" / "rank0" / "dump.json"
    data = json.loads(doc.read_text())
    call = data["data"]["Functional.softmax.0.forward"]
    call["input_args"].append(dict(call["input_args"][0]))
    doc.write_text(json.dumps(data))
    _, table = compare(FIX / "cand_md5", tmp_path / "bench", rank="0")
    reasons = {table.columns["tensor"][i]: table.columns["reason"][i] for i in range(len(table))}
    for slot in ("input:0", "output:0"):  # the whole call
        assert "1 input and 1 output tensors, golden Functional.softmax.0.forward 2 and 1" in \
            reasons[f"Functional.softmax.0.forward:{slot}"]
        assert "msprobe pairs a call only when the counts match" in reasons[f"Functional.softmax.0.forward:{slot}"]
    assert reasons["Tensor.__mul__.0.forward:output:0"] == ""


def test_a_mapping_file_pairs_renamed_calls(tmp_path):
    shutil.copytree(FIX / "bench_md5", tmp_path / "bench")
    doc = tmp_path / "bench" / "step0" / "rank0" / "dump.json"
    data = json.loads(doc.read_text())
    data["data"] = {k.replace("Functional.softmax", "Mint.softmax"): v for k, v in data["data"].items()}
    doc.write_text(json.dumps(data))
    _, table = compare(FIX / "cand_md5", tmp_path / "bench", rank="0")
    assert "no golden tensor" in table.columns["reason"][len(table) - 1]
    mapping = tmp_path / "map.csv"
    mapping.write_text("Functional.softmax.0.forward,Mint.softmax.0.forward\n")
    _, table = compare(FIX / "cand_md5", tmp_path / "bench", rank="0", mapping=str(mapping))
    assert table.columns["how"][len(table) - 1] == "mapping" and table.columns["golden_md5"][len(table) - 1]


def _pt_with(tmp_path: Path, payload: bytes) -> Path:
    return write_pt(tmp_path / "dump_tensor_data" / "Functional.relu.0.forward.output.0.pt", payload)


class _Plain:
    pass


def test_a_malicious_pt_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = hostile_pt(tmp_path / "dump_tensor_data" / "Functional.relu.0.forward.output.0.pt", marker)
    with pytest.raises(torchpickle.PtError, match=r"refused global (posix|os)\.system"):
        torchpickle.describe(str(path))
    assert not marker.exists()
    # the same file as one tensor of a dump without dump.json: a problem on that tensor, the rest loads
    shutil.copy(FIX / "bench" / "step0" / "rank0" / "dump_tensor_data" / "Tensor.__mul__.0.forward.input.0.pt",
                tmp_path / "dump_tensor_data")
    tensors, problems = msprobe.read(str(tmp_path))
    assert not marker.exists()
    bad = next(t for t in tensors if t.op == "Functional.relu.0.forward")
    assert "refused global" in bad.problem and any("refused global" in p.message for p in problems)
    assert next(t for t in tensors if t.op == "Tensor.__mul__.0.forward").load().shape == (2, 3)
    assert any("dump.json" in p.path and "missing" in p.message for p in problems)


def test_an_unknown_pickle_opcode_is_named(tmp_path):
    path = _pt_with(tmp_path, pickle.dumps(_Plain(), protocol=2))  # NEWOBJ: an object, not a tensor
    with pytest.raises(torchpickle.PtError, match="refused pickle opcode NEWOBJ"):
        torchpickle.describe(str(path))
    path = _pt_with(tmp_path, b"\x80\x02\xff.")
    with pytest.raises(torchpickle.PtError, match="not a pickle"):
        torchpickle.describe(str(path))
    path.write_bytes(b"PK not a zip")
    with pytest.raises(torchpickle.PtError, match="not a zip"):
        torchpickle.describe(str(path))


# ---------------------------------------------------------------- the multi-rank demo


def test_demo_dumps_name_the_faulty_rank_and_call(tmp_path):
    msprobesim.write(str(tmp_path / "golden"), ranks=4, steps=2)
    msprobesim.write(str(tmp_path / "npu"), ranks=4, steps=2, fault_rank=2)
    assert [(s, r) for s, r, _ in msprobe.ranks(str(tmp_path / "npu"))] == \
        [(f"step{s}", f"rank{r}") for s in range(2) for r in range(4)]
    for rank, stats_only in ((2, False), (2, True), (0, False)):
        r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--step", "1",
                      "--rank", rank, "--out", tmp_path / f"t{rank}{stats_only}", "--advisor", "--json",
                      *(["--stats-only"] if stats_only else []))
        assert r.returncode == 0, r.stderr
        firsts = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "first_call"]
        if rank == 2:
            assert [f["op"] for f in firsts] == [msprobesim.FAULT_CALL]
        else:
            assert firsts == []
    shown = accuscope("show", tmp_path / "t0False", "--format", "json")
    rows = json.loads(shown.stdout)
    assert {row[rows["columns"].index("type")] for row in rows["data"]} >= {"layers.0.attn", "layers.1.mlp"}


def test_first_divergence_per_rank_and_across_ranks():
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.diagnose import firstdiff
    calls = ["a.0.forward", "a.0.forward", "b.0.forward", "b.0.forward", "c.0.forward", "c.0.forward"]
    rows = []
    for rank, bad in (("0", None), ("1", "c.0.forward"), ("2", "b.0.forward")):
        for k, call in enumerate(calls):
            io = "input" if k % 2 == 0 else "output"
            fails = bad is not None and calls.index(bad) <= k and not (call == bad and io == "input")
            rows.append({"npu_op": call, "io": io, "tensor": f"{call}:{io}:0", "stat_mag": 0.9 if fails else 0.0,
                         "fail": fails, "rank": rank})
    table = ResultTable.from_rows(rows)
    table.columns["rank"] = np.array([r["rank"] for r in rows], dtype=object)
    found = firstdiff.by_rank(table)
    assert [(d.rank, d.call, d.position) for d in found] == [("2", "b.0.forward", 1), ("1", "c.0.forward", 2)]
    assert firstdiff.first_divergence(table, np.arange(6)) is None  # rank 0 agrees everywhere


def test_construct_json_is_the_graph_panes_module_hierarchy(tmp_path):
    g = load_msprobe(str(FIX / "cand_md5"), rank=1)
    assert [(n.attrs["depth"], n.name) for n in g.nodes[:4]] == [
        (0, "Module.fc1.Linear.forward.0"), (1, "Functional.linear.0.forward"),  # a module heads its calls
        (0, "Module.act.ReLU.forward.0"), (1, "Functional.relu.0.forward")]
    assert g.nodes[0].attrs == {"depth": 0, "module": "fc1", "span": 1} and g.nodes[0].type == "Linear"
    assert g.nodes[1].type == "linear" and g.nodes[1].output_shapes == [(2, 3)]
    side = open_side(str(FIX / "cand_md5"), rank=1)
    assert side.modules is not None
    assert side.modules.kind == "msprobe" and side.graph is None  # it groups calls, it names no tensor
    msprobesim.write(str(tmp_path / "npu"), ranks=2, steps=1)
    g = load_msprobe(str(tmp_path / "npu"))  # several ranks: the first one's modules
    block = g.node("Cell.layers.1.Block.forward.0")
    assert block is not None
    inside = g.nodes[block.index + 1: block.index + 1 + block.attrs["span"]]
    assert msprobesim.FAULT_CALL in {n.name for n in inside} and len(inside) == 17
    assert present(g.node(msprobesim.FAULT_CALL)).attrs["depth"] == 2
    assert present(open_side(str(FIX / "cand"), rank=0).modules).nodes[0].name == "Tensor.__mul__.0.forward"


STACK_LINE = re.compile(r"File (?P<path>.+), line (?P<line>\d+), in (?P<function>[\w<>]+), \n (?P<source>.+)")


def test_the_demo_stack_json_is_msprobes_and_names_the_lines_of_the_demo_model_that_made_each_call(tmp_path):
    """stack.json as msprobe's dumper writes it (`{"0": [[calls], [lines]]}`, calls made from one
    stack share an entry; each line as in the real fixtures), every frame a real line of the demo's
    forward code: that file, that line's source, inside that function, from `write` inwards."""
    real = json.loads((FIX / "cand_md5" / "step0" / "rank0" / "stack.json").read_text())
    assert all(STACK_LINE.fullmatch(line) for _, lines in real.values() for line in lines)  # the shape copied
    msprobesim.write(str(tmp_path), ranks=1, steps=1)
    folder = tmp_path / "step0" / "rank0"
    doc = json.loads((folder / "stack.json").read_text())
    assert list(doc) == [str(i) for i in range(len(doc))] and all(len(v) == 2 for v in doc.values())
    calls = [c for names, _ in doc.values() for c in names]
    assert sorted(calls) == sorted(json.loads((folder / "dump.json").read_text())["data"])  # each call once
    source = Path(msprobesim.__file__).read_text().splitlines()
    spans: dict[str, list[tuple[int, int]]] = {}  # function name -> the line spans of every def or lambda of that name
    for node in ast.walk(ast.parse("\n".join(source))):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            spans.setdefault(getattr(node, "name", "<lambda>"), []).append((node.lineno, present(node.end_lineno)))
    stacks, why = msprobe.stacks(str(tmp_path))
    assert why == "" and set(stacks) == set(calls)
    for call, lines in stacks.items():
        frames = [STACK_LINE.fullmatch(line) for line in lines]
        assert all(frames) and len(frames) >= 2, (call, lines)
        for f in frames:
            assert f is not None
            n = int(f["line"])
            assert os.path.samefile(f["path"], msprobesim.__file__) and f["source"] == source[n - 1].strip()
            assert any(a <= n <= b for a, b in spans[f["function"]]), (call, f["function"], n)
        assert present(frames[-1])["function"] == "write" and "run_rank(" in present(frames[-1])["source"]
        api = call.split(".")[0] + "." + call.split(".")[1] if not call.startswith("Cell.") else "d.module("
        assert api in present(frames[0])["source"], (call, present(frames[0])["source"])  # the line that made this call
    fault = STACK_LINE.fullmatch(stacks[msprobesim.FAULT_CALL][0])
    assert fault is not None
    assert fault["function"] == "attention" and fault["source"].startswith('scores = d.call("Mint.matmul"')
    assert stacks["Functional.linear.0.forward"] == stacks["Functional.linear.6.forward"]  # q of both blocks


def test_stack_json_gives_each_calls_stack_bounded_and_politely_failing(tmp_path, monkeypatch):
    stacks, why = msprobe.stacks(str(FIX / "bench_md5"), rank=0)  # msprobe's {"0": [[calls], [lines]]}
    assert why == "" and len(stacks) == 6
    assert stacks["Module.fc1.Linear.forward.0"] == stacks["Module.act.ReLU.forward.0"]  # one entry, two calls
    assert stacks["Functional.linear.0.forward"][0].startswith("File site-packages/torch/nn/modules/linear.py")
    folder = tmp_path / "step0" / "rank0"
    shutil.copytree(FIX / "bench_md5" / "step0" / "rank0", folder)
    (folder / "stack.json").write_text(json.dumps({"Functional.relu.0.forward": ["File a.py, line 3, in f"] * 99}))
    stacks, why = msprobe.stacks(str(tmp_path))  # the older {call: [lines]}, cut to STACK_LINES
    assert why == "" and len(stacks["Functional.relu.0.forward"]) == msprobe.STACK_LINES
    monkeypatch.setattr(msprobe, "STACK_LIMIT", 100)
    stacks, why = msprobe.stacks(str(tmp_path))
    assert stacks == {} and why.startswith(str(folder / "stack.json")) and "bytes, more than" in why
    (folder / "stack.json").unlink()
    assert msprobe.stacks(str(tmp_path)) == ({}, "")  # absent: nothing to say


def test_a_rank_tree_is_judged_as_a_step_on_every_call_never_by_its_last_one(tmp_path):
    msprobesim.write(str(tmp_path / "golden"), ranks=4, steps=2)
    msprobesim.write(str(tmp_path / "npu"), ranks=4, steps=2, fault_rank=2)
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--stats-only",
                  "--out", tmp_path / "tree", "--advisor", "--json")
    assert r.returncode == 0, r.stderr
    findings = json.loads(r.stdout)["findings"]
    assert json.loads((tmp_path / "tree" / "task.json").read_text())["sides"] == {"npu": "msprobe", "golden": "msprobe"}
    verdict = next(f for f in findings if f["rule"] == "verdict")
    assert verdict["severity"] == "error" and verdict["title"].startswith("the step diverges") and \
        verdict["title"].endswith("on 2 of 8 ranks")
    first = next(f for f in findings if f["rule"] == "first_call")
    assert first["op"] == msprobesim.FAULT_CALL and "step 0 rank 2" in first["title"]
    assert "step 1 rank 2 at " + msprobesim.FAULT_CALL in first["text"] and "step 0 rank 0" in first["text"]
    rules = {f["rule"] for f in findings}
    assert not rules & {"ms.all_pass", "introduced"}  # no cosine to speak of; op names repeat across ranks

    # one call off in the middle of a statistics dump, the step's last call clean: no "model passes"
    for side in ("npu", "golden"):
        _synthetic_statistics(tmp_path / side / "one" / "step0" / "rank0", 50, seed=3)
    doc_path = tmp_path / "npu" / "one" / "step0" / "rank0" / "dump.json"
    doc = json.loads(doc_path.read_text())
    doc["data"]["Functional.linear.21.forward"]["output"][0]["Max"] *= 10
    doc_path.write_text(json.dumps(doc))
    r = accuscope("compare", "--npu", tmp_path / "npu" / "one", "--golden", tmp_path / "golden" / "one",
                  "--out", tmp_path / "one", "--advisor", "--json")
    findings = json.loads(r.stdout)["findings"]
    verdict = next(f for f in findings if f["rule"] == "verdict")
    assert verdict["severity"] == "error" and "1 of " in verdict["title"], verdict
    assert next(f for f in findings if f["rule"] == "first_call")["op"] == "Functional.linear.21.forward"
    assert not any("passes" in f["title"] or f["rule"] == "ms.all_pass" for f in findings)


def test_a_statistics_pick_of_one_rank_takes_the_ranks_columns_a_tensor_pick_stays_a_task_of_its_own(tmp_path):
    from accuscope.engine.tasks.taskrun import ranked
    msprobesim.write(str(tmp_path / "golden"), ranks=2, steps=2)
    msprobesim.write(str(tmp_path / "npu"), ranks=2, steps=2, fault_rank=1)
    npu, golden = str(tmp_path / "npu"), str(tmp_path / "golden")
    assert ranked(CompareSpec(npu, golden, step="1", rank="1", stats_only=True))
    assert not ranked(CompareSpec(npu, golden, step="1", rank="1"))  # tensors: re-runnable, one task
    assert not ranked(CompareSpec(npu, golden, rank="proc7", stats_only=True))  # no number: as before
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--step", "1", "--rank", "1", "--stats-only",
                  "--out", tmp_path / "t", "--json", "--advisor")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t" / "task.json").read_text())
    assert list(doc["ranks"]) == ["step1_rank1"] and doc["rank"] == "1" and doc["step"] == "1"
    assert [f["op"] for f in json.loads(r.stdout)["findings"] if f["rule"] == "first_call"] == [msprobesim.FAULT_CALL]
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--step", "1", "--rank", "1", "--out", tmp_path / "u")
    assert r.returncode == 0 and "ranks" not in json.loads((tmp_path / "u" / "task.json").read_text())
