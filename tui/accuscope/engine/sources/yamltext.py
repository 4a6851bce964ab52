"""The YAML that mapping and layout files hold, parsed without a YAML library: block mappings nested by
indentation, block lists, flow lists, quoted and plain scalars, comments (msprobe's mapping files,
accuscope's own, a --shards layout). Anything else is a SourceError naming the line: nesting deeper than
DEPTH (a thousand indentation levels took the interpreter's stack), and what this subset does not read and a
YAML library would (an anchor, an alias, a tag, a block scalar: read as plain text, they would be names no dump
holds)."""
from __future__ import annotations

import re

from accuscope.engine.sources.tensor import SourceError

DEPTH = 64  # nesting levels read (blocks and flow lists): msprobe's API mapping, the deepest, uses four
_KEY, _INT = re.compile(r"(.+?):(?:\s+(.*)|$)"), re.compile(r"-?\d+")
_INDICATOR = re.compile(r"[&*!|>%@`]")  # what a plain scalar cannot start with in YAML: anchors, aliases, tags, ...
_WHAT = {"&": "an anchor", "*": "an alias", "!": "a tag", "|": "a block scalar", ">": "a block scalar",
         "%": "a directive", "@": "a reserved character", "`": "a reserved character"}


def yaml_load(text: str, path: str = "") -> object:
    """Block mappings nested by indentation, block lists (`- key: value` items), flow lists `[0, 1]`,
    quoted and plain scalars, comments: what msprobe's and accuscope's mapping files hold (no anchors,
    tags or multi-line scalars, at most DEPTH levels; anything else a SourceError naming the line)."""
    lines = []
    for k, raw in enumerate(text.splitlines(), 1):
        line = _uncomment(raw).rstrip()
        if line.strip() and line.strip() != "---":
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise SourceError(f"{path}:{k}: a tab in the indentation (YAML indents with spaces)")
            lines.append((k, len(line) - len(line.lstrip()), line.strip()))
    if not lines:
        return {}
    value, end = _block(lines, 0, lines[0][1], path, 1)
    if end != len(lines):
        raise SourceError(f"{path}:{lines[end][0]}: unexpected indentation")
    return value


def _uncomment(line: str) -> str:
    if "#" not in line:  # most lines: no walk over their characters (4 of a flat mapping's 13 us a line)
        return line
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _block(lines, i: int, indent: int, path: str, depth: int):
    if depth > DEPTH:
        raise SourceError(f"{path}:{lines[i][0]}: nested more than {DEPTH} levels deep (a mapping or layout file "
                          "nests a few)")
    if lines[i][2].startswith("- ") or lines[i][2] == "-":
        items = []
        while i < len(lines) and lines[i][1] == indent and (lines[i][2].startswith("- ") or lines[i][2] == "-"):
            k, _, text = lines[i]
            rest = text[1:].strip()
            if not rest:
                value, i = _block(lines, i + 1, lines[i + 1][1], path, depth + 1) \
                    if i + 1 < len(lines) and lines[i + 1][1] > indent else (None, i + 1)
            elif _key(rest, path, k) is not None:  # `- key: value` opens a mapping at the item's column
                lines[i] = (k, indent + 2, rest)
                value, i = _block(lines, i, indent + 2, path, depth + 1)
            else:
                value, i = _scalar(rest, path, k), i + 1
            items.append(value)
        return items, i
    found: dict = {}
    while i < len(lines) and lines[i][1] == indent:
        k, _, text = lines[i]
        split = _key(text, path, k)
        if split is None:
            raise SourceError(f"{path}:{k}: expected `key: value`, got {text[:80]!r}")
        key, rest = split
        if rest:
            found[key], i = _scalar(rest, path, k), i + 1
        elif i + 1 < len(lines) and lines[i + 1][1] > indent:
            found[key], i = _block(lines, i + 1, lines[i + 1][1], path, depth + 1)
        elif i + 1 < len(lines) and lines[i + 1][1] == indent and lines[i + 1][2].startswith("- "):
            found[key], i = _block(lines, i + 1, indent, path, depth + 1)  # a list at its key's column
        else:
            found[key], i = None, i + 1
    return found, i


def _key(text: str, path: str, line: int) -> tuple[str, str] | None:
    if text[:1] in "'\"":
        end = text.find(text[0], 1)
        if end > 0 and text[end + 1: end + 2] == ":":
            return text[1:end], text[end + 2:].strip()
        return None
    m = _KEY.match(text)
    if m is None:
        return None
    _plain(m.group(1), path, line)
    return m.group(1).strip(), (m.group(2) or "").strip()


def _plain(text: str, path: str, line: int) -> None:
    """SourceError when `text`, a plain (unquoted) scalar, starts as YAML's anchors, aliases, tags and block
    scalars do: a YAML library would not read it as this text."""
    if _INDICATOR.match(text):
        raise SourceError(f"{path}:{line}: {_WHAT[text[0]]} ({text[:40]!r}): not read in a mapping or layout file "
                          "(quote the name if it is one)")


def _scalar(text: str, path: str, line: int, depth: int = 0):
    if text[:1] in "'\"" and text[-1:] == text[:1] and len(text) > 1:
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        if depth >= DEPTH:
            raise SourceError(f"{path}:{line}: a list nested more than {DEPTH} levels deep")
        return [_scalar(p.strip(), path, line, depth + 1) for p in text[1:-1].split(",") if p.strip()]
    if text in ("null", "~"):
        return None
    if _INT.fullmatch(text):
        return int(text)
    _plain(text, path, line)
    return text
