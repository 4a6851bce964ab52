"""Polygraphy RunResults JSON (`polygraphy run --save-outputs`, `RunResults.save`), read as a stream.

One file, or a folder of per-iteration files (`--save-outputs DIR` without an extension, Polygraphy >= 0.53:
`0000000000.json`, ... each a RunResults holding that iteration of every runner).

Layout: `{"lst": [[runner_name, [IterationResult, ...]], ...], "polygraphy_class": "RunResults"}`; an
IterationResult is `{"outputs": {name: array, ...}, "runtime": s, "runner_name": s, "polygraphy_class":
"IterationResult"}`; an array is `{"array": BASE64_OF_NPY_BYTES, "polygraphy_class": "ndarray"}`, usually
wrapped as `{"values": array, "polygraphy_class": "LazyArray"}` ("LazyNumpyArray" before 0.47). Versions
before the `polygraphy_class` marker tag each object with `"__polygraphy_encoded_<Class>":
"polygraphy_serialized_json_type"`, and the oldest store npy (or npz) bytes as latin-1 text instead of base64.

The file is read once for its structure: each array's text is only located (file offset and length) and
decoded by `Tensor.load()`, chunk by chunk straight into the array. Base64 npy text is not even read at
open: its length follows from the npy header, so the scan seeks past it. Memory stays near the largest
tensor whatever the file's size, and opening a file of several GB reads a few KB per tensor. The RunResults marker is the file's last key, so detection
(`is_run_results`) reads the head and the tail, never a fixed prefix.
"""
from __future__ import annotations

import binascii
import io
import json
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import IO, cast

import numpy as np
from numpy.lib import format as npformat

from accuscope.engine.sources import kinds
from accuscope.engine.sources.npyfile import nd_tensor, npy_header, npy_tensor
from accuscope.engine.sources.tensor import Problem, SourceError, Tensor

_simd_b64decode: Callable[..., bytes] | None
try:  # SIMD base64 (~20x binascii on the same core) when installed; binascii otherwise
    from pybase64 import b64decode as _simd_b64decode
except ImportError:  # pragma: no cover - depends on the environment
    _simd_b64decode = None

CHUNK = 1 << 22  # bytes read at a time through long text, scanning or decoding (a multiple of 4)
_STRUCTURE = 1 << 16  # bytes read at a time between arrays (JSON structure, npy headers)
_B64_HEAD = 16384  # base64 chars decoded to parse an npy header: 12 KiB covers numpy's 10000-byte limit
_INLINE = 1 << 20  # longer strings are located, not kept (keys and names are far shorter)
_PAYLOAD_KEYS = ("array", "tensor")  # strings under these keys are always located, never kept
_MAX_DEPTH = 64
_LAZY = ("LazyArray", "LazyNumpyArray")
_LEGACY_PREFIX = "__polygraphy_encoded_"
_LEGACY_MARKER = "polygraphy_serialized_json_type"
_B64_NPY = b"k05VTVBZ"  # base64 of numpy's magic b"\x93NUMPY"

_WS = re.compile(rb"[ \t\n\r]*")
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|-?Infinity")
_ITERATION_FILE = re.compile(r"[0-9]+\.json", re.IGNORECASE)
_HEAD = re.compile(rb'\s*\{\s*(?:"lst"\s*:\s*\[\s*(?:\]|\[\s*")'  # how Polygraphy's files begin
                   rb'|"polygraphy_class"\s*:\s*"RunResults"|"__polygraphy_encoded_RunResults")')  # marker first
_TAIL = re.compile(rb'"(?:polygraphy_class"\s*:\s*"RunResults|__polygraphy_encoded_RunResults"\s*:\s*"'
                   rb'polygraphy_serialized_json_type)"\s*\}\s*$')


@dataclass(frozen=True)
class _Span:
    """Where a JSON string's raw text lies in the file (between the quotes)."""

    offset: int
    length: int


class _Truncated(ValueError):
    pass


class _Scanner:
    """JSON values from a binary file, read in chunks; long strings become `_Span`s."""

    def __init__(self, fh: IO[bytes]):
        self.fh = fh
        self.buf = b""
        self.base = 0  # file offset of buf[0]
        self.pos = 0  # index in buf of the next unread byte
        self.where: list[str] = []  # JSON path to the value being read, for messages

    # --- buffer --------------------------------------------------------------------------------
    def _more(self, keep: int, size: int = 0) -> bool:
        """Read the next `size` bytes (default _STRUCTURE), dropping what lies before file offset `keep`."""
        data = self.fh.read(size or _STRUCTURE)
        if not data:
            return False
        drop = keep - self.base
        self.buf = self.buf[drop:] + data
        self.base = keep
        self.pos -= drop
        return True

    def _at(self) -> str:
        return f"byte {self.base + self.pos:,}" + (f" (in {''.join(self.where)})" if self.where else "")

    def _fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at {self._at()}")

    def _peek(self) -> bytes:
        """The next non-blank byte, not consumed."""
        while True:
            self.pos = cast("re.Match[bytes]", _WS.match(self.buf, self.pos)).end()  # matches anywhere
            if self.pos < len(self.buf):
                return self.buf[self.pos:self.pos + 1]
            if not self._more(self.base + self.pos):
                raise _Truncated(f"the file ends at byte {self.base + self.pos:,}"
                                 + (f" inside {''.join(self.where)}" if self.where else ""))

    def _expect(self, char: bytes) -> None:
        if self._peek() != char:
            raise self._fail(f"expected {char.decode()!r}")
        self.pos += 1

    # --- values --------------------------------------------------------------------------------
    def value(self, locate: bool = False):
        char = self._peek()
        if char == b"{":
            return self._object()
        if char == b"[":
            return self._array()
        if char == b'"':
            self.pos += 1
            return self._string(locate)
        return self._scalar()

    def _object(self) -> dict:
        self.pos += 1
        out: dict = {}
        if self._peek() == b"}":
            self.pos += 1
            return out
        if len(self.where) >= _MAX_DEPTH:
            raise self._fail("nested too deep")
        self.where.append("")
        while True:
            if self._peek() != b'"':
                raise self._fail("expected a key")
            self.pos += 1
            key = self._string(False)
            if isinstance(key, _Span):
                raise self._fail("key too long")
            self.where[-1] = f".{key}"
            self._expect(b":")
            out[key] = self.value(key in _PAYLOAD_KEYS)
            char = self._peek()
            self.pos += 1
            if char == b"}":
                self.where.pop()
                return out
            if char != b",":
                self.pos -= 1
                raise self._fail("expected ',' or '}'")

    def _array(self) -> list:
        self.pos += 1
        out: list = []
        if self._peek() == b"]":
            self.pos += 1
            return out
        if len(self.where) >= _MAX_DEPTH:
            raise self._fail("nested too deep")
        self.where.append("")
        while True:
            self.where[-1] = f"[{len(out)}]"
            out.append(self.value())
            char = self._peek()
            self.pos += 1
            if char == b"]":
                self.where.pop()
                return out
            if char != b",":
                self.pos -= 1
                raise self._fail("expected ',' or ']'")

    def _jump_npy(self) -> _Span | None:
        """A base64 npy string's length follows from its npy header: seek past it rather than read it.

        None (the caller scans instead) unless the closing quote is exactly where the header says.
        """
        start = self.base + self.pos
        while len(self.buf) - self.pos < _B64_HEAD and self._more(self.base + self.pos):
            pass
        head = self.buf[self.pos:self.pos + _B64_HEAD]
        if not head.startswith(_B64_NPY):
            return None
        try:
            npy = npy_header(_b64_head(head), 1 << 62)
        except (ValueError, EOFError, binascii.Error):
            return None
        length = -(-(npy.offset + npy.nbytes) // 3) * 4
        end = start + length
        if end < self.base + len(self.buf):
            if self.buf[end - self.base:end - self.base + 1] != b'"':
                return None
            self.pos = end - self.base + 1
        else:
            resume = self.fh.tell()
            self.fh.seek(end)
            if self.fh.read(1) != b'"':
                self.fh.seek(resume)
                return None
            self.buf, self.base, self.pos = b"", end + 1, 0
        return _Span(start, length)

    def _string(self, locate: bool):
        """After the opening quote: the string, or its `_Span` when `locate` or longer than _INLINE."""
        if locate:
            span = self._jump_npy()
            if span is not None:
                return span
        start = self.base + self.pos
        i = self.pos
        escaped = False
        while True:
            quote = self.buf.find(b'"', i)
            stop = quote if quote >= 0 else len(self.buf)
            backslash = self.buf.find(b"\\", i, stop)  # base64 has none: two memchr passes, no byte loop
            if backslash >= 0:
                escaped = True
                if backslash + 1 < len(self.buf):
                    i = backslash + 2
                    continue
                i = backslash  # the escaped byte is in the next chunk
            elif quote >= 0:
                break
            else:
                i = len(self.buf)
            here = self.base + i
            keep = start if not locate and here - start <= _INLINE else here  # long: keep nothing scanned
            if not self._more(keep, CHUNK):
                self.pos = i
                raise _Truncated(f"the file ends at byte {self.base + i:,} inside a string"
                                 + (f" ({''.join(self.where)})" if self.where else ""))
            i = here - self.base
        end = self.base + quote
        in_buf = start >= self.base
        raw = self.buf[start - self.base:quote] if in_buf and not locate and end - start <= _INLINE else None
        self.pos = quote + 1
        if raw is None:
            return _Span(start, end - start)
        try:
            return json.loads(b'"' + raw + b'"') if escaped else raw.decode("utf-8")
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"bad string at byte {start:,}: {exc}") from None

    def _scalar(self):
        while len(self.buf) - self.pos < 64 and self._more(self.base + self.pos):
            pass
        match = _SCALAR.match(self.buf, self.pos)
        if not match:
            raise self._fail("not JSON")
        self.pos = match.end()
        return json.loads(match.group())

    def document(self):
        doc = self.value()
        try:
            extra = self._peek()
        except _Truncated:
            return doc
        raise self._fail(f"unexpected {extra!r} after the JSON value")


# --- the file's structure ----------------------------------------------------------------------

def _class(obj) -> str | None:
    """Polygraphy's class tag of a decoded object, current or legacy."""
    if not isinstance(obj, dict):
        return None
    tag = obj.get("polygraphy_class")
    if isinstance(tag, str):
        return tag
    for key, value in obj.items():
        if key.startswith(_LEGACY_PREFIX) and value == _LEGACY_MARKER:
            return key[len(_LEGACY_PREFIX):]
    return None


def _runs(path: str) -> list[tuple[str, list]]:
    """[(runner name, [iteration dict, ...]), ...] with arrays as spans; cached per file version."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
    return _parse(os.path.abspath(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _parse(path: str, _size: int, _mtime: int) -> list[tuple[str, list]]:
    try:
        with open(path, "rb") as fh:
            doc = _Scanner(fh).document()
    except _Truncated as exc:
        raise SourceError(f"{path}: not readable JSON: truncated, {exc}") from None
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SourceError(f"{path}: not readable JSON: {exc}") from None
    if _class(doc) != "RunResults":
        found = _class(doc) if isinstance(doc, dict) else type(doc).__name__
        raise SourceError(f"{path}: not a Polygraphy RunResults JSON (polygraphy_class: {found!r})")
    lst = doc.get("lst")
    runs = [(str(r[0]), r[1]) for r in lst if isinstance(r, list) and len(r) == 2 and isinstance(r[1], list)
            and isinstance(r[0], str)] if isinstance(lst, list) else []
    if not runs:
        raise SourceError(f"{path}: RunResults holds no runners")
    return runs


def runners(path: str | os.PathLike) -> list[tuple[str, int]]:
    """Each runner's name and number of iterations, in file order."""
    path = os.fspath(path)
    if os.path.isdir(path):  # every file holds one iteration of every runner
        files = _folder_files(path)
        return [(name, len(files)) for name, _ in _runs(files[0])]
    return [(name, len(iterations)) for name, iterations in _runs(path)]


KIND = kinds.POLYGRAPHY


def sniff(path: str) -> bool:
    return is_run_results(path)


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    """The runners the file holds, with their iterations (for `inspect`)."""
    runs = runners(path)
    return ["runners  " + " · ".join(f"{name} ({n} iteration{'s' if n != 1 else ''})" for name, n in runs)
            + ("  (tensors below: the first's iteration 0)" if len(runs) > 1 or runs[0][1] > 1 else "")]


def is_run_results(path: str | os.PathLike) -> bool:
    """Whether `path` is Polygraphy RunResults: a JSON file, or a folder of per-iteration files.

    A file is judged from its head and tail, whatever its size: the head shows the RunResults layout
    (`{"lst": [["runner", ...`), the tail its class marker (Polygraphy writes it last), so a file cut short
    by an interrupted run is still recognised, and read() says where it ends.
    """
    if os.path.isdir(path):
        files = _iteration_files(os.fspath(path))
        return bool(files) and is_run_results(files[0])
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 4096, 0))
            tail = fh.read()
    except OSError:
        return False
    return bool(_HEAD.match(head) or _TAIL.search(tail))


def _iteration_files(folder: str) -> list[str]:
    """`polygraphy run --save-outputs DIR` (no extension): one RunResults per iteration, 0000000000.json ..."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.lower().endswith(".json"))
    except OSError:
        return []
    if not names or not all(_ITERATION_FILE.fullmatch(n) for n in names):
        return []
    return [os.path.join(folder, n) for n in names]


def _folder_files(path: str) -> list[str]:
    files = _iteration_files(path)
    if not files:
        raise SourceError(f"{path}: not a folder of Polygraphy per-iteration files (0000000000.json, ...)")
    return files


# --- tensors -----------------------------------------------------------------------------------

def read(path: str | os.PathLike, side: str | None = None, iteration: int = 0, **_options,
         ) -> tuple[list[Tensor], list[Problem]]:
    """One runner's iteration (`side`: the runner's name, default the first; iteration 0), its outputs in
    file order.

    Each tensor is named for the output (`op` = `tensor_name` = the ONNX value name); its data are
    decoded only when loaded. A whole-file problem raises SourceError; a bad array is a Problem.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        files = _folder_files(path)
        if not 0 <= iteration < len(files):
            raise SourceError(f"{path}: iteration {iteration} out of range: the folder holds {len(files)} "
                              "iteration file(s)")
        return read(files[iteration], side, 0)
    runner = side
    runs = _runs(path)
    names = [name for name, _ in runs]
    if runner is None:
        runner = names[0]
    if runner not in names:
        raise SourceError(f"{path}: runner {runner!r} not present; runners: {', '.join(names)}")
    iterations = runs[names.index(runner)][1]
    if not 0 <= iteration < len(iterations):
        raise SourceError(f"{path}: iteration {iteration} out of range: runner {runner!r} has "
                          f"{len(iterations)} iteration(s)")
    outputs = iterations[iteration].get("outputs") if isinstance(iterations[iteration], dict) else None
    if not isinstance(outputs, dict):
        raise SourceError(f"{path}: runner {runner!r} iteration {iteration} has no outputs")
    entries: list[Tensor] = []
    problems: list[Problem] = []
    with open(path, "rb") as fh:
        for name, value in outputs.items():
            if name != "polygraphy_class" and not name.startswith(_LEGACY_PREFIX):  # tags, not outputs
                entries.append(_output(path, fh, name, value, problems))
    return entries, problems


def _output(path: str, fh: IO[bytes], name: str, value, problems: list[Problem]) -> Tensor:
    kind = _class(value)
    if kind in _LAZY:
        value = value.get("values")
        kind = _class(value)
    text = value.get("array") if kind == "ndarray" else None
    if kind == "Tensor":
        reason = "a PyTorch tensor (stored with torch.save, which unpickles): not read; save NumPy outputs"
    elif not isinstance(text, _Span):
        reason = f"not an encoded array (polygraphy_class: {kind!r})" if kind != "ndarray" else "no array text"
    else:
        fh.seek(text.offset)
        start = fh.read(min(text.length, _B64_HEAD))
        if start.startswith(_B64_NPY):
            size = _b64_size(fh, text)
            return npy_tensor(name, path, problems, partial(_b64_head, start), size,
                                      partial(_load_b64, path, text), label=name, tensor_name=name)
        try:  # older versions: npz inside base64, or npy/npz bytes as latin-1 text (small files)
            data = _legacy_bytes(path, text)
        except ValueError as exc:
            reason = str(exc)
        else:
            return npy_tensor(name, path, problems, partial(io.BytesIO, data), len(data),
                                      partial(_load_legacy, path, text), label=name, tensor_name=name)
    problems.append(Problem(path, f"{name}: {reason}"))
    return nd_tensor(name, path, tensor_name=name, problem=reason)


def _b64_size(fh: IO[bytes], text: _Span) -> int:
    """Bytes the base64 text decodes to."""
    fh.seek(text.offset + max(text.length - 2, 0))
    return text.length // 4 * 3 - fh.read(2).count(b"=")


def _b64_head(start: bytes) -> IO[bytes]:
    """The npy header bytes from the first base64 characters (a whole number of quads)."""
    return io.BytesIO(binascii.a2b_base64(start[:len(start) // 4 * 4]))


def _load_b64(path: str, text: _Span) -> np.ndarray:
    """Decode base64 npy bytes chunk by chunk straight into the array: no copy of the whole text."""
    with open(path, "rb") as fh:
        fh.seek(text.offset)
        head = npy_header(_b64_head(fh.read(min(text.length, _B64_HEAD))), _b64_size(fh, text))
        out = np.empty(head.nbytes, np.uint8)
        first = head.offset // 3 * 4  # the quad holding the first data byte
        skip = head.offset % 3
        done, at, end = 0, text.offset + first, text.offset + text.length
        fh.seek(at)
        while done < head.nbytes:
            chunk = fh.read(min(CHUNK, end - at))
            if not chunk:
                raise ValueError(f"base64 text ends early at byte {at:,}")
            try:
                data = b64decode(chunk)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"corrupt base64 in bytes {at:,}-{at + len(chunk):,}: {exc}") from None
            n = min(len(data) - skip, head.nbytes - done)
            out[done:done + n] = np.frombuffer(data, np.uint8, n, skip)
            done, skip, at = done + n, 0, at + len(chunk)
    arr = out.view(head.dtype)
    return arr.reshape(head.shape[::-1]).T if head.fortran else arr.reshape(head.shape)


def b64decode(text: bytes) -> bytes:
    """Strict base64 decoding: a character outside the alphabet is an error, never skipped."""
    if _simd_b64decode is not None:
        return _simd_b64decode(text, validate=True)
    data = binascii.a2b_base64(text)
    if len(data) != len(text) // 4 * 3 - text[-2:].count(b"="):  # a2b_base64 drops foreign characters
        raise ValueError("characters outside the base64 alphabet")
    return data


def _legacy_bytes(path: str, text: _Span) -> bytes:
    """npy bytes from an old encoding: npz in base64, or npy/npz as latin-1 text (both small, pre-2022)."""
    with open(path, "rb") as fh:
        fh.seek(text.offset)
        raw = fh.read(text.length)
    try:
        data = b64decode(raw) if raw.startswith(b"UEsDB") else json.loads(b'"' + raw + b'"').encode("latin-1")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"neither base64 nor latin-1 npy text: {exc}") from None
    if not data.startswith(b"PK"):
        return data
    try:  # npz: its first array, as Polygraphy reads it
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = [n for n in zf.namelist() if n.endswith(".npy")]
            if not members:
                raise ValueError("npz array holds no arrays")
            return zf.read(members[0])
    except zipfile.BadZipFile as exc:
        raise ValueError(f"damaged npz array: {exc}") from None


def _load_legacy(path: str, text: _Span) -> np.ndarray:
    return npformat.read_array(io.BytesIO(_legacy_bytes(path, text)), allow_pickle=False)
