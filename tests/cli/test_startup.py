"""`accuscope` starts without importing what the command given does not need: `import accuscope.cli`
loads no engine and no numpy, and a command imports its own module only, while `accuscope --help`
and `accuscope COMMAND --help` stay complete."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from accuscope.commands import COMMANDS
from accuscope.engine.compare.inputs import INPUTS
from support.bounded import ends
from support.cli import ENV, accuscope
from support.narrow import present


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after `code` (which may exit through argparse)."""
    script = (f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\n"
              "sys.stderr.write('\\n'.join(sys.modules))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120)
    return set(r.stderr.splitlines())


def test_importing_the_cli_loads_no_engine_no_numpy_and_no_command():
    loaded = loaded_after("import accuscope.cli")
    assert "accuscope.cli" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("numpy", "textual", "onnx", "onnxruntime")
             or m.startswith("accuscope.engine") or m.startswith("accuscope.app")}
    assert not heavy
    assert not {m for m in loaded if m.startswith("accuscope.commands.")} - {"accuscope.commands.common"}


def test_a_command_imports_its_own_module_only():
    loaded = loaded_after("from accuscope.cli import main; main(['inspect', '--help'])")
    commands = {m for m in loaded if m.startswith("accuscope.commands.")}
    assert commands == {"accuscope.commands.common", "accuscope.commands.inspect"}


# What a comparison of two npy folders must not import: each belongs to other inputs (a model, Ascend
# or .pt dumps, mapping files, rank trees, worker processes) or to a terminal (the progress bar).
NOT_FOR_NPY = ("onnx", "onnxruntime", "yaml", "google.protobuf", "textual", "rich.progress", "multiprocessing",
               "concurrent.futures.process", "subprocess", "pickletools", "accuscope.app",
               "accuscope.engine.sources.torchpickle", "accuscope.engine.sources.dumpproto",
               "accuscope.engine.compare.crossmap", "accuscope.engine.tasks.rankrun",
               "accuscope.engine.compare.cluster", "accuscope.engine.diagnose",
               # readers and loaders of the formats after the npy folder in the registry, and what
               # only a pool or a lock check needs (sides/registry.py, compare/comparison.py)
               "accuscope.engine.sources.tpumlir", "accuscope.engine.sources.polygraphy",
               "accuscope.engine.graphs.modelfile",
               "accuscope.engine.graphs.onnxgraph", "accuscope.engine.graphs.gegraph",
               "accuscope.engine.graphs.mlirgraph", "accuscope.engine.graphs.caffegraph",
               "accuscope.engine.graphs.omgraph", "accuscope.engine.graphs.msprobegraph",
               # the graph with a model (a side's own, --model), the range with --op-range
               "accuscope.engine.graphs.graph", "accuscope.engine.graphs.oprange",
               # the ranks' pool and their statistics as columns, with the first rank tree (tasks/taskrun.py: ranked)
               "accuscope.engine.compare.multirank", "accuscope.engine.compare.statcolumns",
               # the Ascend reader with an Ascend dump (its sniff reads file names: sources/names.py find_runs)
               "accuscope.engine.sources.npudump",
               # the re-pairing of fused chains, where a pair by identity disagrees (compare/pair.py: suspect)
               "accuscope.engine.compare.repair",
               # the readers of the dialects sniffed before an npy folder: their sniffs are sources/sniffs.py
               "accuscope.engine.sources.msprobe", "accuscope.engine.sources.mindspore", "accuscope.engine.sources.atb",
               # the task browser's list (a comparison writes a task, never lists them)
               "accuscope.engine.tasks.tasklist",
               # the readers' protocol: for mypy (sides/registry.py)
               "accuscope.engine.sources.reader",
               "concurrent.futures", "logging", "socket",
               # plugins only for a run that names their folder; a spelling suggestion only on a misspelling;
               # orjson at the first dump.json read
               "accuscope.engine.compare.plugins", "difflib", "orjson",
               # the summary printed to a pipe is plain text (commands/common.py: Printer)
               "rich")


def test_comparing_two_npy_folders_imports_only_what_they_need(tmp_path):
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        for i, name in enumerate(("conv1", "relu1")):
            np.save(tmp_path / side / f"{name}.0.{1700000000000000 + i}.npy", np.ones((2, 3), np.float32))
    args = ["compare", "--npu", str(tmp_path / "npu"), "--golden", str(tmp_path / "golden"), "--out", str(tmp_path / "t")]
    loaded = loaded_after(f"from accuscope.cli import main; main({args!r})")
    assert "accuscope.engine.compare.metrics" in loaded and (tmp_path / "t" / "task.json").is_file()
    assert not {m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_NPY)}


# What `accuscope open TASK` must not import before its first frame: the comparison (pairing, the
# readers), the op detail's sketch, the advisor; they come when a key or a re-run needs them; plotext
# at a chart's first draw, after the first frame (app/chart.py).
NOT_FOR_FIRST_FRAME = ("plotext", "textual_plotext", "accuscope.engine.compare.comparison", "accuscope.engine.compare.mapping",
                       "accuscope.engine.compare.pairjob", "accuscope.engine.compare.metrics",
                       "accuscope.engine.sides", "accuscope.engine.diagnose.opdetail",
                       "accuscope.engine.diagnose.advisor", "accuscope.engine.sources.ascend",
                       "accuscope.engine.sources.msprobe", "accuscope.engine.sources.npyfile")


def test_the_app_opening_a_task_imports_no_comparison():
    loaded = loaded_after("import accuscope.commands.open_task, accuscope.app.main, accuscope.app.app")
    assert "accuscope.app.taskscreen" in loaded and "accuscope.engine.tasks.task" in loaded
    assert not {m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_FIRST_FRAME)}


def test_plain_printing_writes_what_rich_writes(monkeypatch):
    """commands.common.Printer: markup printed to a pipe without rich, byte for byte what rich's Console
    writes (escapes, tags, control characters, lines at and past the width, wide characters)."""
    import io
    import random

    from rich.console import Console
    from rich.markup import escape as rich_escape

    from accuscope.commands import common
    atoms = ["a", "word", " ", "  ", "[", "]", "\\", "[bold]", "[/]", "[/bold]", "[bold yellow]", "[/bold yellow]",
             "[red]", "[1, 2]", "[x=1]", "[/x]", "[@click]", "·", "✗", "⚠", "é", "中", "\n", "\r", "\t", ":smile:"]
    rng = random.Random(0)
    plain = 0
    for _ in range(3000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 40)))
        text = rich_escape(text) if rng.random() < 0.3 else text
        assert common.escape(text) == rich_escape(text)
        options: dict[str, Any] = rng.choice(  # Console.print's keywords (Any: each has its own type)
            [{}, {"soft_wrap": True}, {"soft_wrap": False}])
        monkeypatch.setenv("COLUMNS", str(rng.choice([10, 24, 80])))
        written = []
        for make in (lambda: common.Printer(highlight=False, soft_wrap=False, emoji=False),
                     lambda: Console(highlight=False, soft_wrap=False, emoji=False)):
            printer = make()
            monkeypatch.setattr("sys.stdout", out := io.StringIO())
            try:
                printer.print(text, **options)
                written.append(out.getvalue())
            except Exception as exc:  # noqa: BLE001 - rich's own errors (broken markup), raised by both
                written.append(type(exc).__name__)
            plain += getattr(printer, "_console", 1) is None
        assert written[0] == written[1], (text, options)
    assert plain > 300  # a good part of them without rich (not: tabs, wide characters, wrapped lines)


def _plain_print(text: str) -> str:
    import io

    from accuscope.commands import common
    sys.stdout = io.StringIO()  # (in the child `ends` forks)
    common.Printer(highlight=False, soft_wrap=True, emoji=False).print(text)
    return sys.stdout.getvalue()


def test_a_long_run_of_backslashes_is_escaped_and_printed_at_once():
    """rich's markup patterns tried a run of backslashes from each of them (1 MB: minutes, issue 43)."""
    from accuscope.commands import common
    name = "\\" * 1_000_000 + "[1]"  # no tag after them: each backslash was a start to try
    assert ends(common.escape, name) == name
    assert ends(_plain_print, f"[bold]{name}[/bold] x") == "\\" * 999_999 + "[1] x\n"  # as rich prints it
    assert common.escape("\\" * 3 + "[b]") == "\\" * 6 + "\\[b]"


def test_help_lists_every_command_and_each_command_its_options():
    r = accuscope("--help")
    assert r.returncode == 0, r.stderr
    for command in COMMANDS:
        assert f"    {command.name} " in r.stdout and command.help.split()[0] in r.stdout
        sub = accuscope(command.name, "--help")
        assert sub.returncode == 0, sub.stderr
        assert sub.stdout.startswith(f"usage: accuscope {command.name}") and "options:" in sub.stdout
        assert "--help" in sub.stdout and len(sub.stdout.split("\n\n")) >= 3  # usage, description, options
    compare = accuscope("compare", "--help").stdout
    assert all(item.flag in compare for item in INPUTS if item.group != "path")
    inspect = accuscope("inspect", "--help").stdout
    assert all(flag in inspect for flag in ("--limit", "--pick", "--shape", "--stats-only", "--option"))


def test_an_unknown_command_names_the_choices():
    r = accuscope("inpsect", "x")
    assert r.returncode == 2 and "invalid choice: 'inpsect'" in r.stderr and "inspect" in r.stderr


def _package_sources():
    """(file name, AST, the accuscope modules its `from ... import` statements name (absolute and relative)
    with the names they import) of every module of the package."""
    import ast
    root = Path(present(__import__("accuscope").__file__)).parent
    for path in sorted(root.rglob("*.py")):
        package = ".".join(("accuscope", *path.relative_to(root).with_suffix("").parts))
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        froms = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                if module.split(".")[0] == "accuscope":
                    froms.append((module, node.names))
        yield path.name, tree, froms


def _unresolved(code_body: str, wanted: set) -> str:
    """What a fresh interpreter finds wrong running `code_body` over `wanted` (collected into `bad`)."""
    code = f"import importlib, types\nbad = []\nfor module, name, where in {sorted(wanted)!r}:\n{code_body}" \
           "print('\\n'.join(bad))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_every_accuscope_import_names_something_that_exists():
    """Lazy imports (inside functions, run only for some inputs) are seen by no import at start-up:
    every `from accuscope... import X`, `from .x import X` and `import accuscope.x` in the package,
    at any depth, is resolved here by importing the module and looking X up."""
    import ast
    wanted = set()
    for where, tree, froms in _package_sources():
        wanted |= {(module, a.name, where) for module, names in froms for a in names}
        wanted |= {(a.name, "", where) for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for a in node.names if a.name.split(".")[0] == "accuscope"}
    assert len(wanted) > 300
    bad = _unresolved("    try:\n        m = importlib.import_module(module)\n"
                      "        if name and not hasattr(m, name):\n            importlib.import_module(module + '.' + name)\n"
                      "    except ImportError as exc:\n        bad.append(f'{where}: from {module} import {name}: {exc}')\n",
                      wanted)
    assert not bad, bad


def test_every_attribute_of_an_accuscope_module_exists():
    """`shards.NAMES` where `shards` is `from accuscope.engine.compare import shards`: an attribute of an
    imported module, read only on some paths, that a rename left behind (ruff sees no module's contents)."""
    import ast
    wanted = set()
    for where, tree, froms in _package_sources():
        bound = {a.asname or a.name: f"{module}.{a.name}" for module, names in froms for a in names}
        wanted |= {(bound[node.value.id], node.attr, f"{where}:{node.lineno}") for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                   and node.value.id in bound and isinstance(node.ctx, ast.Load)}
    assert len(wanted) > 100
    bad = _unresolved("    try:\n        m = importlib.import_module(module)\n    except ImportError:\n        continue\n"
                      "    if isinstance(m, types.ModuleType) and not hasattr(m, name):\n"
                      "        bad.append(f'{where}: {module}.{name} does not exist')\n", wanted)
    assert not bad, bad


