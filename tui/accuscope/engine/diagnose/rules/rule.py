"""What an advisor rule is: a `Rule` record (its name, the function that makes its findings, the
Context facts it reads and those it hands on), and how a list of them runs (`run_rules`) and is
checked to be in an order that holds (`ordered`): registry.RULES is the list advise() runs."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import FACTS, Context


@dataclass(frozen=True)
class Rule:
    """One advisor rule. `name` is the rule as its findings and advice.json spell it (spelled once: a
    constant in the rule's module); `check(run)` returns its findings (none when it does not apply);
    `reads` names what it reads: Context facts (context.FACTS), facts an earlier rule writes, or the
    findings of an earlier rule (by finding name); `writes` the Context facts it sets for the rules
    after it; `makes` the finding names it makes when more than its own; `revise(run, earlier)`, when
    it made findings, revises the earlier rules' findings first (drift tells the introduced-op finding
    that no single op explains the output)."""

    name: str
    check: Callable[[Context], list[Finding]]
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    makes: tuple[str, ...] = ()
    revise: Callable[[Context, list[Finding]], list[Finding]] | None = None

    @property
    def findings(self) -> tuple[str, ...]:
        """The finding names this rule makes."""
        return self.makes or (self.name,)


def ordered(rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """`rules` as a tuple, checked: names and finding names unique, each fact written by one rule,
    and each rule after whatever it reads (a fact an earlier rule writes, an earlier rule's findings).
    ValueError naming the rule otherwise."""
    names: set[str] = set()
    made: set[str] = set()
    written: set[str] = set()
    for rule in rules:
        if rule.name in names:
            raise ValueError(f"advisor rule {rule.name!r} is listed twice")
        names.add(rule.name)
        for read in rule.reads:
            if read not in FACTS and read not in written and read not in made:
                raise ValueError(f"advisor rule {rule.name!r} reads {read!r}, which no rule before it writes or "
                                 "makes (nor is it a Context fact)")
        for fact in rule.writes:
            if fact in FACTS or fact in written:
                raise ValueError(f"advisor rule {rule.name!r} writes {fact!r}, which is already written")
            written.add(fact)
        for name in rule.findings:
            if name in made:
                raise ValueError(f"advisor rule {rule.name!r} makes {name!r}, which another rule makes")
            made.add(name)
    return tuple(rules)


def run_rules(run: Context, rules: Sequence[Rule]) -> list[Finding]:
    """Every rule in order, each seeing the findings made before it (`run.findings`)."""
    findings: list[Finding] = []
    for rule in rules:
        run.findings = tuple(findings)
        made = rule.check(run)
        if made and rule.revise is not None:
            findings = rule.revise(run, findings)
        findings += made
    run.findings = tuple(findings)
    return findings
