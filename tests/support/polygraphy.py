"""Helpers of test_golden.py that other tests use too."""
from __future__ import annotations

import base64
import io
import json
import pathlib

import numpy as np


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def polygraphy_json(path, runs: dict[str, list[dict[str, np.ndarray]]], lazy=True) -> pathlib.Path:
    """A RunResults file as `polygraphy run --save-outputs` writes it."""
    def encode(arr):
        nd = {"array": base64.b64encode(npy_bytes(arr)).decode(), "polygraphy_class": "ndarray"}
        return {"values": nd, "polygraphy_class": "LazyArray"} if lazy else nd

    lst = [[name, [{"outputs": {k: encode(v) for k, v in it.items()}, "runtime": 0.01, "runner_name": name,
                    "polygraphy_class": "IterationResult"} for it in iters]]
           for name, iters in runs.items()]
    path.write_text(json.dumps({"lst": lst, "polygraphy_class": "RunResults"}))
    return path
