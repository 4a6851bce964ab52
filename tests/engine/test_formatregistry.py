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
