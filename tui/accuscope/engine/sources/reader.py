"""What a dump-format reader module is (`Reader`): the shape `sides.registry` holds every dump format's
reader to (npyfolder, ptfolder, npzfile, rawfile, polygraphy, npudump, msprobe, mindspore, atb, tpumlir,
rknn), checked by mypy where the registry names the module.

A reader is a module, not a class: `sniff(path)` (a bounded look at the
content, never an exception), `read(path, **options)` (the tensors in execution order and the problems
found, `SourceError` when nothing is usable) and `describe(path, tensors, **options)` (the lines it
adds to `inspect`). Both are given the format's options and the side's selectors the user set
(`registry.reader_keywords`), so both take `**_options` for those they do not use. The options a user can set are declared beside the format in the registry
(`registry.Option`), by the keyword `read` takes them as; what the format does that the rest of the
code asks about (a training step's calls, one file holding both sides ...), as its `sides.capabilities.Capabilities`,
declared on its `registry.Format`, as is its kind (`Format.kind`: the registry gives its sources that
kind); a reader whose kind code compares against names it too, `KIND = kinds.X` (tests/engine/test_formatregistry.py
holds it to its entry's).
"""
from __future__ import annotations

from typing import Any, Protocol

from accuscope.engine.sources.tensor import Problem, Tensor


class Reader(Protocol):
    def sniff(self, path: str) -> bool: ...

    def read(self, path: str, **options: Any) -> tuple[list[Tensor], list[Problem]]: ...

    def describe(self, path: str, tensors: list[Tensor], **options: Any) -> list[str]: ...
