"""Fault injection for the tests: $ACCUSCOPE_FAULT names one point in the run and what happens there.

    "pause POINT MARKER"  at POINT, create the file MARKER and wait (for the test to kill us)
    "exit POINT TEXT"     at POINT, when its detail contains TEXT, end the process at once (exit 70)
    "raise POINT"         at POINT, raise RuntimeError (an internal error: a bug in accuscope)

Points: "compare" (after the first compared pair), "staged" (the new result is written under
temporary names, nothing renamed yet), "commit" (result.npz renamed, task.json not yet), "pair"
(a worker about to compare a pair; detail: the NPU tensor's name). Read once, when the process
imports this module (a worker inherits it): unset, a point costs one test of a global (the
environment's lookup was a microsecond a pair).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "ACCUSCOPE_FAULT"
_SPEC = os.environ.get(ENV, "")


def armed() -> bool:
    """Whether any point is set (a caller that makes a point's detail only then)."""
    return bool(_SPEC)


def point(name: str, detail: str = "") -> None:
    spec = _SPEC
    if not spec:
        return
    action, where, arg = (spec.split(maxsplit=2) + ["", ""])[:3]
    if where != name:
        return
    if action == "pause":
        Path(arg).touch()
        while True:
            time.sleep(3600)
    if action == "exit" and arg in detail:
        os._exit(70)
    if action == "raise":
        raise RuntimeError(f"fault injected at {name}")
