"""`accuscope` starts without importing what the command given does not need: `import accuscope.cli`
loads no engine and no numpy, and a command imports its own module only, while `accuscope --help`
and `accuscope COMMAND --help` stay complete."""
from __future__ import annotations

import subprocess
import sys

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
