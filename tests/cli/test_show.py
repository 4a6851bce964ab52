"""`accuscope show`: a task's result as JSON, CSV or Markdown, through the real entry point."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.tasks.task import load_task
from support.narrow import present


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_json_has_stable_keys_and_agrees_with_the_task(ws):
    task = ws / MAIN.name
    r = accuscope("show", task)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"task", "state", "rows", "failing", "not_compared", "device_only", "first_failing", "judgement", "coverage", "warnings",
                        "columns", "data"}
    table = load_task(task).table
    assert table is not None
    assert doc["rows"] == len(table) == len(doc["data"]) and doc["failing"] == int(table.columns["fail"].sum())
    assert doc["first_failing"]["op"] == "/block1/conv1/Conv/block1/relu1/Relu"
    assert doc["first_failing"]["broken"][0].startswith("cos 0.9562 < 0.99")
    cos = doc["columns"].index("cos")
    assert all(row[cos] is None or 0 <= row[cos] <= 1 for row in doc["data"])  # NaN is null, valid JSON


def test_csv_and_markdown_of_the_failing_rows_and_exit_codes(ws):
    task = ws / MAIN.name
    r = accuscope("show", task, "--format", "csv", "--failing", "--columns", "npu_op,cos,fail", "--fail-on-error")
    assert r.returncode == 1  # rows fail
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["npu_op", "cos", "fail"] and len(rows) - 1 == int(present(load_task(task).table).columns["fail"].sum())
    assert all(row[2] == "True" for row in rows[1:])
    r = accuscope("show", task, "--format", "md", "--failing", "--columns", "npu_op,cos")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "| npu_op | cos |" and lines[1] == "|---|---|"
    assert lines[2].startswith("| /block1/conv1/Conv/block1/relu1/Relu | 0.956")
    r = accuscope("show", task, "--columns", "nope")
    assert r.returncode == 2 and "no column nope" in r.stderr


def test_a_reader_that_goes_away_is_not_an_internal_error(ws):
    """`accuscope show T | head -1`: the pipe closes early; exit 141 as the shell reports SIGPIPE, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "accuscope", "show", str(ws / MAIN.name), "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141) and "internal error" not in err and "Traceback" not in err


def test_compare_json_is_one_object_on_stdout(ws, tmp_path):
    task = ws / MAIN.name
    meta = json.loads((task / "task.json").read_text())
    r = accuscope("compare", "--npu", meta["npu"], "--golden", meta["golden"], "--model", meta["model"],
                  "--out", tmp_path / "t", "--advisor", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing else on stdout: the human summary went to stderr
    assert set(doc) == {"task", "sides", "rows", "failing", "not_compared", "device_only", "first_failing", "judgement", "coverage",
                        "pairing", "problems", "verdict", "findings"}
    assert doc["pairing"] is None  # the pairing ladder's counts: two msprobe dumps only (docs/pairing.md)
    assert doc["sides"] == {"npu": "ascend", "golden": "npy"} and doc["coverage"]["outputs_paired"] == 1
    assert doc["verdict"]["rule"] == "verdict" and "the model fails" in doc["verdict"]["title"]
    assert "rows " in r.stderr


def test_advise_json_has_the_verdict_coverage_and_first_failing_op_as_show_and_compare_name_them(ws):
    task = ws / MAIN.name
    r = accuscope("advise", task, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"verdict", "rows", "failing", "first_failing", "coverage", "findings", "ops", "method"} <= set(doc)
    shown = json.loads(accuscope("show", task).stdout)
    assert {k: doc[k] for k in ("rows", "failing", "first_failing", "coverage")} == \
        {k: shown[k] for k in ("rows", "failing", "first_failing", "coverage")}
    assert doc["verdict"] == doc["findings"][0] and doc["verdict"]["rule"] == "verdict"
    assert "the model fails" in doc["verdict"]["title"]
