"""ARCHITECTURE.md's "Where to add" recipes followed once as written, on a copy of the package: a
command, a dump format with an option, a platform declaring its behaviour, a model format, and a comparison option. Each edit is the one the recipe names (a module, one
line in a table); the real entry point then runs the new thing, so a recipe that under-counts the
files to touch fails here. (The advisor-rule recipe: tests/engine/test_advisor_rules.py; the
metric and result-column records: tests/engine/test_metrictable.py.)"""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import accuscope
from support.cli import ENV
from support.cli import accuscope as run_accuscope

PACKAGE = Path(accuscope.__file__).parent


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of the accuscope package (compiled modules included) to follow a recipe in."""
    root = tmp_path / "tree"
    shutil.copytree(PACKAGE, root / "accuscope", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def edit(path: Path, after: str, line: str) -> None:
    """Insert `line` after the first line containing `after` (one line added, as a recipe says)."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if after in text)
    lines.insert(at + 1, line if line.endswith("\n") else line + "\n")
    path.write_text("".join(lines))


def in_copy(root: Path, *args):
    return run_accuscope(*args, PYTHONPATH=str(root))


def run_accuscope_python(root: Path, code: str, *args) -> subprocess.CompletedProcess:
    """`python -c CODE ARGS` with the copy first on the path."""
    return subprocess.run([sys.executable, "-P", "-c", code, *map(str, args)], capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(root)}, timeout=300)


HELLO = '''"""accuscope hello: a command added as ARCHITECTURE.md says."""
from __future__ import annotations


def register(p):
    p.description = "Say hello to NAME."
    p.add_argument("name")
    p.set_defaults(handler=run)


def run(args) -> int:
    print(f"hello, {args.name}")
    return 0
'''


def test_a_command_added_as_the_recipe_says(copy):
    commands = copy / "accuscope" / "commands"
    (commands / "hello.py").write_text(HELLO)
    edit(commands / "__init__.py", 'Command("serve"', '    Command("hello", "hello", "say hello"),')
    r = in_copy(copy, "hello", "world")
    assert (r.returncode, r.stdout) == (0, "hello, world\n"), r.stderr
    r = in_copy(copy, "--help")
    assert r.returncode == 0 and "say hello" in r.stdout
    # the recipe's warning holds: without set_defaults(handler=run) the command exits 3
    (commands / "hello.py").write_text(HELLO.replace("    p.set_defaults(handler=run)\n", ""))
    r = in_copy(copy, "hello", "world")
    assert r.returncode == 3 and "Traceback" not in r.stderr


TOY = '''"""Toy dumps: one text file, a line `op v1 v2 ...` per op output; a format added as ARCHITECTURE.md says."""
from __future__ import annotations

import os

import numpy as np

from accuscope.engine.sources.tensor import OUTPUT, Problem, SourceError, Tensor


def sniff(path: str) -> bool:
    return os.path.isfile(path) and path.endswith(".toy")


def read(path: str, scale: float = 1.0, **_options) -> tuple[list[Tensor], list[Problem]]:
    tensors, problems = [], []
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror}") from None
    for n, line in enumerate(text.splitlines(), 1):
        op, *values = line.split()
        try:
            data = np.array([float(v) * scale for v in values], dtype=np.float32)
        except ValueError:
            problems.append(Problem(path, f"line {n}: not numbers"))
            continue
        tensors.append(Tensor(op, OUTPUT, 0, data.dtype, data.shape, path, op_type="Toy",
                              reader=lambda data=data: data))
    return tensors, problems


def describe(path: str, tensors: list[Tensor], scale: float = 1.0, **_options) -> list[str]:
    return [f"toy dump: {len(tensors)} ops, values scaled by {scale:g}"]
'''


def test_a_dump_format_and_its_option_added_as_the_recipe_says(copy, tmp_path):
    engine = copy / "accuscope" / "engine"
    (engine / "sources" / "toy.py").write_text(TOY)
    registry = engine / "sides" / "registry.py"
    text = registry.read_text()  # the reader's loader, and the one Format line (first: nothing else claims .toy)
    registry.write_text(text.replace("FORMATS: list[Format] = [\n", (
        "def _toy() -> Reader:\n    from accuscope.engine.sources import toy\n    return toy\n\n\n"
        "FORMATS: list[Format] = [\n"
        '    Format("toy", "toy dump (.toy text)", lambda p: p.endswith(".toy"), reader=_toy,\n'
        '           options=(Option("scale", "multiply every value", float, metavar="X"),)),\n'), 1))

    npu, golden = tmp_path / "npu.toy", tmp_path / "golden.toy"
    npu.write_text("conv1 1 2 3 4\nrelu1 1 0 3 0\n")
    golden.write_text("conv1 1 2 3 4\nrelu1 1 0 3 0\n")
    r = in_copy(copy, "inspect", npu, "--option", "scale=2")
    assert r.returncode == 0, r.stderr
    assert "toy dump: 2 ops, values scaled by 2" in r.stdout

    same = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "same")
    assert same.returncode == 0, same.stderr
    doc = json.loads((tmp_path / "same" / "task.json").read_text())
    assert doc["sides"] == {"npu": "toy", "golden": "toy"}
    assert "paired 2 of 2" in same.stdout and "fail" not in same.stdout.lower().split("paired")[0]

    scaled = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--golden-option", "scale=2",
                     "--out", tmp_path / "scaled", "--fail-on-error")
    assert scaled.returncode == 1, (scaled.stdout, scaled.stderr)  # every value doubled: the rows fail
    assert json.loads((tmp_path / "scaled" / "task.json").read_text())["golden_options"] == {"scale": "2"}

    bad = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--golden-option", "scale=two",
                  "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "scale" in bad.stderr and "Traceback" not in bad.stderr


def test_a_platform_whose_behaviour_is_declared_takes_its_reader_and_its_registry_entry(copy, tmp_path):
    """A made-up platform (tests/support/txtdir.py: a folder holding a device run and a reference run) added
    as the recipe says: its reader module and one Format entry naming its kind and declaring what it does
    (`Capabilities(both_sides=...)`: the folder given on both sides compares its dev run against its ref run).
    Nothing else in the package is edited (kinds.py neither: no code names it); the real CLI reads it, pairs it
    and judges it."""
    engine = copy / "accuscope" / "engine"
    shutil.copy(Path(__file__).parents[1] / "support" / "txtdir.py", engine / "sources" / "txtdir.py")
    registry = engine / "sides" / "registry.py"
    registry.write_text(registry.read_text().replace("FORMATS: list[Format] = [\n", (
        "def _txtdir() -> Reader:\n    from accuscope.engine.sources import txtdir\n    return txtdir\n\n\n"
        "FORMATS: list[Format] = [\n"
        '    Format("txtdir", "txtdir run pair (dev/, ref/)", lambda p: _txtdir().sniff(p), reader=_txtdir,\n'
        '           caps=Capabilities(both_sides=("dev", "ref"))),\n'), 1))
    dump = tmp_path / "dump"
    for side, relu in (("dev", "1 0 3 9"), ("ref", "1 0 3 0")):
        (dump / side).mkdir(parents=True)
        (dump / side / "conv1.0.txt").write_text("2 2\n1 2 3 4\n")
        (dump / side / "relu1.0.txt").write_text(f"4\n{relu}\n")

    r = in_copy(copy, "inspect", dump)
    assert r.returncode == 0 and "txtdir run dev: 2 tensors" in r.stdout, (r.stdout, r.stderr)
    r = in_copy(copy, "compare", "--npu", dump, "--golden", dump, "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == 1, (r.stdout, r.stderr)  # dev's relu1 is not ref's: its run against the other
    doc = json.loads((tmp_path / "t" / "task.json").read_text())
    assert doc["sides"] == {"npu": "txtdir", "golden": "txtdir"}
    assert (doc["npu_runner"], doc["golden_runner"]) == ("dev", "ref")
    assert "paired 2 of 2" in r.stdout
    rows = {row["NPUDump"]: row for row in csv.DictReader((tmp_path / "t" / doc["csv"]).open(newline=""))}
    assert (float(rows["conv1"]["MaxAbsoluteError"]), float(rows["relu1"]["MaxAbsoluteError"])) == (0, 9), rows


def test_a_model_format_declared_as_the_recipe_says(copy, tmp_path):
    """A made-up model format (tests/support/txtgraph.py: ops as text lines) added as the recipe says: its kind's
    name in kinds.py (its loader names its graphs' kind), its loader module, one Format entry naming the loader and
    declaring what its graphs are (a device graph here). Nothing else is edited: `inspect` loads it through the
    registry and shows it as the device graph it declares (fused ops, the fused framework ops column)."""
    engine = copy / "accuscope" / "engine"
    edit(engine / "sources" / "kinds.py", 'TFLITE: Final = "tflite"', 'TXTGRAPH: Final = "txtgraph"')
    shutil.copy(Path(__file__).parents[1] / "support" / "txtgraph.py", engine / "graphs" / "txtgraph.py")
    registry = engine / "sides" / "registry.py"
    registry.write_text(registry.read_text().replace("FORMATS: list[Format] = [\n", (
        "def _txtgraph() -> Loader:\n    from accuscope.engine.graphs.txtgraph import load_txtgraph\n"
        "    return load_txtgraph\n\n\n"
        "FORMATS: list[Format] = [\n"
        '    Format(kinds.TXTGRAPH, "txtgraph model (.tg text)", lambda p: p.endswith(".tg"), loader=_txtgraph,\n'
        "           model=ModelCapabilities(device_graph=True, converted=True)),\n"), 1))
    model = tmp_path / "net.tg"
    model.write_text("conv1 Conv x,w -> c\nrelu1 Relu c -> y\n")

    r = in_copy(copy, "inspect", model)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "TXTGRAPH model" in r.stdout and "nodes 2" in r.stdout and "fused ops 0" in r.stdout
    assert "fused framework ops" in r.stdout and "relu1" in r.stdout
    bad = tmp_path / "bad.tg"
    bad.write_text("conv1 Conv\n")
    r = in_copy(copy, "inspect", bad)
    assert r.returncode == 2 and "bad.tg: line 1" in r.stderr and "Traceback" not in r.stderr


def replace_once(path: Path, old: str, new: str) -> None:
    """One line changed as a recipe says (fails when `old` is not there exactly once)."""
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_a_comparison_option_added_as_the_recipe_says(copy, tmp_path):
    """`--label TEXT`, kept with the task: ONE field of CompareSpec declared with its option (compare/spec.py):
    `compare` takes it, task.json keeps it, the task re-runs with it."""
    edit(copy / "accuscope" / "engine" / "compare" / "spec.py", "dump.json records; no tensor file is read",
         '    label: str | None = option(None, "--label", "label", "a label kept with the task", form=False)')

    npu, golden = tmp_path / "npu", tmp_path / "golden"
    for side in (npu, golden):
        side.mkdir()
        np.save(side / "conv1.0.1700000000000000.npy", np.arange(8, dtype=np.float32))
    r = in_copy(copy, "compare", "--help")
    assert "--label" in r.stdout and "a label kept with the task" in r.stdout
    r = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--label", "fp16 try 3")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "t" / "task.json").read_text())["label"] == "fp16 try 3"
    again = run_accuscope_python(copy, "from accuscope.engine.tasks.task import load_task; import sys; "
                                       "print(load_task(sys.argv[1]).doc.spec().label)", tmp_path / "t")
    assert again.stdout.strip() == "fp16 try 3", again.stderr  # what `R` re-runs with


def test_a_metric_added_as_the_recipe_says(copy, tmp_path):
    """The mean squared error from the sums every pair already has (`sdd`): its value where the comparison
    fills the cells (metrics.py) and ONE Metric record (columns.py), with an msit-style default threshold.
    The CSV, `show`, the filter and the thresholds take it from there."""
    engine = copy / "accuscope" / "engine"
    replace_once(engine / "compare" / "metrics.py", '    v["rmse"] = math.sqrt(sdd / n)\n',
                 '    v["rmse"] = math.sqrt(sdd / n)\n    v["mse"] = sdd / n\n')
    replace_once(engine / "compare" / "columns.py", "METRIC_TABLE: tuple[Metric, ...] = (\n",
                 "METRIC_TABLE: tuple[Metric, ...] = (\n"
                 '    Metric("mse", "MeanSquaredError", "mean of (npu - golden) squared", origin="ours",\n'
                 "           msit_threshold=0.01, brief=True),\n")
    npu, golden = tmp_path / "npu", tmp_path / "golden"
    for side, shift in ((npu, 0.5), (golden, 0.0)):
        side.mkdir()
        np.save(side / "conv1.0.1700000000000000.npy", np.arange(8, dtype=np.float32))
        np.save(side / "relu1.0.1700000000000001.npy", np.arange(8, dtype=np.float32) + shift)
    r = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == 1, r.stdout + r.stderr  # relu1 is 0.5 off everywhere: mse 0.25 > 0.01
    csv = next((tmp_path / "t").glob("*.csv")).read_text().splitlines()
    assert "MeanSquaredError" in csv[0].split(",")
    shown = json.loads(in_copy(copy, "show", tmp_path / "t", "--format", "json").stdout)  # brief: a default column
    rows = [dict(zip(shown["columns"], row)) for row in shown["data"]]
    assert [(row["npu_op"], round(row["mse"], 6), row["fail"]) for row in rows] == [("conv1", 0.0, False),
                                                                                  ("relu1", 0.25, True)]
    where = run_accuscope_python(copy, "import sys; from accuscope.engine.tasks.task import load_task; "
                                       "t = load_task(sys.argv[1]).table; print(t.filter_mask('mse > 0.1').nonzero()[0].tolist())",
                                 tmp_path / "t")
    assert where.stdout.strip() == "[1]", where.stderr  # the filter language knows it
    loose = in_copy(copy, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t2",
                    "--threshold", "mse=1", "--threshold", "cos=0", "--threshold", "red=1", "--threshold", "mean_rel=1",
                    "--fail-on-error")
    assert loose.returncode == 0, loose.stdout + loose.stderr
