"""A folder of loose torch.save files (`.pt`, one tensor, or a dict/list/tuple of them, a file) as a dump on
either side: read without torch (sources/torchpickle.py), named as an npy folder's files are
(sources/golden.py's tensor folder). tests/fixtures/ptfolder holds what torch itself wrote (make_fixtures.py);
where torch is installed, more files are written here by it."""
from __future__ import annotations

import os
import pickle
import shutil
from functools import partial

import numpy as np
import pytest

from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sides.registry import detect, open_side
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError, read_payload
from support.data import FIXTURES
from support.pickles import RunsCode, hostile_pt, write_pt

PT = FIXTURES / "ptfolder"
MSPROBE_RANK = FIXTURES / "msprobe" / "cand" / "step0" / "rank0"


def by_name(side) -> dict:
    return {t.name: t for t in side.tensors}


def test_a_folder_torch_wrote_reads_as_the_npy_folder_of_the_same_tensors():
    assert detect(PT / "ref").kind == kinds.PT
    ref, npy = by_name(open_side(PT / "ref")), by_name(open_side(PT / "npy"))
    # one tensor a file (named with io and index, or by the module alone), a tuple's two, a state_dict's two,
    # an input named input_*, and a dict of numbers: values
    assert set(ref) == set(npy) | {"meta.step:output:0", "meta.lr:output:0"}
    assert {"conv1.output:output:0", "layer1.0.relu:output:0", "head:output:1", "weights.bias:output:0",
            "image:input:0"} <= set(ref)
    for name, t in npy.items():
        got = ref[name]
        assert got.shape == t.shape and got.dtype == t.dtype, name
        np.testing.assert_array_equal(got.load(), t.load(), err_msg=name)
    assert (ref["meta.step:output:0"].value, ref["meta.lr:output:0"].value) == ("3", "0.1")
    assert ref["meta.step:output:0"].dtype_name == "int"


def test_tensors_are_lazy_and_read_as_npy_files_are():
    ref = by_name(open_side(PT / "ref"))
    plain = ref["layer1.0.relu:output:0"]
    assert plain.payload is not None and isinstance(plain.reader, partial) and plain.reader.func is read_payload
    view = ref["image:input:0"]  # NHWC, a permuted view of the input's storage: copied on load
    assert view.payload is None and view.shape == (1, 8, 8, 3)
    assert not view.load().flags.f_contiguous or view.load().flags.c_contiguous
    np.testing.assert_array_equal(view.load(), np.load(PT / "npy" / "input_image.npy"))


def test_bfloat16_is_read_widened_and_pairs_by_name():
    cand = by_name(open_side(PT / "cand"))
    t = cand["conv1.output:output:0"]
    assert t.dtype_name == "bfloat16" and t.dtype == np.float32 and t.payload is None
    want = np.load(PT / "npy" / "conv1.output.0.npy")
    np.testing.assert_allclose(t.load(), want, rtol=1 / 128, atol=1e-6)


@pytest.mark.parametrize("golden", ["ref", "npy"])
def test_a_pt_folder_compares_with_pt_and_with_npy_and_finds_the_planted_fault(golden):
    p = plan(CompareSpec(str(PT / "cand"), str(PT / golden)))
    table = execute(p, workers=1)
    assert table is not None
    rows = dict(zip(table.columns["tensor"].tolist(), range(len(table))))
    cos = table.columns["cos"]
    assert cos[rows["conv1.output:output:0"]] > 0.999  # bfloat16 against float32: the same values
    assert cos[rows["layer1.0.conv:output:0"]] < 0.99  # the planted fault: a filter negated
    assert cos[rows["weights.weight:output:0"]] == pytest.approx(1.0)
    paired = sum(1 for pair in p.pairs if pair.golden is not None)
    assert paired == (10 if golden == "ref" else 8)  # npy holds no meta values
    if golden == "ref":
        reasons = dict(zip(table.columns["tensor"].tolist(), table.columns["reason"].tolist()))
        assert not reasons["meta.lr:output:0"]  # a value, compared equal


def test_a_mixed_folder_reads_both_and_pairs_with_either(tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("conv1.output.0.pt", "head.pt", "weights.pt"):
        shutil.copy(PT / "ref" / name, mixed / name)
    for name in ("layer1.0.conv.npy", "layer1.0.relu.npy", "input_image.npy"):
        shutil.copy(PT / "npy" / name, mixed / name)
    side = open_side(mixed)
    assert side.kind == kinds.NPY and not side.problems
    assert {t.name for t in side.tensors} == {t.name for t in open_side(PT / "npy").tensors}
    table = execute(plan(CompareSpec(str(PT / "cand"), str(mixed))), workers=1)
    assert table is not None
    assert sum(1 for r in table.columns["reason"].tolist() if not r) == 8


def test_msprobe_still_wins_and_its_tensor_folder_alone_is_named(tmp_path):
    assert detect(MSPROBE_RANK).kind == kinds.MSPROBE
    with pytest.raises(SourceError, match=f"give the folder with its dump.json: {MSPROBE_RANK}"):
        detect(MSPROBE_RANK / "dump_tensor_data")
    alone = tmp_path / "rank0" / "dump_tensor_data"  # msprobe's folder of a run that never wrote dump.json
    shutil.copytree(MSPROBE_RANK / "dump_tensor_data", alone)
    assert detect(alone.parent).kind == kinds.MSPROBE
    with pytest.raises(SourceError, match=f"give its rank folder: {alone.parent}"):
        detect(alone)
    loose = tmp_path / "loose"  # the same files elsewhere: loose tensors, read by their names
    shutil.copytree(MSPROBE_RANK / "dump_tensor_data", loose)
    side = open_side(loose)
    assert side.kind == kinds.PT
    assert {t.name for t in side.tensors} == {"Tensor.__mul__.0.forward.input:output:0",
                                              "Tensor.__mul__.0.forward.output:output:0"}


def test_unreadable_files_are_rows_naming_the_file_and_nothing_runs(tmp_path):
    folder = tmp_path / "cand"
    shutil.copytree(PT / "cand", folder)
    marker = tmp_path / "pwned"
    hostile_pt(folder / "evil.pt", marker)
    write_pt(folder / "head_and_evil.pt", pickle.dumps([1.5, RunsCode(marker)], protocol=2))
    (folder / "garbage.pt").write_bytes(b"not a zip at all")
    (folder / "module.pt").write_bytes(b"")
    side = open_side(folder)
    assert not marker.exists()
    bad = {t.name: t.problem for t in side.tensors if t.problem}
    assert "refused global" in bad["evil:output:0"] and ("posix.system" in bad["evil:output:0"]
                                                          or "os.system" in bad["evil:output:0"])
    assert "refused global" in bad["head_and_evil:output:0"]  # the whole file: its pickle is refused
    assert "not a zip" in bad["garbage:output:0"] and "module:output:0" in bad
    assert {os.path.basename(p.path) for p in side.problems} == {"evil.pt", "head_and_evil.pt", "garbage.pt",
                                                                        "module.pt"}
    golden = tmp_path / "ref"
    shutil.copytree(PT / "ref", golden)
    shutil.copy(golden / "layer1.0.relu.pt", golden / "evil.pt")
    table = execute(plan(CompareSpec(str(folder), str(golden))), workers=1)
    assert table is not None
    reasons = dict(zip(table.columns["tensor"].tolist(), table.columns["reason"].tolist()))
    assert "refused global" in reasons["evil:output:0"] and not marker.exists()
    assert not reasons["weights.weight:output:0"]


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory):
    torch = pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 7
    made = {
        "f16": base.half(), "bf16": base.bfloat16(), "f64": base.double(), "i64": base.long(), "i32": base.int(),
        "i8": base.to(torch.int8), "u8": base.to(torch.uint8), "bool": base > 1, "i16": base.to(torch.int16),
        "transposed": base.transpose(0, 2), "sliced": base[:, 1:, ::2], "expanded": base[:1].expand(5, 3, 4),
        "scalar": torch.tensor(3.25), "empty": torch.zeros(0, 4),
        "param": torch.nn.Parameter(base.clone()), "grad": base.clone().requires_grad_(),
    }
    for name, t in made.items():
        torch.save(t, folder / f"{name}.pt")
    torch.save((base, base), folder / "shared.pt")  # one tensor twice: the pickle shares it
    torch.save(torch.nn.Linear(4, 2).state_dict(), folder / "state.pt")
    torch.save({"a": [base, {"b": base * 2}], "n": None, "s": "text", "e": []}, folder / "nested.pt")
    torch.save(torch.nn.Linear(4, 2), folder / "module.pt")
    torch.save(base.to(torch.complex64), folder / "complex.pt")
    want = {name: t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy()
            for name, t in made.items()}
    return folder, want


def test_files_torch_writes_of_every_dtype_and_layout(torch_files):
    folder, want = torch_files
    side = by_name(open_side(folder))
    for name, array in want.items():
        t = side[f"{name}:output:0"]
        assert not t.problem, (name, t.problem)
        got = t.load()
        assert got.shape == array.shape, name
        np.testing.assert_array_equal(got, array, err_msg=name)
    base = want["f64"].astype(np.float32)
    np.testing.assert_array_equal(side["shared:output:1"].load(), base)
    assert side["state.weight:output:0"].shape == (2, 4) and side["state.bias:output:0"].shape == (2,)
    np.testing.assert_array_equal(side["nested.a:output:0"].load(), base)  # nested.a.0: output 0 of nested.a
    np.testing.assert_array_equal(side["nested.a.1.b:output:0"].load(), base * 2)
    assert [side[f"nested.{k}:output:0"].value for k in "nse"] == ["None", '"text"', "[]"]
    assert "state_dict" in side["module:output:0"].problem
    assert "complex" in side["complex:output:0"].problem
