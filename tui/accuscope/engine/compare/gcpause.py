"""The cyclic garbage collector held off while pairing makes its many small objects.

Pairing 100k msprobe calls makes a Match and a Pair per tensor (half a million each) beside the half
million Tensors read: every few hundred thousand new objects the collector walks all of them
(generation 2), and measured on bench_crossmap.py that was a third of the pairing's CPU time (3.4 of
9 s with a layer mapping file). Nothing pairing makes holds a cycle, so nothing is lost by waiting:
the collector runs again when the outermost pause ends (threads pausing at once share one pause).

What the pause made is then moved to the oldest generation unexamined (`gc.freeze` then `gc.unfreeze`):
otherwise the first young collection after it walks every one of those objects, and on a compare of
20,000 small npy pairs two such walks (after `plan`, after `execute`) took 0.2 s of a 2.2 s process,
10 us a row (bench_compare.py --case small). Cyclic garbage among them, if any, waits for the next
full collection instead. Where objects are already frozen (the app freezes what its start-up made,
app.py) the move is skipped: unfreezing would hand those back to the collector.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


def paused(fn):
    """`fn` run with the cyclic collector off (decorator)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _leave()
    return wrapper


@contextlib.contextmanager
def pause(on: bool = True) -> Iterator[None]:
    """The collector off inside the block (when `on`)."""
    if not on:
        yield
        return
    _enter()
    try:
        yield
    finally:
        _leave()


def _enter() -> None:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1


def _leave() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _was_enabled:
            if not gc.get_freeze_count():  # (what another froze, the app its start-up, stays frozen)
                gc.freeze()  # every tracked object to the permanent generation, then all of them back
                gc.unfreeze()  # into the oldest: the young generations empty, nothing walked
            gc.enable()
