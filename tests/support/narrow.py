"""Narrowing an Optional inside an expression, for mypy, where an `assert x is not None` cannot stand."""
from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """`value`, asserted not None (a test's failure when it is)."""
    assert value is not None
    return value
