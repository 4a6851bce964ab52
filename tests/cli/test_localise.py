"""benchmarks/localise.py --quick, end to end: faults planted in real models from PyPI wheels, each
run, compared and advised on, then scored with the baselines. The advisor's score is not asserted
(it is being improved): the last line's shape, and that its counts agree with the cases written."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^localise: top-1 (\d+)/(\d+) · top-3 (\d+)/(\d+) · false alarms (\d+)/(\d+) · "
                  r"first-failing baseline top-1 (\d+)/(\d+) · models (\d+)$")


@pytest.mark.slow
def test_quick_run_scores_consistently(tmp_path):
    out = tmp_path / "cases.json"
    proc = subprocess.run([sys.executable, "-P", str(ROOT / "benchmarks" / "localise.py"), "--quick",
                           "--dir", str(tmp_path / "work"), "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.rstrip().splitlines()
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    top1, n, top3, n3, alarms, m_pass, base, n_base, models = map(int, m.groups())
    assert n == n3 == n_base and n >= 3
    assert 0 <= top1 <= top3 <= n and 0 <= base <= n and 0 <= alarms <= m_pass and m_pass >= 1
    assert models >= 3

    cases = [c for c in json.loads(out.read_text()) if c["result"]]
    faults = [c for c in cases if c["truth"] != "pass"]
    passes = [c for c in cases if c["truth"] == "pass"]
    assert (len(faults), len(passes), len({c["model"] for c in cases})) == (n, m_pass, models)
    assert sum(c["truth"] in c["result"]["advisor"][:1] for c in faults) == top1
    assert sum(c["truth"] in c["result"]["advisor"][:3] for c in faults) == top3
    assert sum(c["truth"] in c["result"]["first_failing"][:1] for c in faults) == base
    assert sum(bool(c["result"]["errors"]) for c in passes) == alarms
    for c in cases:  # the truth is stored with each case, and every fault broke the output it was planted in
        assert c["truth"] and c["kind"] in ("fp16", "quant", "weight", "swap", "input", "pass")
        assert c["result"]["seconds"] > 0
        if c["truth"] != "pass":
            assert c["out_cos"] != c["out_cos"] or c["out_cos"] < 0.99
    # the table by model and fault kind comes before the last line
    assert any(line.startswith("| model |") for line in lines)
