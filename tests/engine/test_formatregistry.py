"""The format registry's declarations hold: every dialect's reader is its kind's module, every
declared option is a keyword its reader takes, kind names are spelled once (sources/kinds.py)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from accuscope.engine.sides import registry
from accuscope.engine.sources import kinds
from support.narrow import present

SOURCES = Path(registry.__file__).resolve().parents[1] / "sources"


def test_every_format_kind_is_a_kinds_name_and_every_reader_its_module():
    names = {v for k, v in vars(kinds).items() if k.isupper()}
    assert [f.kind for f in registry.FORMATS] == list(dict.fromkeys(f.kind for f in registry.FORMATS))  # unique
    assert {f.kind for f in registry.FORMATS} == names
    for fmt in registry.FORMATS:
        if fmt.reader is not None:
            module = fmt.reader()
            assert module.KIND == fmt.kind
            assert all(callable(getattr(module, name)) for name in ("sniff", "read", "describe"))


def test_every_declared_option_is_a_keyword_of_its_readers_read_and_describe():
    for fmt in registry.FORMATS:
        assert not fmt.options or fmt.reader is not None, fmt.kind
        for option in fmt.options:
            module = present(fmt.reader)()
            assert option.name in inspect.signature(module.read).parameters, f"{fmt.kind}.read takes no {option.name}="
            described = inspect.signature(module.describe).parameters.values()
            assert any(p.name == option.name or p.kind is p.VAR_KEYWORD for p in described)


def test_reader_modules_spell_their_kind_through_kinds():
    for path in SOURCES.glob("*.py"):
        for line in path.read_text().splitlines():
            assert not re.match(r'KIND\s*=\s*"', line), f"{path.name}: {line}"


def test_every_dump_format_is_read_by_a_reader_module():
    for fmt in registry.DUMP_FORMATS:
        assert fmt.reader is not None, f"{fmt.kind}: a dump format without a Reader"


PACKAGE = SOURCES.parent.parent
DUMP_KIND = re.compile(r"kinds\.(" + "|".join(k for k, v in vars(kinds).items() if k.isupper()
                                               and v in {f.kind for f in registry.DUMP_FORMATS}) + r")\b")
# where code outside the readers and the registry names a dump format, and why that is about the format
# itself rather than a behaviour some other format could have (a behaviour is a Capabilities field (sides/capabilities.py))
NAMED = {
    ("commands/inspect.py", "NPY"): "an `accuscope dump` folder's record (dump.json): accuscope's own npy folder",
    ("commands/inspect.py", "MSPROBE"): "--shards merges the ranks of an msprobe run (compare/shards reads msprobe's layout)",
    ("engine/diagnose/rules/method.py", "MINDSPORE"): "which framework's msprobe pre-check (run_ut) the advice names",
    ("engine/tasks/taskrun.py", "NPY"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/tasks/taskrun.py", "PT"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/demo/workspace.py", "NPY"): "msaccucmp's CSV form for a golden npy folder (golden_is_npy)",
    ("engine/compare/mapping.py", "ASCEND"): "a bare NpuDump given as a side: its kind's name",
    ("engine/tasks/task.py", "MSPROBE"): "--shards merges the ranks of an msprobe run (its modules: the merged tree)",
    # a behaviour (pairs_calls), left named: the task screen decides it at its first frame, before which the app
    # imports no reader (tests/cli/test_startup.py); the registry's capabilities would bring them
    ("app/taskscreen.py", "MSPROBE"): "the pair keys of a task of two msprobe dumps (see above)",
}
IMPORTED = re.compile(r"kinds import ([\w, ]+)")


def test_a_behaviour_is_read_from_capabilities_not_from_a_dump_formats_name():
    found = set()
    for path in PACKAGE.rglob("*.py"):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("engine/sources/") or where == "engine/sides/registry.py":
            continue
        text = path.read_text()
        found |= {(where, m.group(1)) for m in DUMP_KIND.finditer(text)}
        found |= {(where, name.strip()) for m in IMPORTED.finditer(text) for name in m.group(1).split(",")
                  if DUMP_KIND.fullmatch(f"kinds.{name.strip()}")}
    assert found <= set(NAMED), f"decided by a format's name, not its capabilities: {sorted(found - set(NAMED))}"
