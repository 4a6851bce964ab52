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


def test_engine_tests_run_without_textual():
    """tests/engine holds the engine's tests: none of them imports textual or the app (the folders
    say what a test exercises; an app test belongs in tests/app)."""
    import ast
    from pathlib import Path
    offenders = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names
                          if n.split(".")[0] in ("textual", "appkit") or n.startswith("accuscope.app")]
    assert not offenders, offenders
