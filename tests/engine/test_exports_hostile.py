"""Hostile names and planted links against what accuscope writes: exports that cannot carry code
(result CSV, xlsx, Markdown, HTML), writes that never follow a link already at the target, and the
smaller findings of the same pass (NUL in a name, a full disk, bidi controls, a huge filter).

Each test failed on the code before the fix (report.html escaped already: it is checked beside
report.md). The CLI side of the same findings is in tests/cli/test_exports_hostile_cli.py, the app's
notifications in tests/app/test_exports_hostile_app.py.
"""
from __future__ import annotations

import csv
import io
import json
import os

import numpy as np
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.results import MAX_LENGTH, FilterError, ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.report.document import build_report, render_html, render_markdown
from accuscope.engine.sides.registry import open_golden
from accuscope.engine.sources.convert import convert
from accuscope.engine.sources.names import markdown_text, printable
from accuscope.engine.sources.outputfile import atomic_file, atomic_path, open_append, write_text
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.csvio import formula_safe, formula_text, read_result_csv, write_result_csv
from accuscope.engine.tasks.task import load_task, save_task
from support.hostile import (
    BIDI,
    FORMULA,
    FORMULAS,
    HTML,
    PLAIN,
    golden_json,
    hostile_rows,
    hostile_task,
    tiny_export_task,
)
from support.narrow import present


# ---- 1. exports that cannot carry code --------------------------------------------------------------
@pytest.mark.parametrize("text", FORMULAS + PLAIN + ["", "=", "'", "''", "'-", "-inf", "1e-5", "=-1", "x=1"])
def test_formula_safe_is_undone_exactly_by_formula_text(text):
    written = formula_safe(text)
    assert formula_text(written) == text
    if text and text[0] in "=+-@\t\r" and text not in ("-0.5", "+3", "1e-5"):
        assert written == "'" + text  # a spreadsheet shows it as text


def test_result_csv_writes_formula_names_neutralised_and_quoted_and_reads_them_back(tmp_path):
    table = ResultTable.from_rows(hostile_rows())
    judgement.apply(table, Thresholds())
    path = write_result_csv(table, tmp_path / "result_20250101000000.csv")
    raw = path.read_bytes().decode("utf-8")  # not read_text: it would turn the CR in a name into LF
    assert f'"\'{FORMULA}"' in raw  # quoted, with the ' inside the quotes
    rows = list(csv.reader(io.StringIO(raw)))
    header, body = rows[0], rows[1:]
    col = {name: [r[i] for r in body] for i, name in reversed(list(enumerate(header)))}  # first of a name wins
    for name, cell in zip(FORMULAS + HTML + BIDI + PLAIN, col["NPUDump"]):
        assert cell == formula_safe(name)
        assert not cell[:1] or cell[0] not in "=+-@\t\r" or cell in ("-0.5", "+3")
    assert col["NPUDump"][FORMULAS.index(FORMULA)] == "'" + FORMULA
    assert col["CompareFailReason"][0] == "'" + FORMULA
    # numbers stay numbers: a metric of -1 is not made text
    assert set(col["MaxAbsoluteError"]) == {"-1.000000"} and "-0.500000" in col["CosineSimilarity"]
    assert not any(c.startswith("'") for name in ("CosineSimilarity", "MaxAbsoluteError") for c in col[name])
    back, warnings = read_result_csv(path)
    assert warnings == []
    for key in ("npu_op", "golden_op", "tensor", "reason"):
        assert back.columns[key].tolist() == table.columns[key].tolist(), key
    assert back.columns["max_abs"].tolist() == [-1.0] * len(table)
    assert back.columns["cos"].tolist() == table.columns["cos"].tolist()


def test_a_saved_task_reads_its_csv_back_with_the_names_as_they_were(tmp_path):
    folder = hostile_task(tmp_path / "t")
    (folder / "result.npz").unlink()  # the task browser falls back to the CSV
    task = load_task(folder)
    assert task.table is not None
    assert task.table.columns["npu_op"].tolist() == [r["npu_op"] for r in hostile_rows()]


def test_a_plugin_column_named_like_a_formula_is_neutralised_in_the_header_too(tmp_path):
    rows = [{"npu_op": "a", "tensor": "a:output:0", "=HYPERLINK(1)": 0.5, "cos": 0.9}]
    table = ResultTable.from_rows(rows, custom=["=HYPERLINK(1)"])
    path = write_result_csv(table, tmp_path / "r.csv")
    header = next(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert "'=HYPERLINK(1)" in header and "=HYPERLINK(1)" not in header
    back, _ = read_result_csv(path)
    assert back.custom == ["=HYPERLINK(1)"] and back.columns["=HYPERLINK(1)"].tolist() == ["0.5"]


def test_xlsx_holds_names_as_text_never_as_formulas(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    from accuscope.engine.export.excel import write_xlsx
    table = ResultTable.from_rows(hostile_rows() + [{"npu_op": "#N/A", "tensor": "#REF!", "cos": 0.5}])
    write_xlsx(table, Thresholds(), tmp_path / "r.xlsx", sheet_rows=10)
    book = openpyxl.load_workbook(tmp_path / "r.xlsx")
    cells = [c for ws in book.worksheets for row in ws.iter_rows() for c in row]
    assert cells and not [c.coordinate for c in cells if c.data_type in ("f", "e")]
    values = {c.value for c in cells}
    assert FORMULA in values and "#N/A" in values and "#REF!" in values


def test_markdown_text_escapes_html_code_links_and_columns():
    assert markdown_text("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert markdown_text("a|b`c`&d\\") == "a\\|b\\`c\\`&amp;d\\\\"
    assert markdown_text("[x](javascript:alert(1))") == "\\[x\\](javascript:alert(1))"
    assert markdown_text("evil\u202egnp\x1b[2J") == "evil?gnp?\\[2J"


def test_markdown_and_html_reports_show_hostile_names_as_text(tmp_path):
    rows = hostile_rows()
    rows = [{**r, "cos": -0.9} for r in rows if r["npu_op"] in HTML + BIDI] + rows  # the worst ops: in the report
    folder = tmp_path / "<img src=x onerror=alert(1)>"
    save_task(folder, {"model": None}, ResultTable.from_rows(rows), Thresholds())
    report = build_report(load_task(folder), None, worst=3)
    assert HTML[0] in report.account and any(HTML[1] in n for n in report.notes)
    md = render_markdown(report, {c.name: f"{c.name}.svg" for c in report.charts})
    page = render_html(report)
    for text in (md, page):
        assert "<script" not in text and "<img" not in text and "onerror=alert(1)>" not in text
        assert not any(ch in text for ch in "\u202e\u2066\u2069\u200e\u200f\u061c\u202a\x1b")
    assert "&lt;img src=x onerror=alert(1)&gt;" in md and "&lt;img src=x onerror=alert(1)&gt;" in page


# ---- 2. writes only where the user said --------------------------------------------------------------
def test_atomic_writes_replace_a_planted_link_and_never_write_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("a.json", "b.bin", "c.onnx", "d.txt"):
        (folder / name).symlink_to(outside)
    with atomic_file(folder / "a.json") as fh:
        fh.write("{}")
    with atomic_file(folder / "b.bin", "wb") as fh:
        fh.write(b"\0")
    with atomic_path(folder / "c.onnx") as tmp:
        assert tmp.suffix == ".onnx" and tmp.parent == folder and tmp.is_file() and not tmp.is_symlink()
        tmp.write_bytes(b"model")
    write_text(folder / "d.txt", "text")
    assert outside.read_text() == "precious\n"
    assert not any(p.is_symlink() for p in folder.iterdir()) and sorted(p.name for p in folder.iterdir()) == \
        ["a.json", "b.bin", "c.onnx", "d.txt"]
    with open_append(folder / "log") as fh:  # a log appended line by line: never through a link
        fh.write("x\n")
    (folder / "log2").symlink_to(outside)
    with pytest.raises(OSError):
        open_append(folder / "log2")
    assert outside.read_text() == "precious\n" and (folder / "log").read_text() == "x\n"


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    (tmp_path / "f").write_text("old")
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "f") as fh:
        fh.write("half")
        raise RuntimeError
    assert (tmp_path / "f").read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_the_task_lock_and_the_columns_folder_are_never_taken_through_a_planted_link(tmp_path):
    from accuscope.engine.tasks.columnstore import COLUMNS_DIR, write_columns
    from accuscope.engine.tasks.task import LOCK, TaskLock
    folder = hostile_task(tmp_path / "t")
    (folder / LOCK).symlink_to(tmp_path / "created-elsewhere")  # dangling: O_CREAT would make the file there
    with pytest.raises(SourceError, match="lock file is a symbolic link"):
        TaskLock(folder).acquire()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / COLUMNS_DIR).symlink_to(elsewhere)
    with pytest.raises(SourceError, match="columns folder is a symbolic link"):
        write_columns(folder, [present(load_task(folder).table)])
    assert not (tmp_path / "created-elsewhere").exists() and list(elsewhere.iterdir()) == []


def test_convert_replaces_links_planted_in_out_and_writes_nothing_through_them(tmp_path):
    source = golden_json(tmp_path / "p.json", {"a/b": np.ones(3, np.float32), "a.b": np.zeros(2, np.float32),
                                               "c": np.full(4, 2, np.float32)})
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    for name in ("tensors.json", "mapping.csv", "c.0.0.bin", "c.0.0.bin.part", "a_b.0.0.bin"):
        (outside / name).write_text("precious")
        (out / name).symlink_to(outside / name)
    report = convert(open_golden(source), str(out), "bin")
    assert report.renamed and not report.failed
    assert all((outside / name).read_text() == "precious" for name in os.listdir(outside))
    assert not any(p.is_symlink() for p in out.iterdir() if p.name != "c.0.0.bin.part")
    manifest = json.loads((out / "tensors.json").read_text())
    assert np.fromfile(out / "c.0.0.bin", dtype=np.float32).tolist() == [2.0] * 4 and "c.0.0.bin" in manifest


def test_convert_a_name_holding_nul_is_a_problem_and_the_others_are_written(tmp_path):
    source = golden_json(tmp_path / "p.json", {"a\x00b": np.ones(3, np.float32), "good": np.zeros(2, np.float32)})
    report = convert(open_golden(source), str(tmp_path / "out"))
    assert report.written == ["good.0.0.npy"]
    assert len(report.failed) == 1 and "NUL character" in report.failed[0].message




@pytest.mark.parametrize("to", ["npy", "bin"])
def test_convert_on_a_full_disk_stops_with_a_source_error_and_leaves_no_half_file(tmp_path, full_disk, to):
    source = golden_json(tmp_path / "p.json", {f"t{k}": np.ones(4096, np.float32) for k in range(10)})
    with pytest.raises(SourceError, match=r"No space left on device: \d of 10 tensors written"):
        convert(open_golden(source), str(full_disk / "o"), to)
    assert all(p.stat().st_size in (16512, 16384) for p in (full_disk / "o").iterdir())  # whole files only
    assert not [p for p in (full_disk / "o").iterdir() if p.name.startswith(".")]


# export: a symlinked TASK/exports (or a folder in it) is refused


def test_export_refuses_a_symlinked_exports_folder_and_a_symlinked_target_in_it(tmp_path):
    from accuscope.engine.export.folder import default_out_dir, export, select_in_task
    task = tiny_export_task(tmp_path / "task")
    sel = select_in_task(task, "relu", "sigmoid")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (task / "exports").symlink_to(elsewhere)
    with pytest.raises(SourceError, match="exports.*symbolic link") as info:
        export(task, sel)
    assert str(task / "exports") in str(info.value)
    assert list(elsewhere.iterdir()) == []
    (task / "exports").unlink()
    (task / "exports").mkdir()
    target = default_out_dir(task, sel)
    target.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(SourceError, match="symbolic link"):
        export(task, sel)
    assert list(elsewhere.iterdir()) == []
    target.unlink()
    result = export(task, sel)  # a real folder: the export is written
    assert result is not None
    assert (result.out_dir / "manifest.json").is_file() and list(elsewhere.iterdir()) == []


# ---- 3. the smaller findings ----------------------------------------------------------------------------
def test_printable_neutralises_bidi_controls_and_keeps_line_breaks_only_when_asked():
    for name in BIDI:
        assert not any(ch in printable(name) for ch in "\u202a\u202c\u202e\u2066\u2069\u200e\u200f\u061c")
    assert printable("evil\u202egnp.exe") == "evil?gnp.exe"
    assert printable("a\nb\r\nc\x1b[2J") == "a?b??c?[2J"
    assert printable("a\nb\r\nc\x1b[2J\u202e", newlines=True) == "a\nb\nc?[2J?"
    assert printable("plain – ünïcode 中文 \u200b") == "plain – ünïcode 中文 \u200b"  # untouched


def test_a_huge_filter_is_refused_with_a_clear_message_and_a_long_one_is_read():
    table = ResultTable.from_rows([{"npu_op": f"op{i}", "cos": i / 100, "type": "Conv"} for i in range(100)])
    huge = " or ".join(["cos < 0.5"] * 3500)  # 45 KB: 111 s before
    with pytest.raises(FilterError, match=f"45,496 characters long; at most {MAX_LENGTH:,}"):
        table.filter_mask(huge)
    long = " or ".join(['"op1" in name'] * (MAX_LENGTH // 17))
    assert len(long) <= MAX_LENGTH and table.filter_mask(long).sum() == 11  # op1, op10 ... op19
