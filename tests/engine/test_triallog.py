"""The precision trial log: each trial's line (kept ops, metric values, seconds, when), the final list
that ends a finished search, and a resume that reads past it."""
from __future__ import annotations

import json

from accuscope.engine.precision.trials import Trial, TrialLog


def test_a_finished_log_ends_in_its_list_and_resumes_past_it(tmp_path):
    log = TrialLog(tmp_path)
    settings = {"model": "m.onnx", "to": "int8"}
    log.start(settings)
    log.append(Trial(1, "full", [], {"cos": 0.9}, False, seconds=1.5))
    log.append(Trial(2, "greedy", ["conv1"], {"cos": float("nan")}, True, seconds=0.5))
    log.append_final(True, ["conv1"], "", {"nodes_to_exclude": "result/nodes_to_exclude.json"})
    lines = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert lines[1]["keep"] == [] and lines[1]["values"] == {"cos": 0.9} and lines[1]["seconds"] == 1.5
    assert lines[2]["values"] == {"cos": None} and lines[2]["at"].endswith("+00:00")
    assert lines[3] == {"final": {"met": True, "keep": ["conv1"], "reason": "",
                                  "files": {"nodes_to_exclude": "result/nodes_to_exclude.json"}}}
    header, trials, ranking = log.open(settings)
    assert [t.keep for t in trials] == [[], ["conv1"]] and trials[1].at == lines[2]["at"] and ranking is None
    log.rewrite(header, trials, ranking)  # what a resumed search does first: its own end comes later
    assert "final" not in log.path.read_text() and len(log.path.read_text().splitlines()) == 3
