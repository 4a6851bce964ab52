"""Helpers of test_opdetail.py that other tests use too."""
from __future__ import annotations

import numpy as np

EPS64 = np.finfo(np.float64).eps


def brute_errors(x, y, by):
    """Every element's error under the detail's conventions, the plain way (whole arrays)."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    with np.errstate(all="ignore"):
        e = np.abs(x - y)
        if by == "rel":
            e = np.where(np.abs(y) > EPS64, e / np.abs(y), np.nan)
        bad = ~(np.isfinite(x) & np.isfinite(y))
        same = bad & ((x == y) | (np.isnan(x) & np.isnan(y)))
        e[bad & ~same] = np.inf
        e[same] = np.nan
    return e


def brute_top(e, n):
    valid = np.flatnonzero(~np.isnan(e))
    return valid[np.lexsort((valid, -e[valid]))][:n]
