"""msprobe's stack.json through the real entry point: `show --format json` gives each shown call's
Python stack (the real fixtures, written by msprobe's own dumper); a broken stack.json is one
warning line and the rest shown."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).parents[1] / "fixtures" / "msprobe"


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_show_json_gives_each_calls_stack_and_a_broken_stack_json_is_a_warning(tmp_path):
    npu, golden = tmp_path / "cand", tmp_path / "bench"
    shutil.copytree(FIX / "cand_md5", npu)
    shutil.copytree(FIX / "bench_md5", golden)
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--rank", "1", "--out", tmp_path / "task")
    assert r.returncode in (0, 1), r.stderr
    r = accuscope("show", tmp_path / "task", "--failing")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["failing"] and set(doc["stack"]) == {row[1] for row in doc["data"]}
    mul = doc["stack"]["Tensor.__mul__.0.forward"]  # the planted fault, called from the net's forward
    assert mul[0].startswith("File fixtures/msprobe/make_fixtures.py, line 40, in forward")
    assert "self.scale" in mul[0]
    (npu / "step0" / "rank1" / "stack.json").write_text('{"0": [["Tensor.__mul__.0.forward"], ["File')
    r = accuscope("show", tmp_path / "task", "--failing")
    assert r.returncode == 0 and "stack" not in json.loads(r.stdout)
    assert r.stderr.count("\n") == 1 and "stack.json: cut short or not JSON" in r.stderr
    assert "Traceback" not in r.stderr
