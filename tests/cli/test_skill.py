"""The agent skill (skills/accuscope/SKILL.md) and docs/interop.md: their command lines are real.

Every `accuscope ...` line of their fenced blocks and inline code is parsed by the CLI's own parser (a
command, an option or a choice that does not exist fails it), and the skill's workflow on a model runs
as written on a tiny ONNX model and its fp16 conversion."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import onnx
import pytest

from accuscope.cli import build_parser
from accuscope.commands import COMMANDS
from support.cli import accuscope
from support.models import relu_sigmoid

ROOT = Path(__file__).parent.parent.parent
SKILL = ROOT / "skills" / "accuscope" / "SKILL.md"
PAGES = (SKILL, ROOT / "docs" / "interop.md")


def command_lines(page: Path) -> list[str]:
    """The `accuscope ...` command lines of a Markdown page: fenced lines (a trailing `\\` joins the
    next) and inline code spans."""
    text = page.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("accuscope "):
                found.append(line)
    found += [m for m in re.findall(r"`(accuscope [^`]+)`", text) if "\n" not in m]
    return found


def test_the_skill_is_an_agent_skill():
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head = dict(re.findall(r"^([a-z-]+): (.+)$", text.split("---\n")[1], re.M))
    assert head["name"] == SKILL.parent.name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", head["name"])
    assert 50 < len(head["description"]) <= 1024 and "Use when" in head["description"]
    assert len(text.splitlines()) < 500  # the body an agent loads whole
    assert "accuscope mcp" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_line_is_one_the_cli_takes(page):
    lines = command_lines(page)
    assert len(lines) >= 8
    for line in lines:
        if len(shlex.split(line)) == 2:  # a command named in the text (`accuscope pairs`)
            assert shlex.split(line)[1] in {c.name for c in COMMANDS}, line
            continue
        try:
            args = build_parser().parse_args(shlex.split(line)[1:])
        except SystemExit:
            pytest.fail(f"{page.name}: `{line}` is no command line accuscope takes")
        assert args.command == shlex.split(line)[1]


RUNS = (  # the skill's lines that act on a model, run as written where ref.onnx and ref-fp16.onnx lie
    "accuscope run ref.onnx ref-fp16.onnx --out task --random-inputs --json",
    "accuscope show task --failing --format json",
    "accuscope advise task --json",
    "accuscope advise task --verify 8 --json",
    "accuscope sensitivity task --top 10 --json",
    "accuscope precision ref.onnx --to fp16 --target cos=0.999 --out prec --random-inputs --json",
)


def test_the_skills_workflow_runs_as_written(tmp_path):
    from onnxconverter_common import float16
    assert set(RUNS) <= set(command_lines(SKILL))
    relu_sigmoid(tmp_path / "ref.onnx")
    onnx.save(float16.convert_float_to_float16(onnx.load(str(tmp_path / "ref.onnx")), keep_io_types=True),
              str(tmp_path / "ref-fp16.onnx"))
    answers = []
    for line in RUNS:
        r = accuscope(*shlex.split(line)[1:], cwd=tmp_path)
        assert r.returncode == 0, f"{line}: {r.stderr}"
        answers.append(json.loads(r.stdout))
    assert answers[0]["judgement"]["outcome"] == "pass"  # the fields the skill tells the agent to read
    assert "findings" in answers[2] and "findings" in answers[3] and answers[5]["met"] and answers[5]["keep"] == []
    final = json.loads((tmp_path / "prec" / "trials.jsonl").read_text().splitlines()[-1])["final"]
    assert final["met"] and final["files"]["nodes_to_exclude"] == "result/nodes_to_exclude.json"
