"""tpu-mlir's `.mlir` text, line by line: what both of its readers take from an op line (graphs.mlirgraph,
the model; sources.tpumlir, the names and types of an npz's tensors).

An op line ends in its loc: `loc(#loc4)` (a definition in the loc table at the end of the file,
`#loc4 = loc("name")`), `loc("name")` (a call-site tail `("file":1:2)` ignored) or `loc(fused[a, b])`
(one name per result: quoted names or `#locN` references, nested at most four deep); its result
types follow the last `->` (`tensor<1x64x56x56xbf16>`, a group in parentheses).

Every reading here costs time in proportion to the line (issue 43: a regular expression that may try
a long run once from each of its starts hangs on one crafted line): a pattern runs at one start (a
`match` at a position found by `str.find`), with no two quantifiers that can share a character, or a
loop over tokens (`str.find`, a token pattern matched once at each token). `benchmarks/parser_growth.py`
measures each against the input that hurt the patterns before it (3 MB of `loc(fused[`: minutes before,
now 0.1 s). A loc table whose `#locN` references expand to more names than the file has characters
(references to references, each many times over) is refused.
"""
from __future__ import annotations

import re

from accuscope.engine.sources.tensor import SourceError

# `#locN = loc(...)`: one start (match), `(.*)` then `\)\s*$` gives back at most the line once
_LOC_DEF = re.compile(r'^\s*(#loc\d*)\s*=\s*loc\((.*)\)\s*$')
_REF = re.compile(r"#loc\d*")
# a quoted name, matched at its opening quote: the first unescaped quote closes it (possessive: no
# second way to split the body); DOTALL: an escaped newline is an escape, as anywhere else
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*+)"', re.DOTALL)
# `"name"` or `"name"("file":1:2)`: the whole of an inline loc's content
_NAME_LOC = re.compile(r'"(?:[^"\\]|\\.)*+"(?:\([^)]*+\))?', re.DOTALL)
# what a loc's parentheses are counted over: strings (an unterminated one to the end) and parentheses
_PAREN_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+"?|[()]', re.DOTALL)
_UNIFORM = re.compile(r"uniform<(\w+)")  # a quantized type's storage type
_ITEM = re.compile(r'"|#loc\d+')  # where an element of fused[...] may start
FUSED_DEPTH = 4  # `#locN` references followed inside fused[...]
MAX_DIMS = 64  # numpy's (and the npy reader's) limit
_INT64_DIGITS = 19  # a dimension is an int64: 2**63 - 1 has 19 digits
MLIR_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "si8": "int8", "i8": "int8", "ui8": "uint8",
               "si16": "int16", "i16": "int16", "ui16": "uint16", "si32": "int32", "i32": "int32",
               "ui32": "uint32", "i64": "int64", "si64": "int64", "f64": "float64", "i1": "bool"}


def loc_definition(line: str) -> tuple[str, str] | None:
    """`#loc4 = loc("name")` -> ("#loc4", '"name"'); None for any other line."""
    d = _LOC_DEF.match(line)
    return (d.group(1), d.group(2)) if d else None


def loc_use(line: str) -> str | None:
    """The loc an op line ends in, without `loc(` and `)`: `#loc4`, `"name"`, `"name"("file":1:2)` or
    `fused[...]`; None when the line ends in none of these."""
    s = line.rstrip()
    if not s.endswith(")"):
        return None
    start = s.rfind("loc(")
    if start >= 0 and _REF.fullmatch(s, start + 4, len(s) - 1):  # `loc(#loc4)`: nearly every op line
        return s[start + 4:-1]
    start = _opening(s)
    if start < 4 or s[start - 4:start] != "loc(":
        return None
    inner = s[start:-1]
    if inner.startswith("fused[") and inner.endswith("]") or _NAME_LOC.fullmatch(inner):
        return inner
    return None


def _opening(s: str) -> int:
    """Where the text opened by the parenthesis that ends `s` starts (after that `(`); -1 when none
    opens it. Parentheses inside quoted strings do not count."""
    opened: list[int] = []
    last = len(s) - 1
    for m in _PAREN_TOKEN.finditer(s):
        token = m.group()
        if token == "(":
            opened.append(m.end())
        elif token == ")":
            if m.start() == last:
                return opened[-1] if opened else -1
            if opened:
                opened.pop()
    return -1


def tensor_types(text: str) -> list[str]:
    """What each `tensor<...>` of `text` holds, in order (`1x64xbf16`, `1x4x!quant.uniform<i8:f32, 0.05:0`:
    up to the first `>`)."""
    out: list[str] = []
    at = text.find("tensor<")
    while at >= 0:
        end = text.find(">", at + 7)
        if end < 0:  # no later type closes either
            break
        out.append(text[at + 7:end])
        at = text.find("tensor<", end + 1)
    return out


def tensor_type(text: str) -> tuple[str, tuple[int, ...] | None]:
    """`1x64x56x56xbf16` (a quantized type `!quant.uniform<i8:f32, ...>` counts by its storage) ->
    ("bfloat16", (1, 64, 56, 56)); no shape where a dimension is not a number (`?`). ValueError for a
    shape no tensor has (a dimension beyond int64, over 64 dimensions), saying which."""
    if not text:
        return "", None
    parts = text.split(",")[0].split("x")
    elem = parts[-1].strip()
    q = _UNIFORM.search(text)
    if q:
        elem = q.group(1)
        parts = text.split("!")[0].rstrip("x").split("x") + ["_"]
    dtype = MLIR_DTYPES.get(elem, elem)
    dims = [p.strip() for p in parts[:-1]]
    if not all(p.isascii() and p.isdigit() for p in dims):
        return dtype, None
    if len(dims) > MAX_DIMS:
        raise ValueError(f"a tensor of {len(dims)} dimensions (at most {MAX_DIMS})")
    digits = [p.lstrip("0") or "0" for p in dims]  # int() refuses over 4300 digits, leading zeros too
    for p in digits:
        if len(p) > _INT64_DIGITS or int(p) >= 1 << 63:
            shown = p if len(p) <= 24 else f"{p[:12]}...{p[-4:]} ({len(p)} digits)"
            raise ValueError(f"dimension {shown} is beyond int64")
    return dtype, tuple(map(int, digits))


class LocTable:
    """The loc table of one `.mlir` file (`#locN = loc(...)`: `read` every line of the file) and the
    names each loc stands for (`names`). The references followed for all the file's ops together
    stop at as many as the file has characters (a table of `fused[#loc2, #loc2, ...]` over
    `fused[#loc3, #loc3, ...]` names exponentially many tensors in a few lines)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.defs: dict[str, str] = {}
        self.size = 0  # characters read
        self._spent = 0  # locs and names looked at

    def read(self, line: str) -> bool:
        """Take one line of the file: True when it is a loc definition (kept), False for any other."""
        self.size += len(line)
        d = loc_definition(line)
        if d:
            self.defs[d[0]] = d[1]
        return d is not None

    def names(self, ref: str) -> list[str] | None:
        """The names a loc stands for: `"name"` (a call-site tail ignored), `#locN` looked up,
        `fused[a, b]` one name per result; None when a `#locN` has no definition."""
        return self._names(ref, 0)

    def _names(self, ref: str, depth: int) -> list[str] | None:
        self._spent += 1
        if self._spent > self.size:
            raise SourceError(f"{self.path}: its loc table names more tensors than the file has characters "
                              f"({self.size}): fused locs referring to each other over and over")
        if ref.startswith("#"):
            if ref not in self.defs:
                return None
            ref = self.defs[ref]
        if not ref.startswith("fused"):
            quote = ref.find('"')
            first = _QUOTED.match(ref, quote) if quote >= 0 else None  # the first quote fails: every later one does
            return [first.group(1)] if first else []
        names: list[str] = []
        for name, nested in _fused_items(ref[ref.find("[") + 1:]):
            if name is not None:
                names.append(name)
                self._spent += 1
            elif depth < FUSED_DEPTH:
                names += self._names(nested, depth + 1) or []
        return names


def _fused_items(text: str):
    """The elements of `fused[...]` in order: (name, None) for `"name"` (a call-site tail `(...)` passed
    over), (None, ref) for `#locN`. A string that does not close, or a `(` no `)` closes, is looked
    for once: none after it closes either."""
    pos, strings, tails = 0, True, True
    while True:
        m = _ITEM.search(text, pos)
        if m is None:
            return
        if m.group() != '"':
            yield None, m.group()
            pos = m.end()
            continue
        q = _QUOTED.match(text, m.start()) if strings else None
        if q is None:
            strings, pos = False, m.end()
            continue
        pos = q.end()
        if tails and text.startswith("(", pos):
            close = text.find(")", pos)
            if close < 0:
                tails = False
            else:
                pos = close + 1
        yield q.group(1), None
