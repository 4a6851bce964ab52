"""`accuscope` starts without importing what the command given does not need: `import accuscope.cli`
loads no engine and no numpy, and a command imports its own module only, while `accuscope --help`
and `accuscope COMMAND --help` stay complete."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
from test_cli import ENV, accuscope

from accuscope.commands import COMMANDS
from accuscope.engine.compare.inputs import INPUTS


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
               "accuscope.engine.compare.cluster", "accuscope.engine.diagnose")


def test_comparing_two_npy_folders_imports_only_what_they_need(tmp_path):
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
        for i, name in enumerate(("conv1", "relu1")):
            np.save(tmp_path / side / f"{name}.0.{1700000000000000 + i}.npy", np.ones((2, 3), np.float32))
    args = ["compare", "--npu", str(tmp_path / "npu"), "--golden", str(tmp_path / "golden"), "--out", str(tmp_path / "t")]
    loaded = loaded_after(f"from accuscope.cli import main; main({args!r})")
    assert "accuscope.engine.compare.metrics" in loaded and (tmp_path / "t" / "task.json").is_file()
    assert not {m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_NPY)}


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
    assert all(item.flag in compare for item in INPUTS)
    inspect = accuscope("inspect", "--help").stdout
    assert all(flag in inspect for flag in ("--limit", "--pick", "--shape", "--stats-only"))


def test_an_unknown_command_names_the_choices():
    r = accuscope("inpsect", "x")
    assert r.returncode == 2 and "invalid choice: 'inpsect'" in r.stderr and "inspect" in r.stderr
