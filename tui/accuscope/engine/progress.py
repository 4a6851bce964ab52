"""How long engine work says where it stands: one `Progress` record, passed to one `OnProgress`.

Every engine function that reports progress takes `progress: OnProgress | None = None` and calls it
with a fresh `Progress(done, total, what)`: `done` of `total` units (pairs, tensors, elements, ops,
ranks: the function's docstring says which), `total` 0 where the work is not counted (a stage
only: the demo's steps), `what` the stage or the item at hand ("" where there is nothing to name),
`elapsed` the seconds since the work began where the engine times it (the comparison), else 0.

Progress carries no results. Where a caller streams what the work produces (the comparison's rows
into the app's table, a multi-rank run's ranks as they land), that comes through its own named
callback (`rows`, `rank_done`), called for a unit just before the progress that counts it, so a
caller that shows both can send them on together.

The record is frozen: a caller may keep it or hand it to another thread as it is. This module
imports nothing of accuscope: every layer of the engine may use it (pyproject's layers contract
puts it below them all).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    what: str = ""
    elapsed: float = 0.0

    def line(self) -> str:
        """`what done/total` ("what" alone where the work is not counted): a status line."""
        return f"{self.what} {self.done}/{self.total}" if self.total else self.what


OnProgress = Callable[[Progress], None]


class Reporter:
    """`say(what, done, total)`: one Progress to `progress`, nothing where there is none; for work
    told in named stages (an export's steps, the advisor's, the demo's)."""

    def __init__(self, progress: OnProgress | None) -> None:
        self.progress = progress

    def __call__(self, what: str, done: int = 0, total: int = 0) -> None:
        if self.progress is not None:
            self.progress(Progress(done, total, what))
