"""Custom metric plugins in msaccucmp's convention: `{dir}/algorithm/alg_{Name}.py` defining
`compare(my_output_dump_data, ground_truth_dump_data, args) -> (result_str, message_str)`.

Plugins are code: they are loaded only from a directory the user names, and they run in a
separate process (`PluginHost`), never in accuscope's own: a plugin that raises, returns something
other than strings, or ends its process (`os._exit`, a crash) yields NaN and a reason for that cell
and the comparison goes on. Each plugin has one time budget per run (`budget()` seconds, default 60,
$ACCUSCOPE_PLUGIN_BUDGET to change it): a plugin that uses it up is stopped and disabled, with a
reason on the rows it did not compute.
"""
# lazy: engine.compare.lifetime
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from accuscope.engine.sources.inputfile import not_regular, user_path
from accuscope.engine.sources.tensor import Problem, SourceError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

NAME = re.compile(r"alg_([A-Za-z0-9_]+)\.py")
TIMEOUT = 60.0
BUDGET_ENV = "ACCUSCOPE_PLUGIN_BUDGET"


@dataclass(frozen=True)
class Plugin:
    name: str
    path: str


def budget() -> float:
    """Seconds each plugin may run in all during one comparison."""
    try:
        value = float(os.environ.get(BUDGET_ENV, TIMEOUT))
    except ValueError:
        return TIMEOUT
    return value if value > 0 else TIMEOUT


def discover(directory: str) -> tuple[list[Plugin], list[Problem]]:
    """Plugins under `directory/algorithm/`; a file that cannot serve is a Problem, not an error.
    The files are loaded in a plugin host process, not in this one."""
    user_path(directory, "plugin folder", folder=True)
    folder = os.path.join(directory, "algorithm")
    if not os.path.isdir(folder):
        raise SourceError(f"{directory}: no 'algorithm' folder with alg_<Name>.py files")
    plugins, problems = [], []
    candidates = [(m.group(1), os.path.join(folder, f)) for f in sorted(os.listdir(folder))
                  for m in [NAME.fullmatch(f)] if m]
    if not candidates:
        return [], []
    with PluginHost() as host:
        for name, path in candidates:
            why = not_regular(path)  # a FIFO named alg_x.py would block its import for ever
            error = why.removesuffix("; skipped") or host.check(Plugin(name, path))
            if error:
                problems.append(Problem(path, f"not usable: {error}"))
            else:
                plugins.append(Plugin(name, path))
    return plugins, problems


# ---- inside the plugin host process -------------------------------------------------------------
_CACHE: dict[str, Any] = {}


def _load(path: str):
    if path not in _CACHE:
        spec = importlib.util.spec_from_file_location(f"accuscope_alg_{abs(hash(path))}", path)
        if spec is None or spec.loader is None:  # not for a .py file, as every plugin is
            raise ImportError("not loadable as a Python module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        func = getattr(module, "compare", None)
        if not callable(func):
            raise TypeError("defines no compare() function")
        if len(inspect.signature(func).parameters) != 3:
            raise TypeError("compare() must take exactly three parameters (my output, ground truth, args)")
        _CACHE[path] = func
    return _CACHE[path]


def _call(plugin: Plugin, x, y, args: dict) -> tuple[str, str]:
    """(cell text, reason); cell text 'NaN' when the plugin failed. x, y: arrays or Tensors."""
    try:
        if not isinstance(x, np.ndarray):
            x = np.asarray(x.load(), dtype=np.float32).reshape(-1)
            y = np.asarray(y.load(), dtype=np.float32).reshape(-1)
        value = _load(plugin.path)(x, y, dict(args))
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
        return "NaN", f"{plugin.name} raised {type(exc).__name__}: {exc}"
    if not (isinstance(value, tuple) and len(value) == 2):
        return "NaN", f"{plugin.name} returned {type(value).__name__}, not (result, message)"
    result, message = value
    if not isinstance(result, str):
        return "NaN", f"{plugin.name} returned a {type(result).__name__} result, not a string"
    return result, message if isinstance(message, str) else ""


def _serve(conn, parent_pid: int) -> None:
    from accuscope.engine.compare.lifetime import die_with_parent
    die_with_parent(parent_pid)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request[0] == "check":
            try:
                _load(request[1].path)
                conn.send("")
            except BaseException as exc:  # noqa: BLE001
                conn.send(f"{type(exc).__name__}: {exc}")
        else:
            conn.send(_call(*request[1:]))


# ---- on accuscope's side ------------------------------------------------------------------------
class PluginHost:
    """The process plugin code runs in during one comparison, restarted when a plugin ends it.
    Tracks each plugin's time against `budget_s` and disables a plugin that uses it up."""

    def __init__(self, budget_s: float | None = None, cancel: threading.Event | None = None):
        self.budget = budget_s if budget_s is not None else budget()
        self.cancel = cancel
        self.used: dict[str, float] = {}
        self.disabled: dict[str, str] = {}  # plugin name -> the reason its remaining cells carry
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None

    def __enter__(self) -> PluginHost:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, plugin: Plugin, x, y, args: dict) -> tuple[str, str]:
        """(cell text, reason) of one plugin on one pair (arrays, or Tensors loaded in the host)."""
        if plugin.name in self.disabled:
            return "NaN", self.disabled[plugin.name]
        if self.cancel is not None and self.cancel.is_set():
            return "NaN", f"{plugin.name}: cancelled"
        answer = self._ask(plugin, ("call", plugin, x, y, args))
        return answer if isinstance(answer, tuple) else ("NaN", answer.reason)

    def check(self, plugin: Plugin) -> str:
        """'' when the plugin file loads and defines a usable compare(), else why not."""
        answer = self._ask(plugin, ("check", plugin))
        return answer if isinstance(answer, str) else answer.reason

    def close(self) -> None:
        conn, proc, self._conn, self._proc = self._conn, self._proc, None, None
        if conn is not None:
            conn.close()
        if proc is not None:
            proc.kill()
            proc.join()

    def _start(self) -> tuple[Connection, BaseProcess]:
        """Start the host; from a daemonic process too (a Dask worker: see children_allowed). A start
        that fails raises its own error and leaves nothing to close."""
        from accuscope.engine.compare.lifetime import children_allowed, process_context
        ctx = process_context()
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, os.getpid()), daemon=True, name="accuscope-plugins")
        try:
            with children_allowed():
                proc.start()
        except BaseException:
            conn.close()
            raise
        finally:
            child.close()
        self._conn, self._proc = conn, proc
        return conn, proc

    def _ask(self, plugin: Plugin, request):
        conn, proc = self._conn, self._proc
        if conn is None or proc is None:
            conn, proc = self._start()
        before, start = self.used.get(plugin.name, 0.0), time.perf_counter()

        def spent() -> float:
            return before + time.perf_counter() - start
        try:
            conn.send(request)
            while not conn.poll(0.1):
                if spent() >= self.budget:
                    self.close()
                    self.disabled[plugin.name] = (f"{plugin.name}: disabled after using its {self.budget:g} s "
                                                  "time budget for this run")
                    return _Failed(f"{plugin.name}: no answer within {self.budget:g} s")
                if self.cancel is not None and self.cancel.is_set():
                    self.close()
                    return _Failed(f"{plugin.name}: cancelled")
            return conn.recv()
        except (EOFError, OSError):  # the plugin ended the host process
            proc.join()
            code = proc.exitcode
            conn.close()
            self._proc = self._conn = None
            return _Failed(f"{plugin.name} ended its process (exit code {code}); not computed")
        finally:
            self.used[plugin.name] = spent()


@dataclass
class _Failed:
    reason: str


def run(plugin: Plugin, x: np.ndarray, y: np.ndarray, args: dict, timeout: float = TIMEOUT) -> tuple[str, str]:
    """One plugin on one pair in a host of its own; (cell text, reason), cell text 'NaN' when the
    plugin failed."""
    with PluginHost(timeout) as host:
        return host.run(plugin, x, y, args)
