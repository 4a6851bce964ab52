"""Protobuf's text format, parsed without protobuf (its own parser needs the .proto compiled in): one
tokenizer and parser for every text-format file accuscope reads, a Caffe prototxt (caffegraph) and GE's
graph dumps (gegraph).

The tokenizer is iterative: the text in chunks cut at line ends (no token spans lines), one token per
match with the leading spaces absorbed, every position but trailing blanks (cut off each chunk) the
start of a token, so none is tried twice; a string that does not close on its line is one `bad`
token (tried from each of its quotes, it cost the rest of the line each time: a 1 MB line of `\\"`,
minutes; `\\d+\\.?\\d*` with a look-ahead after it split 200,000 digits each possible way, issue 43).
The parser is a state machine with an explicit stack (no recursion), nesting bounded by the caller's
`max_depth`; nothing is executed. benchmarks/parser_growth.py measures both on the inputs that hurt them.

Values: numbers (decimal, hexadecimal, an `f` suffix, inf and nan), identifiers (true/t/false/f as
bools, inf/infinity/nan as floats, an enum name as its text), strings (C escapes; octal and hex escapes
are bytes of UTF-8 text; adjacent strings concatenate), messages `{...}` or `<...>` (`name {` or
`name: {`), and `[...]` lists of values or messages. A message is read as `Msg` (its fields in file
order: caffegraph) or, with `grouped`, a {field: [values]} dict (gegraph).
"""
from __future__ import annotations

import re
from typing import Any, NoReturn

_TOKEN = re.compile(r"""\s*(?:
    (\#[^\n]*)
  | ("(?:[^"\\\n]|\\.)*+"|'(?:[^'\\\n]|\\.)*+')
  | ([-+]?0[xX][0-9a-fA-F]++|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?|-(?:inf|nan|infinity)\b)
  | ([A-Za-z_][\w.]*)
  | ([{}<>:\[\],;])
  | ("(?:[^"\\\n]|\\.)*+|'(?:[^'\\\n]|\\.)*+|\S))""", re.VERBOSE)
_CHUNK = 1 << 20  # text tokenized this many characters at a time (cut at a line end: no token spans lines)
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.DOTALL)
_SIMPLE = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}
_CLOSE = {"{": "}", "<": ">"}
_WORDS: dict[str, Any] = {"true": True, "t": True, "false": False, "f": False, "inf": float("inf"),
                          "infinity": float("inf"), "nan": float("nan")}

# parser states: a field's name expected, a name read, a value after ':', a string read (another may follow),
# inside a [...] list
_FIELD, _NAMED, _VALUE, _STRING, _LIST = range(5)


class TextFormatError(ValueError):
    """Text that is not protobuf text format: the line and what is wrong there."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line, self.message = line, message

    def __reduce__(self):  # pickled as it was made (a SourceError's cause crosses a process boundary)
        return (TextFormatError, (self.line, self.message))


class Msg(list):
    """A text-format message: (key, value) pairs in file order; repeated keys stay separate."""

    def all(self, key: str) -> list:
        return [v for k, v in self if k == key]

    def get(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self if k == key), default)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dicts; a key given several times becomes a list."""
        out: dict[str, Any] = {}
        for k, v in self:
            v = v.to_dict() if isinstance(v, Msg) else v
            if k in out:
                out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + [v]
            else:
                out[k] = v
        return out


def _chunks(text: str):
    """(text, first line number) pieces of about `_CHUNK` characters, cut after a newline, without
    their trailing blanks (where `_TOKEN` finds no token)."""
    start, line = 0, 1
    while start < len(text):
        end = text.find("\n", start + _CHUNK)
        end = len(text) if end < 0 else end + 1
        yield text[start:end].rstrip(), line
        line += text.count("\n", start, end)
        start = end


def _fail(chunk: str, first_line: int, token_index: int, message: str) -> NoReturn:
    """TextFormatError naming the line of the `token_index`-th token of `chunk`."""
    offset = 0
    for k, m in enumerate(_TOKEN.finditer(chunk)):
        offset = m.end()
        if k == token_index:
            break
    raise TextFormatError(first_line + chunk.count("\n", 0, offset), message)


def parse(text: str, max_depth: int, grouped: bool = False) -> Any:
    """The message `text` holds: a `Msg`, or with `grouped` a {field: [values]} dict (nested messages alike).
    TextFormatError naming the line where it is not text format or nests deeper than `max_depth`."""
    root: Any = {} if grouped else Msg()
    # (message, the token closing it, the state and field name after it: a message in a [...] list goes on there)
    stack: list[tuple[Any, str, int, str]] = [(root, "", _FIELD, "")]
    message, closer = root, ""
    state, name = _FIELD, ""

    def add(value: Any) -> None:
        if grouped:
            message.setdefault(name, []).append(value)
        else:
            message.append((name, value))

    def value_of(chunk: str, first_line: int, k: int, string: str, number: str, ident: str) -> Any:
        try:
            return unquote(string) if string else scalar(number, ident)
        except ValueError as exc:  # a bad escape; an integer of more digits than int() takes
            _fail(chunk, first_line, k, f"bad escape in string ({exc})" if string else
                  f"a number of {len(number):,} digits")

    for chunk, first_line in _chunks(text):
        for k, (comment, string, number, ident, punct, bad) in enumerate(_TOKEN.findall(chunk)):
            if comment:
                continue
            if bad:
                _fail(chunk, first_line, k, "a string not closed on its line" if len(bad) > 1
                      else f"unexpected character {bad!r}")
            if state == _STRING:
                if string:  # adjacent strings concatenate
                    more = value_of(chunk, first_line, k, string, number, ident)
                    if grouped:
                        message[name][-1] += more
                    else:
                        message[-1] = (name, message[-1][1] + more)
                    continue
                state = _FIELD
            if state == _FIELD:
                if ident:
                    name, state = ident, _NAMED
                elif punct and punct == closer:
                    _, _, state, name = stack.pop()
                    message, closer = stack[-1][:2]
                elif punct not in (",", ";"):
                    _fail(chunk, first_line, k, f"expected a field name, found {string or number or punct!r}")
                continue
            if state == _NAMED and punct == ":":
                state = _VALUE
                continue
            if punct in _CLOSE and state in (_NAMED, _VALUE, _LIST):
                if len(stack) >= max_depth:
                    _fail(chunk, first_line, k, f"messages nested deeper than {max_depth}")
                child: Any = {} if grouped else Msg()
                add(child)
                stack.append((child, _CLOSE[punct], _LIST if state == _LIST else _FIELD, name))
                message, closer = child, _CLOSE[punct]
                state = _FIELD
            elif state == _NAMED:
                _fail(chunk, first_line, k, f"expected ':' or '{{' after {name!r}")
            elif state == _VALUE and punct == "[":
                if grouped:
                    message.setdefault(name, [])
                state = _LIST
            elif state == _LIST and punct in ("]", ","):
                state = _FIELD if punct == "]" else _LIST
            elif punct:
                _fail(chunk, first_line, k, f"expected a value for {name!r}, found {punct!r}")
            else:
                add(value_of(chunk, first_line, k, string, number, ident))
                if state == _VALUE:
                    state = _STRING if string else _FIELD
    if state not in (_FIELD, _STRING) or len(stack) > 1:
        missing = repr(closer) if len(stack) > 1 else "a value"
        last = text.count("\n", 0, len(text.rstrip())) + 1
        raise TextFormatError(last, f"end of file inside a message (missing {missing})")
    return root


def scalar(number: str, ident: str) -> Any:
    """A number's or an identifier's value: int, float, bool, or an enum value's name."""
    if number:
        if number[:3].lstrip("+-")[:2] in ("0x", "0X"):
            return int(number, 16)
        text = number[:-1] if number[-1] in "fF" and (number[-2:-1].isdigit() or number[-2:-1] == ".") else number
        return int(text) if text.lstrip("+-").isdigit() else float(text)
    return _WORDS.get(ident.lower(), ident)  # an enum value name, e.g. DT_FLOAT, as it is


def unquote(token: str) -> str:
    """A quoted string's text: C escapes resolved; octal/hex escapes are bytes of UTF-8 text. ValueError for
    `\\x`, `\\u` or `\\U` without their hex digits."""
    body = token[1:-1]
    if "\\" not in body:
        return body
    out, last = [], 0
    for m in _ESCAPE.finditer(body):
        out.append(body[last:m.start()].encode("utf-8"))
        last = m.end()
        octal, hex2, u4, u8, simple = m.groups()
        if octal:
            out.append(bytes([int(octal, 8) & 0xFF]))
        elif hex2:
            out.append(bytes([int(hex2, 16)]))
        elif u4 or u8:
            code = int(u4 or u8, 16)
            out.append(chr(code).encode("utf-8", errors="replace") if code <= 0x10FFFF else b"?")
        elif simple in ("x", "u", "U"):
            raise ValueError(f"\\{simple} without its hex digits")
        else:
            out.append(_SIMPLE.get(simple, simple.encode("utf-8")))
    out.append(body[last:].encode("utf-8"))
    return b"".join(out).decode("utf-8", errors="replace")
