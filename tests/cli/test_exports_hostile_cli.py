"""Hostile names and planted links through the real entry point (`python -P -m accuscope`): what `show`,
`report`, `convert` and `export` write cannot carry code, is written only where the user said, and
bad input ends in a message, not a traceback. The engine side is tests/engine/test_exports_hostile.py
(this file cannot share its name: test module names are unique across the test folders)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from support.hostile import (
    BIDI,
    FORMULA,
    FORMULAS,
    HTML,
    golden_json,
    hostile_rows,
    hostile_task,
    tiny_export_task,
)

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
BIDI_CHARS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=300)


def polite(r: subprocess.CompletedProcess, code: int) -> None:
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr and "internal error" not in r.stderr


@pytest.fixture
def task(tmp_path):
    return hostile_task(tmp_path / "task")


# ---- 1. exports that cannot carry code --------------------------------------------------------------
def test_show_csv_neutralises_formula_names_and_keeps_numbers(task):
    r = accuscope("show", task, "--format", "csv", "--columns", "npu_op,cos,max_abs")
    polite(r, 0)
    assert f'"\'{FORMULA}"' in r.stdout  # quoted, the ' inside the quotes
    rows = list(csv.reader(io.StringIO(r.stdout, newline="")))
    assert rows[0] == ["npu_op", "cos", "max_abs"]
    names = [row[0] for row in rows[1:]]
    assert names[:len(FORMULAS)] == ["'" + FORMULA, "'+1+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0",
                                     "'@SUM(1+1)*cmd|' /C calc'!A0", "?=1+1", "?=1+1", "''=already quoted",
                                     "'''+twice"]  # tab and CR: shown as ? (control characters)
    assert not [n for n in names if n[:1] in ("=", "+", "-", "@") and n not in ("-0.5", "+3", "-")]  # numbers stay
    assert {row[2] for row in rows[1:]} == {"-1.0"} and {row[1] for row in rows[1:]} == {"0.25", "-0.5"}


def test_show_md_prints_names_as_text_never_as_html_or_extra_columns(task):
    r = accuscope("show", task, "--format", "md", "--columns", "npu_op,tensor,reason,cos")
    polite(r, 0)
    assert "<script" not in r.stdout and "<img" not in r.stdout and "onerror=alert(1)>" not in r.stdout
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.stdout and "a\\|b\\`c\\`&amp;amp;d" in r.stdout
    lines = r.stdout.splitlines()
    assert len(lines) == 2 + len(hostile_rows())
    for line in lines:  # every row has its 4 cells: no | of a name splits one
        assert len(re.split(r"(?<!\\)\|", line)) == 4 + 2, line
    assert not any(ch in r.stdout for ch in BIDI_CHARS)


def test_show_xlsx_has_no_formula_cells(task, tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    r = accuscope("show", task, "--format", "xlsx", "--out", tmp_path / "r.xlsx")
    polite(r, 0)
    book = openpyxl.load_workbook(tmp_path / "r.xlsx")
    cells = [c for ws in book.worksheets for row in ws.iter_rows() for c in row]
    assert not [(c.coordinate, c.value) for c in cells if c.data_type == "f"]
    assert FORMULA in {c.value for c in cells}


def test_show_json_and_inspect_send_no_bidi_controls_to_the_terminal(task, tmp_path):
    r = accuscope("show", task)
    polite(r, 0)
    doc = json.loads(r.stdout)
    names = [row[doc["columns"].index("npu_op")] for row in doc["data"]]
    assert "evil?gnp.exe" in names and not any(ch in r.stdout for ch in BIDI_CHARS)
    folder = tmp_path / "golden"
    folder.mkdir()
    for k, name in enumerate(BIDI):
        np.save(folder / f"{name}.0.{k + 1}.npy", np.ones(2, np.float32))
    r = accuscope("inspect", folder)
    polite(r, 0)
    assert "evil?gnp" in r.stdout and not any(ch in r.stdout + r.stderr for ch in BIDI_CHARS)


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_report_shows_hostile_names_as_text(tmp_path, suffix):
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.thresholds import Thresholds
    from accuscope.engine.tasks.task import save_task
    rows = hostile_rows()
    rows = [{**r, "cos": -0.9} for r in rows if r["npu_op"] in HTML + BIDI] + rows  # the worst ops: in the report
    folder = tmp_path / "<img src=x onerror=alert(1)>"
    save_task(folder, {"model": None}, ResultTable.from_rows(rows), Thresholds())
    out = tmp_path / f"report{suffix}"
    r = accuscope("report", folder, "--out", out)
    polite(r, 0)
    text = out.read_text(encoding="utf-8")
    assert "&lt;script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<script" not in text and "<img" not in text and "onerror=alert(1)>" not in text
    assert not any(ch in text for ch in BIDI_CHARS)


# ---- 2. writes only where the user said --------------------------------------------------------------
def test_convert_never_writes_through_a_link_planted_in_out(tmp_path):
    source = golden_json(tmp_path / "p.json", {"a/b": np.ones(3, np.float32), "a.b": np.zeros(2, np.float32)})
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    for name in ("tensors.json", "mapping.csv", "a_b.0.0.bin"):
        (outside / name).write_text("precious")
        (out / name).symlink_to(outside / name)
    r = accuscope("convert", source, "--out", out, "--to", "bin")
    polite(r, 0)
    assert [(outside / n).read_text() for n in sorted(os.listdir(outside))] == ["precious"] * 3
    assert not any(p.is_symlink() for p in out.iterdir())
    assert "a_b.0.0.bin" in json.loads((out / "tensors.json").read_text())


def test_export_refuses_a_symlinked_exports_folder(tmp_path):
    task = tiny_export_task(tmp_path / "task")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (task / "exports").symlink_to(elsewhere)
    r = accuscope("export", task, "--start", "relu", "--end", "sigmoid")
    polite(r, 2)
    assert f"{task / 'exports'}: the task's exports folder is a symbolic link" in " ".join(r.stderr.split())
    assert list(elsewhere.iterdir()) == []


# ---- 3. the smaller findings ----------------------------------------------------------------------------
def test_convert_a_name_holding_nul_is_a_problem_not_an_internal_error(tmp_path):
    source = golden_json(tmp_path / "p.json", {"a\x00b": np.ones(3, np.float32), "good": np.zeros(2, np.float32),
                                               "z": np.ones(1, np.float32)})
    r = accuscope("convert", source, "--out", tmp_path / "out")
    polite(r, 1)  # some tensors failed, the rest written
    assert "a?b:output:0: the name holds a NUL character" in r.stdout
    assert sorted(os.listdir(tmp_path / "out")) == ["good.0.0.npy", "z.0.0.npy"]


def test_convert_on_a_full_disk_is_exit_2_with_a_message(tmp_path, full_disk):
    source = golden_json(tmp_path / "p.json", {f"t{k}": np.ones(4096, np.float32) for k in range(10)})
    r = accuscope("convert", source, "--out", full_disk / "o")
    polite(r, 2)
    assert "No space left on device" in r.stderr and "of 10 tensors written, the rest not" in r.stderr
