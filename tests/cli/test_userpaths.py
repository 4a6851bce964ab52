"""Files named by the user, through the real entry point: every one opens through the one checked opener
(engine/sources/inputfile.py), so a FIFO or a character device is refused by name (exit 2, never a hang, never
"internal error"), what a library cannot read in it (a CSV field past csv's limit, YAML nested a thousand deep, an
anchor) is a message naming the file and the line, counts read from a file or folder names are bounded by what is
there, and a mapping file is read once per run, its content handed to the rank workers. Every path option given a
FIFO or /dev/zero: the hostile corpus (tests/fuzz/hostile.py, classes fifo and device)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from support.cli import accuscope

TP = Path(__file__).parents[1] / "fixtures" / "msprobe" / "tp"
HANG = 120  # seconds: a run waiting on a FIFO fails the test instead of hanging the suite
CAP = 1 << 30  # address space of a run whose allocation a count from the file once decided


def npy_pair(tmp_path: Path) -> tuple[Path, Path]:
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        np.save(tmp_path / side / "conv1.0.1.npy", np.ones((2, 3), np.float32))
    return tmp_path / "npu", tmp_path / "golden"


def compare_with_mapping(tmp_path: Path, mapping: Path | str, **kw):
    npu, golden = npy_pair(tmp_path) if not (tmp_path / "npu").exists() else (tmp_path / "npu", tmp_path / "golden")
    return accuscope("compare", "--npu", npu, "--golden", golden, "--mapping", mapping, "--out", tmp_path / "task",
                     timeout=HANG, **kw)


def refused(r, text: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert text in r.stderr, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_fifo_as_mapping_file_is_refused_by_name_not_waited_on(tmp_path):
    for name in ("pairs.csv", "pairs.yaml"):  # CSV and YAML: the reader each suffix takes
        fifo = tmp_path / name
        os.mkfifo(fifo)
        refused(compare_with_mapping(tmp_path, fifo), f"{fifo}: is a named pipe (FIFO), not a regular file (the mapping file)")


def test_a_device_or_an_overlong_csv_field_as_mapping_is_a_message_naming_it(tmp_path):
    refused(compare_with_mapping(tmp_path, "/dev/zero"), "/dev/zero: is a character device, not a regular file")
    field = tmp_path / "field.csv"
    field.write_text("conv1,conv1\nconv2," + "x" * 200_000 + "\n")  # past the csv module's 128 KB field limit
    refused(compare_with_mapping(tmp_path, field), f"{field}:2: not a CSV line of `npu_name,golden_name`")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"conv1,conv1\nconv\xe9,x\n")
    refused(compare_with_mapping(tmp_path, latin), f"{latin}:2: the mapping file is not UTF-8 text")


def deep_yaml(levels: int) -> str:
    """`levels` mappings, each indented one space under the last: 1,200 are 728 KB, under a layout's 1 MB."""
    return "".join(" " * i + f"k{i}:" + (" v" if i == levels - 1 else "") + "\n" for i in range(levels))


def test_yaml_nested_a_thousand_deep_is_a_message_as_mapping_and_as_layout(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text(deep_yaml(1200))
    refused(compare_with_mapping(tmp_path, deep), f"{deep}:65: nested more than 64 levels deep")
    refused(accuscope("inspect", TP / "tp2_stats", "--shards", deep, timeout=HANG), f"{deep}:65: nested more than 64")
    flow = tmp_path / "flow.yaml"
    flow.write_text("a: " + "[" * 5000 + "b" + "]" * 5000 + "\n")  # flow lists nested in one line
    refused(compare_with_mapping(tmp_path, flow), f"{flow}:1: a list nested more than 64 levels deep")


def test_yaml_anchors_aliases_and_tags_are_named_not_taken_for_names(tmp_path):
    for k, (text, what) in enumerate([("conv1: &a conv1\nconv2: *a\n", "an anchor"), ("conv1: *a\n", "an alias"),
                                      ("conv1: !!python/object:os.system conv1\n", "a tag"),
                                      ("- &a conv1\n", "an anchor"), ("conv1: |\n  conv1\n", "a block scalar")]):
        mapping = tmp_path / f"m{k}.yaml"
        mapping.write_text(text)
        refused(compare_with_mapping(tmp_path, mapping), f"{mapping}:1: {what}")


def test_a_layouts_tp_and_pp_are_bounded_by_the_ranks_there(tmp_path):
    layout = tmp_path / "layout.yaml"
    layout.write_text("tp: 1000000000\npp: 1000000000\n")
    r = accuscope("inspect", TP / "tp2_stats", "--shards", layout, timeout=HANG, memory=CAP)
    refused(r, "missing: TP=1000000000 x PP=1000000000 needs rank0..rank999999999999999999, and "
               "999,999,999,999,999,998 of them are not there (rank2, rank3")
    assert str(layout) in r.stderr


def test_a_rank_folder_numbered_in_the_billions_is_named_not_counted_to(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(TP / "tp2_stats", run)
    shutil.copytree(run / "step0" / "rank1", run / "step0" / "rank99999999999")
    for argv in (["inspect", run, "--shards", "names"],
                 ["compare", "--npu", run, "--golden", TP / "tp1_stats", "--shards", "names", "--out", tmp_path / "t"]):
        refused(accuscope(*argv, timeout=HANG, memory=CAP),
                f"{run / 'step0' / 'rank2'}: missing: the ranks run rank0..rank99999999999, and 99,999,999,997 of "
                f"them are not there")


def test_a_multirank_run_names_a_bad_mapping_once_before_any_rank(tmp_path):
    from accuscope.engine.demo.ranktree import write_rank_tree
    npu, golden = write_rank_tree(tmp_path / "tree", ranks=2, tensors=2, size=8)
    deep = tmp_path / "deep.yaml"
    deep.write_text(deep_yaml(1200))
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--mapping", deep, "--out", tmp_path / "t",
                  "--workers", "2", timeout=HANG)
    refused(r, f"{deep}:65: nested more than 64 levels deep")
    assert "rank 0" not in r.stdout + r.stderr and not (tmp_path / "t").exists()


def test_rank_workers_are_handed_the_mapping_the_run_read(tmp_path):
    """The mapping is read once, by the run: the workers pair by what it held, the file gone by then."""
    from accuscope.engine.compare.multirank import given_mapping, pool_results
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.demo.ranktree import write_rank_tree
    from accuscope.engine.sources.ranks import ranks
    npu, golden = write_rank_tree(tmp_path / "tree", ranks=2, tensors=2, size=8)
    for rank in ("rank0", "rank1"):  # the golden side names one tensor otherwise: only the mapping pairs it
        folder = golden / "step0" / rank
        (folder / "Functional.linear.0.forward.output.0.npy").rename(folder / "renamed.0.npy")
    mapping = tmp_path / "renames.csv"
    mapping.write_text("Functional.linear.0.forward.output,renamed\n")
    spec = CompareSpec(str(npu), str(golden), mapping=str(mapping))
    given = given_mapping(spec)
    mapping.unlink()
    results = list(pool_results(spec, ranks(npu), workers=2, mapping=given))
    assert [r.error for r in results] == ["", ""]
    for r in results:
        table = r.table
        assert table is not None
        row = list(table.columns["npu_op"][:len(table)]).index("Functional.linear.0.forward.output")
        assert table.columns["golden_op"][row] == "renamed"
