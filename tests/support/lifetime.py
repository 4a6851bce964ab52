"""Helpers of test_lifetime.py that other tests use too."""
from __future__ import annotations

from pathlib import Path

TRAPS = ("struct", "socket", "numpy")
TRAP = '''
import os as _os, sys as _sys
with open(_os.path.join({markers!r}, "{name}-%d" % _os.getpid()), "w") as _f:
    with open("/proc/self/cmdline", "rb") as _c:
        _f.write(_c.read().replace(b"\\0", b" ").decode(errors="replace"))
_here, _saved = _os.path.dirname(_os.path.abspath(__file__)), list(_sys.path)
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
del _sys.modules[__name__]
try:
    import importlib as _importlib
    _sys.modules[__name__] = _importlib.import_module(__name__)
finally:
    _sys.path[:] = _saved
'''


def plant(root: Path) -> tuple[Path, Path]:
    """(a folder holding struct.py, socket.py, numpy.py; the folder where they leave markers)."""
    cwd, markers = root / "cwd", root / "markers"
    cwd.mkdir(parents=True)
    markers.mkdir()
    for name in TRAPS:
        (cwd / f"{name}.py").write_text(TRAP.format(markers=str(markers), name=name))
    return cwd, markers


def sprung(markers: Path) -> list[str]:
    """'module: command line' of every process that imported a planted module."""
    return [f"{f.name.split('-')[0]}: {f.read_text()[:300]}" for f in sorted(markers.iterdir())]
