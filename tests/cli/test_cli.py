"""The CLI through its real entry point (`python -m accuscope`): output, files, exit codes."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from support.cli import accuscope
from support.data import ASCEND_FIXTURES


@pytest.fixture
def clean_dump(tmp_path):
    run = tmp_path / "20250101000000" / "0" / "net" / "1" / "0"
    run.mkdir(parents=True)
    act = np.random.default_rng(0).standard_normal((1, 20, 4, 4)).astype(np.float16)
    write_dump_file(run / "Conv2D.conv1.1.1700000000000001", "conv1",
                    [DumpTensor(act)], [DumpTensor(act, "NC1HWC0", ("conv1", 0))])
    write_dump_file(run / "Relu.relu1.2.1700000000000002", "relu1",
                    [DumpTensor(act, "NC1HWC0")], [DumpTensor(np.maximum(act, 0), "NC1HWC0", ("relu1", 0))])
    return tmp_path, act


def test_inspect_fixture_folder_lists_layouts_and_every_problem(tmp_path):
    r = accuscope("inspect", ASCEND_FIXTURES)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "NC1HWC0 (2,3,6,7,16)" in r.stdout and "block1/relu:0" in r.stdout
    assert "3 problems" in r.stdout
    for name in ("truncated_payload", "header_too_long", "garbage"):
        assert name in r.stdout


def test_inspect_clean_tree_exits_zero_and_names_the_run(clean_dump):
    root, _ = clean_dump
    r = accuscope("inspect", root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run 20250101000000/0/net/1/0" in r.stdout and "ops 2" in r.stdout
    assert "NC1HWC0->NCHW 3" in r.stdout


def test_inspect_only_broken_files_is_unusable(tmp_path):
    for name in ("Relu.truncated_payload.20.1763812800000999", "Add.garbage.22.1763812800001001"):
        shutil.copy(ASCEND_FIXTURES / name, tmp_path / name)
    r = accuscope("inspect", tmp_path)
    assert r.returncode == 2 and "nothing usable" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["inspect", "/nonexistent/dump"], ["/nonexistent/dump", "no such file or folder"]),
    (["inspect", "{empty}"], ["empty folder", "{empty}"]),
    (["inspect", "{junk}"], ["not a dump, golden data or model file"]),
    (["inspect", "{fixture}", "--pick", "latest"], ["--pick", "newest, oldest or a 0-based index"]),
    (["convert", "{fixture}", "--out", "{empty}", "--to", "csv"], ["invalid choice"]),
    (["inspect", "{bin}", "--shape", "2,3", "--dtype", "flaot32"], ["'flaot32' is not a numpy dtype"]),
    (["inspect", "{bin}", "--shape", "2,3", "--dtype", "float32"], ["holds 10 bytes", "needs 24"]),
])
def test_unusable_input_exits_2_with_a_message_naming_it(tmp_path, args, words):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.txt").write_text("hello")
    (tmp_path / "x.bin").write_bytes(b"0123456789")
    paths = {"empty": tmp_path / "empty", "junk": tmp_path / "junk.txt", "fixture": ASCEND_FIXTURES,
             "bin": tmp_path / "x.bin"}
    r = accuscope(*[a.format(**paths) for a in args])
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    for w in words:
        assert w.format(**paths) in r.stdout + r.stderr


def test_convert_writes_logical_tensors_and_reports_broken_files(tmp_path):
    out = tmp_path / "out"
    r = accuscope("convert", ASCEND_FIXTURES, "--out", out)
    assert r.returncode == 1 and "wrote 9 files" in r.stdout and "truncated" in r.stdout
    conv = np.load(out / "Conv2D.block1_conv_bn_relu.17.1763812800000123.output.0.npy", allow_pickle=False)
    assert np.array_equal(conv, np.load(ASCEND_FIXTURES / "expected.Conv2D.output.0.npy"))
    mm = np.load(out / "MatMulV2.attn_qk.18.1763812800000456.output.0.npy", allow_pickle=False)
    assert np.array_equal(mm, np.load(ASCEND_FIXTURES / "expected.MatMulV2.output.0.npy"))


def test_convert_to_bin_records_shapes(clean_dump, tmp_path):
    root, act = clean_dump
    r = accuscope("convert", root, "--out", tmp_path / "bin", "--to", "bin")
    assert r.returncode == 0, r.stdout + r.stderr
    manifest = json.loads((tmp_path / "bin" / "tensors.json").read_text())
    name = "Conv2D.conv1.1.1700000000000001.output.0.bin"
    assert manifest[name]["shape"] == [1, 20, 4, 4] and manifest[name]["conversion"] == "NC1HWC0->NCHW"
    data = np.fromfile(tmp_path / "bin" / name, dtype=manifest[name]["dtype"]).reshape(manifest[name]["shape"])
    assert np.array_equal(data, act)


def test_convert_golden_npz_to_mindstudio_npy_names(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "g.npz", **{"conv1/out": a})  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
    r = accuscope("convert", tmp_path / "g.npz", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    assert np.array_equal(np.load(tmp_path / "o" / "conv1_out.0.0.npy"), a)


def test_python_dash_m_and_version():
    r = accuscope("--version")
    assert r.returncode == 0 and r.stdout.startswith("accuscope ")


def test_dump_writes_golden_folder_that_inspect_reads(cls_model, tmp_path):
    x = np.random.default_rng(3).standard_normal((1, 3, 48, 192)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = accuscope("dump", cls_model, "--out", tmp_path / "g", "--input", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 0, r.stderr
    assert "wrote 259 tensors" in r.stdout and "Constant output (weights) (308)" in r.stdout
    r = accuscope("inspect", tmp_path / "g")
    assert r.returncode == 0 and "dump (npy)" in r.stdout and "tensors 259" in r.stdout
    r = accuscope("dump", cls_model, "--out", tmp_path / "h", "--input", "y=nothere.npy")
    assert r.returncode == 2 and "nothere.npy" in r.stderr


def test_error_text_from_data_is_printed_as_is_not_as_markup_or_emoji(tmp_path):
    """`:zero:` or `[bold]` in a name reach the terminal literally (rich's emoji codes and markup off)."""
    missing = tmp_path / "local:zero:[bold]x[/]"
    r = accuscope("inspect", missing)
    assert r.returncode == 2
    assert f"{missing}" in r.stderr and "0️⃣" not in r.stderr


def test_cluster_address_in_the_error_is_the_one_given(tmp_path):
    pytest.importorskip("distributed")
    from accuscope.engine.demo.ranktree import write_rank_tree
    npu, golden = write_rank_tree(tmp_path, ranks=1, tensors=1)
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--cluster", "local:zero")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--cluster local:zero: give tcp://HOST:PORT or local:N" in r.stderr


def test_summary_path_is_never_broken_across_lines_in_a_log(tmp_path):
    """Piped into a log (80 columns), the closing summary keeps the task's path on its line: a path a
    user copies from the log must be whole."""
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "conv.0.1700000000000001.npy", np.ones(4, np.float32))
    out = tmp_path / ("task-" + "x" * 70)
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--out", out, COLUMNS="80")
    assert r.returncode == 0, r.stdout + r.stderr
    assert any(line.startswith("rows 1 ") and line.endswith(f"open {out}") for line in r.stdout.splitlines()), r.stdout


MSPROBE_RANK = ASCEND_FIXTURES.parent / "msprobe" / "cand" / "step0" / "rank0"


def test_msprobes_tensor_folder_names_its_rank_folder_and_loose_pt_files_read(tmp_path):
    """msprobe's tensor folder given alone (files msprobe wrote) names its rank folder (exit 2, as any
    unusable input); the same files elsewhere are loose torch.save tensors, read by their names."""
    r = accuscope("inspect", MSPROBE_RANK / "dump_tensor_data")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"the tensor files of an msprobe dump (2 .pt files); give the folder with its dump.json: {MSPROBE_RANK}" \
        in " ".join((r.stdout + r.stderr).split())
    for f in (MSPROBE_RANK / "dump_tensor_data").iterdir():
        shutil.copy(f, tmp_path / f.name)
    r = accuscope("inspect", tmp_path)
    assert r.returncode == 0 and "dump (pt)" in r.stdout and "Tensor.__mul__.0.forward.output" in r.stdout, \
        r.stdout + r.stderr
