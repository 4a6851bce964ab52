"""The advisor's rules as records (engine/diagnose/rules): every name unique and spelled once, the
order checked against what each rule reads and writes, and a rule added the way ARCHITECTURE.md's
recipe says runs in the place it is given."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accuscope.engine.diagnose import rules
from accuscope.engine.diagnose.advice import COVERAGE, MS_RULES, VERDICT, Finding, load_advice
from accuscope.engine.diagnose.advisor import advise
from accuscope.engine.diagnose.rules import registry
from accuscope.engine.diagnose.rules.context import FACTS, Context, finding
from accuscope.engine.diagnose.rules.rule import Rule, ordered
from accuscope.engine.tasks.task import load_task
from support.narrow import present
from support.tasks import table_task

PACKAGE = Path(rules.__file__).parent
FINDINGS = [name for rule in registry.RULES for name in rule.findings]


def test_rule_and_finding_names_are_unique_and_every_finding_has_its_priority():
    names = [rule.name for rule in registry.RULES]
    assert len(names) == len(set(names))
    assert len(FINDINGS) == len(set(FINDINGS)) and set(MS_RULES) <= set(FINDINGS)
    assert sorted(registry.PRIORITY) == sorted(FINDINGS)  # each finding placed among the others once
    assert ordered(registry.RULES) == registry.RULES


def _modules() -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text()) for p in sorted(PACKAGE.glob("*.py"))}


def test_each_name_is_spelled_once_and_used_through_its_constant():
    spelled: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        node: ast.AST
        for node in tree.body:  # module-level NAME = "literal"
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in FINDINGS:
                spelled.setdefault(node.value.value, []).append(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "finding" and len(node.args) > 1:
                    assert not isinstance(node.args[1], ast.Constant), (name, node.lineno, "finding() by literal")
                if node.func.id == "Finding" and node.args:
                    assert not isinstance(node.args[0], ast.Constant), (name, node.lineno, "Finding() by literal")
                if node.func.id == "Rule" and isinstance(node.args[0], ast.Constant):
                    assert node.args[0].value not in FINDINGS, (name, node.lineno, "a finding name spelled again")
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "rule":
                for right in node.comparators:
                    literals = right.elts if isinstance(right, ast.Tuple) else [right]
                    assert not any(isinstance(x, ast.Constant) for x in literals), (name, node.lineno)
    # MindStudio's names are spelled in advice.MS_RULES (the app reads them there too), the verdict's and
    # coverage's in advice.py (Advice.cause reads them), every other once here
    by_advice = set(MS_RULES) | {VERDICT, COVERAGE}
    assert {k: len(v) for k, v in spelled.items()} == {n: 1 for n in FINDINGS if n not in by_advice}, spelled


def test_declared_facts_are_what_the_context_holds(tmp_path):
    run = Context(load_task(table_task(tmp_path / "t", 0.9)), None, None, 1)
    written = {fact for rule in registry.RULES for fact in rule.writes}
    assert all(hasattr(run, fact) for fact in FACTS | written), sorted(f for f in FACTS | written if not hasattr(run, f))


def test_an_order_that_does_not_hold_is_refused():
    verdict = registry.RULES[0]
    late = Rule("late", lambda run: [], reads=("outcome",))
    with pytest.raises(ValueError, match="'late' reads 'outcome', which no rule before it writes"):
        ordered((late, verdict))
    with pytest.raises(ValueError, match="listed twice"):
        ordered((verdict, verdict))
    with pytest.raises(ValueError, match="writes 'outcome', which is already written"):
        ordered((verdict, Rule("again", lambda run: [], writes=("outcome",))))
    with pytest.raises(ValueError, match="makes 'verdict', which another rule makes"):
        ordered((verdict, Rule("copy", lambda run: [], makes=(VERDICT,))))


# ------------------------------------------------------------------ a rule added as the recipe says

SEEN = "seen_outcome"  # the tiny rule's finding name, spelled once
calls: list[tuple[str, list[str]]] = []


def seen_outcome(run: Context) -> list[Finding]:
    """Says the verdict's outcome, and records what it saw."""
    calls.append((run.outcome, [f.rule for f in run.findings]))
    return [finding(run, SEEN, "info", None, f"the outcome is {run.outcome}", "A rule added by a test.")]


RULE = Rule(SEEN, seen_outcome, reads=("outcome",))


def test_a_rule_added_as_the_recipe_says_runs_in_its_place(tmp_path, monkeypatch):
    calls.clear()
    # its RULE in RULES after everything it reads (the verdict writes `outcome`), its name in PRIORITY
    monkeypatch.setattr(registry, "RULES", ordered((registry.RULES[0], RULE, *registry.RULES[1:])))
    monkeypatch.setattr(registry, "PRIORITY", (*registry.PRIORITY, SEEN))
    last: list[list[str]] = []

    def seen(run):
        last.append([f.rule for f in run.findings])
        return []
    probe = Rule("probe", seen, reads=(SEEN,))
    monkeypatch.setattr(registry, "RULES", ordered((*registry.RULES, probe)))
    folder = table_task(tmp_path / "fails", 0.9)
    a = advise(folder)
    assert calls == [("fail", [VERDICT])]  # once, after the verdict, before every other rule
    assert last[0][:2] == [VERDICT, SEEN] and len(last[0]) > 2  # the rules after it ran and saw its finding
    assert a is not None
    assert [f.title for f in a.by_rule(SEEN)] == ["the outcome is fail"]
    assert [f.title for f in present(load_advice(folder)).by_rule(SEEN)] == ["the outcome is fail"]  # in advice.json
    with pytest.raises(ValueError, match="'seen_outcome' reads 'outcome'"):
        ordered((RULE, *registry.RULES))  # before the verdict it could not see the outcome
