"""The search for the smallest set of ops to keep in fp32 that meets the target: the ranked ops
first, one at a time, best first (greedy); if those are not enough, a bisection over the ranked
list followed by every other candidate in execution order; then pruning (each kept op dropped in
turn, last added first, and left out when the target still holds without it).

A trial already in the log (same op set) is never run again, so a resumed search replays the log
and goes on where it stopped. `--max-trials` and `--time` stop it, with the best set found so far."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from accuscope.engine.precision.trials import Trial

GREEDY = 5  # ranked ops tried one at a time before bisecting


class Stopped(Exception):
    """The budget ran out or the search was cancelled."""


@dataclass
class Outcome:
    met: bool
    keep: list[str]  # the op set found (the smallest passing one so far when not finished)
    trials: list[Trial]
    reason: str = ""  # why it stopped short, when it did
    ran: int = 0  # trials run by this call (the rest came from the log)


class Search:
    def __init__(self, evaluate: Callable[[list[str], str, int], Trial],
                 ranked: list[str] | Callable[[], list[str]], candidates: list[str],
                 done: list[Trial] | None = None, on_trial: Callable[[Trial], None] | None = None,
                 max_trials: int | None = None, seconds: float | None = None,
                 cancel: threading.Event | None = None):
        """`evaluate(keep, phase, n)` makes and measures one candidate; `ranked`: the ranking's op
        names (worst first), or the function that makes it, called only when the full conversion
        misses the target; `candidates`: every op the conversion changes, in execution order."""
        self.evaluate, self.on_trial = evaluate, on_trial
        self.rank, self.candidates = ranked, candidates
        self.ranked: list[str] = []
        self.order: list[str] = []
        self.trials = list(done or [])
        self.known = {t.key: t for t in self.trials}
        self.max_trials, self.seconds, self.cancel = max_trials, seconds, cancel
        self.started = time.monotonic()
        self.ran = 0

    def trial(self, keep: list[str], phase: str) -> Trial:
        found = self.known.get(frozenset(keep))
        if found is not None:
            return found
        self.check_budget()
        t = self.evaluate(list(keep), phase, len(self.trials) + 1)
        self.trials.append(t)
        self.known[t.key] = t
        self.ran += 1
        if self.on_trial:
            self.on_trial(t)
        return t

    def check_budget(self) -> None:
        """Stopped when there is no room for another trial (or the search was cancelled)."""
        if self.cancel is not None and self.cancel.is_set():
            raise Stopped("cancelled")
        if self.max_trials is not None and len(self.trials) >= self.max_trials:
            raise Stopped(f"--max-trials {self.max_trials} reached")
        if self.seconds is not None and time.monotonic() - self.started >= self.seconds:
            raise Stopped(f"--time {self.seconds:g} s reached")

    def best(self) -> list[str] | None:
        passing = [t for t in self.trials if t.passed]
        return min(passing, key=lambda t: (len(t.keep), t.n)).keep if passing else None

    def run(self) -> Outcome:
        try:
            keep = self._find()
        except Stopped as stop:
            best = self.best()
            return Outcome(best is not None, best or [], self.trials, str(stop), self.ran)
        if keep is None:
            return Outcome(False, [], self.trials, "the target is not met even with every candidate op in fp32",
                           self.ran)
        return Outcome(True, keep, self.trials, "", self.ran)

    def _find(self) -> list[str] | None:
        if self.trial([], "full").passed:
            return []
        if callable(self.rank):
            self.check_budget()  # no ranking for a search that cannot go on
        names = set(self.candidates)
        ranked = self.rank() if callable(self.rank) else self.rank
        self.ranked = [r for r in dict.fromkeys(ranked) if r in names]
        self.order = self.ranked + [c for c in self.candidates if c not in set(self.ranked)]
        found = None
        greedy = min(len(self.ranked), GREEDY)
        for k in range(1, greedy + 1):
            if self.trial(self.ranked[:k], "greedy").passed:
                found = self.ranked[:k]
                break
        if found is None:
            if not self.order or not self.trial(self.order, "all").passed:
                return None
            lo, hi = greedy, len(self.order)  # order[:lo] fails, order[:hi] passes
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.trial(self.order[:mid], "bisect").passed:
                    hi = mid
                else:
                    lo = mid
            found = self.order[:hi]
        for op in reversed(list(found)):  # the empty set is known (the first trial)
            rest = [o for o in found if o != op]
            if self.trial(rest, "prune").passed:
                found = rest
        return found
