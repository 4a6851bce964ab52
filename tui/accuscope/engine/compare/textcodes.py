"""A text column as codes into its distinct values (dictionary encoding), for whole-column work.

Op names, types and dtypes repeat across ranks, steps and tensors: a 1.2M-row multi-rank task holds
a few thousand distinct names. Filters, search, sort and the thresholds' exempt types then work on
the distinct values (lowercased, searched, ranked once) and reach the rows by one numpy take over
int32 codes, never building a lowercased copy of the whole column. The column is decoded in pages,
so a paged (columnar) column is never held whole as Python strings.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

PAGE = 65536  # rows decoded at a time while encoding


class TextCodes(NamedTuple):
    """codes[i] is row i's position in `values` (distinct texts in order of first appearance)."""

    codes: np.ndarray  # int32
    values: np.ndarray  # object array of str

    def take(self, per_value: np.ndarray) -> np.ndarray:
        """An array over the distinct values, spread to the rows."""
        return per_value[self.codes]

    def where(self, per_value: np.ndarray | Sequence[bool]) -> np.ndarray:
        """A boolean mask over the distinct values as a mask over rows."""
        per_value = np.asarray(per_value, dtype=bool)
        if not per_value.any():
            return np.zeros(len(self.codes), dtype=bool)
        return per_value[self.codes]


def encode(column) -> TextCodes:
    """The codes of a text column: an object array of str, or anything that slices into pages with
    `.tolist()` (a columnstore PagedText: its stored codes when it has them, `encoded()`)."""
    stored = getattr(column, "encoded", None)
    if stored is not None and (found := stored()) is not None:
        return found
    index: dict[str, int] = {}
    n = len(column)
    codes = np.empty(n, dtype=np.int32)
    for start in range(0, n, PAGE):
        page = column[start:start + PAGE].tolist()
        codes[start:start + len(page)] = [index.setdefault(v, len(index)) for v in page]
    values = np.empty(len(index), dtype=object)
    values[:] = list(index)
    return TextCodes(codes, values)
