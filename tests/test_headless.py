"""The engine is headless: importing any engine module must never pull in textual."""
from __future__ import annotations

import pkgutil
import subprocess
import sys

import accuscope.engine as engine


def test_no_engine_module_imports_textual():
    modules = [m.name for m in pkgutil.walk_packages(engine.__path__, "accuscope.engine.")]
    assert len(modules) >= 8
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "    bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]\n"
            "    assert not bad, (name, bad[:3])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
