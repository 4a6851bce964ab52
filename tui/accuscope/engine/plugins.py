"""Custom metric plugins in msaccucmp's convention: `{dir}/algorithm/alg_{Name}.py` defining
`compare(my_output_dump_data, ground_truth_dump_data, args) -> (result_str, message_str)`.

Plugins are code: they are loaded only from a directory the user names. A plugin that raises,
returns something other than strings, or runs past its time limit yields NaN and a reason for
that cell; the comparison goes on.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .tensor import Problem, SourceError

NAME = re.compile(r"alg_([A-Za-z0-9_]+)\.py")
TIMEOUT = 60.0


@dataclass(frozen=True)
class Plugin:
    name: str
    path: str


def discover(directory: str) -> tuple[list[Plugin], list[Problem]]:
    """Plugins under `directory/algorithm/`; a file that cannot serve is a Problem, not an error."""
    folder = os.path.join(directory, "algorithm")
    if not os.path.isdir(folder):
        raise SourceError(f"{directory}: no 'algorithm' folder with alg_<Name>.py files")
    plugins, problems = [], []
    for fname in sorted(os.listdir(folder)):
        match = NAME.fullmatch(fname)
        if not match:
            continue
        path = os.path.join(folder, fname)
        try:
            _load(path)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
            problems.append(Problem(path, f"not usable: {type(exc).__name__}: {exc}"))
            continue
        plugins.append(Plugin(match.group(1), path))
    return plugins, problems


_CACHE: dict[str, Any] = {}


def _load(path: str):
    if path not in _CACHE:
        spec = importlib.util.spec_from_file_location(f"accuscope_alg_{abs(hash(path))}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        func = getattr(module, "compare", None)
        if not callable(func):
            raise TypeError("defines no compare() function")
        if len(inspect.signature(func).parameters) != 3:
            raise TypeError("compare() must take exactly three parameters (my output, ground truth, args)")
        _CACHE[path] = func
    return _CACHE[path]


def run(plugin: Plugin, x: np.ndarray, y: np.ndarray, args: dict, timeout: float = TIMEOUT) -> tuple[str, str]:
    """(cell text, reason); cell text 'NaN' when the plugin failed."""
    box: dict[str, Any] = {}

    def call():
        try:
            box["value"] = _load(plugin.path)(x, y, dict(args))
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    worker = threading.Thread(target=call, daemon=True, name=f"plugin-{plugin.name}")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return "NaN", f"{plugin.name}: no answer within {timeout:g} s"
    if "error" in box:
        exc = box["error"]
        return "NaN", f"{plugin.name} raised {type(exc).__name__}: {exc}"
    value = box.get("value")
    if not (isinstance(value, tuple) and len(value) == 2):
        return "NaN", f"{plugin.name} returned {type(value).__name__}, not (result, message)"
    result, message = value
    if not isinstance(result, str):
        return "NaN", f"{plugin.name} returned a {type(result).__name__} result, not a string"
    return result, message if isinstance(message, str) else ""
