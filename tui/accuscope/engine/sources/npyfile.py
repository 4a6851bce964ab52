"""npy streams and npz files, read without unpickling: the header parsed by bounded code
(`npy_header`; `npy_meta`: each distinct header text once), a lazy `Tensor` on one npy stream
(`npy_tensor`), an npy file memory-mapped (`load_npy`), a folder's npy file from one open and one read
(`read_npy_file`, `npy_file_tensor`: the header kept for loading, a small file's data with it), an npz's
members (`read_npz`).

Every golden-style reader builds on these (golden's npy folders and npz, Polygraphy's base64 npy,
tpu-mlir's npz, MindSpore's and msprobe's npy files): a plain numeric array or a `Problem`.
"""
from __future__ import annotations

import lzma
import math
import os
import re
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache, partial
from typing import IO, Literal, NamedTuple, cast

import numpy as np

from accuscope.engine.sources.inputfile import OPEN_FLAGS, NotRegular, mode_problem, open_user_file, user_path
from accuscope.engine.sources.tensor import (
    OUTPUT,
    Payload,
    Problem,
    SourceError,
    Tensor,
    file_tensor,
    read_payload,
)

try:  # the first bytes of many small files in one call; absent when installed without a C compiler
    from accuscope.engine.sources import _npyread  # type: ignore[attr-defined]
except ImportError:
    _npyread = None


class NpyHeader(NamedTuple):
    """A parsed npy header (frozen). A NamedTuple: every command reading npy files imports this module,
    and a dataclass took 1.4 ms to make; an npy folder's compiled reader (_npyread) builds none."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    offset: int  # where the data start in the npy stream

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


_NPY_MAGIC = b"\x93NUMPY"
_NPY_MAX_HEADER = 10000  # numpy's own limit (np.load refuses larger headers by default)
_NPY_MAX_DIMS = 64
_INT64 = 1 << 63
# The header is a Python dict literal; these are all the tokens a valid one can hold.
_NPY_TOKEN = re.compile(r"""[ \t\n]*(?:(?P<str>'[^'\\]*'|"[^"\\]*")|(?P<int>-?\d{1,30})L?|(?P<word>True|False)"""
                        r"""|(?P<punct>[{}():,\[\]]))""")
# The header exactly as numpy writes it (np.save, np.lib.format): parsed by one match; any other
# spelling goes through the token parser (_npy_dict), which accepts every valid header.
_NPY_CANONICAL = re.compile(r"\{'descr': '([^'\\]{1,40})', 'fortran_order': (True|False), "
                            r"'shape': \(((?:\d{1,30}, ){0,64}\d{1,30},?)?\), \}")
_NUMERIC_DESCR = re.compile(r"[<>|=]?(?:[?]|b1|[iu][1248]|f[248]|f16|c(?:8|16|32))")
MEMBER_ERRORS = (OSError, ValueError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
                  zlib.error, lzma.LZMAError)
_RECORD = object()  # a list-valued descr: a structured (record) dtype


def npy_header(fh: IO[bytes], size: int) -> NpyHeader:
    """Parse an npy header without reading data, with bounded code (no eval, no recursion); refuse
    anything but a plain numeric array whose every size is sane and whose data the stream holds.
    Raises ValueError with the reason."""
    lead = fh.read(10)
    if len(lead) == 10 and lead.startswith(_NPY_MAGIC) and lead[6] in (2, 3):
        lead += fh.read(2)
    major, start, hlen = _npy_prefix(lead)
    raw = fh.read(hlen)
    if len(raw) < hlen:
        raise ValueError(f"npy header truncated ({len(raw)} of {hlen} bytes)")
    dtype, shape, fortran, nbytes = npy_meta(raw, major)
    _check_size(start + hlen, nbytes, size)
    return NpyHeader(dtype, shape, fortran, start + hlen)


@lru_cache(maxsize=64)
def _npy_prefix(lead: bytes) -> tuple[int, int, int]:
    """(format version, where the header text starts, its length) from an npy stream's first 10 bytes
    (12 for versions 2 and 3); ValueError with the reason (raised each time: only answers are kept).
    Each distinct prefix is read once: a folder's files share a few (0.7 of a tiny file's 1.1 us header
    parse was this function's checks, against a cached answer's 0.1)."""
    if not lead:
        raise ValueError("empty file")
    if not lead.startswith(_NPY_MAGIC):
        raise ValueError("not an npy file (no \\x93NUMPY magic)")
    if len(lead) < 10:
        raise ValueError("npy header truncated")
    major = lead[6]
    if major == 1:
        start, hlen = 10, int.from_bytes(lead[8:10], "little")
    elif major in (2, 3):
        if len(lead) < 12:
            raise ValueError("npy header truncated")
        start, hlen = 12, int.from_bytes(lead[8:12], "little")
    else:
        raise ValueError(f"unknown npy format version {major}.{lead[7]}")
    if hlen > _NPY_MAX_HEADER:
        raise ValueError(f"npy header of {hlen} bytes exceeds the {_NPY_MAX_HEADER}-byte limit")
    return major, start, hlen


NpyMeta = tuple[np.dtype, tuple[int, ...], bool, int]  # dtype, shape, fortran order, data bytes


@lru_cache(maxsize=1024)
def npy_meta(raw: bytes, major: int) -> NpyMeta:
    """(dtype, shape, fortran_order, data bytes) of an npy header's text, checked (ValueError with the
    reason). Each distinct header text is parsed once (a network of thousands of small tensors repeats
    a few dozen): numpy's own spelling by one match, any other by the token parser."""
    descr, fortran, shape = _npy_fields(raw.decode("utf-8" if major == 3 else "latin-1", "replace"))
    dtype = _npy_dtype(descr)
    if len(shape) > _NPY_MAX_DIMS:
        raise ValueError(f"{len(shape)} dimensions (at most {_NPY_MAX_DIMS})")
    bad = [d for d in shape if not 0 <= d < _INT64]
    if bad:
        raise ValueError(f"impossible dimension {bad[0]} in shape {tuple(shape)}")
    if math.prod(d for d in shape if d) * dtype.itemsize >= _INT64:
        raise ValueError(f"shape {tuple(shape)} of {dtype.name} is larger than any file")
    return dtype, shape, fortran, math.prod(shape) * dtype.itemsize


def _check_size(offset: int, nbytes: int, size: int) -> None:
    if size < offset + nbytes:
        raise ValueError(f"truncated: header promises {nbytes} data bytes, only "
                         f"{max(size - offset, 0)} present")


def _npy_fields(text: str) -> tuple[str | object, bool, tuple[int, ...]]:
    """(descr, fortran_order, shape) of a header dict literal: numpy's own spelling by one match, any
    other by the token parser. ValueError for anything but the three keys."""
    text = text.rstrip(" \t\n")
    m = _NPY_CANONICAL.fullmatch(text)
    if m is not None:
        return m[1], m[2] == "True", tuple(int(d) for d in (m[3] or "").split(",") if d)
    descr, fortran, shape = _npy_dict(text)
    return descr, fortran, tuple(shape)


def _npy_dict(text: str) -> tuple:
    """(descr, fortran_order, shape) from the header dict literal; ValueError for anything else."""
    tokens, pos = [], 0
    text = text.rstrip(" \t\n")
    while pos < len(text):
        m = _NPY_TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"npy header is not a plain dict literal (at {text[pos:pos + 20]!r})")
        kind = cast(str, m.lastgroup)  # every alternative is a named group
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    tokens.append(("end", ""))
    fields: dict[str, object] = {}
    i = 0

    def expect(kind: str, value: str | None = None) -> str:
        nonlocal i
        k, v = tokens[i]
        if k != kind or (value is not None and v != value):
            raise ValueError(f"npy header is not a plain dict literal (found {v or 'end'!r})")
        i += 1
        return v

    expect("punct", "{")
    while tokens[i] != ("punct", "}"):
        key = expect("str")[1:-1]
        expect("punct", ":")
        kind, value = tokens[i]
        if kind in ("str", "word"):
            fields[key] = value[1:-1] if kind == "str" else value == "True"
            i += 1
        elif (kind, value) == ("punct", "("):
            i += 1
            dims = []
            while tokens[i] != ("punct", ")"):
                dims.append(int(expect("int")))
                if tokens[i] != ("punct", ")"):
                    expect("punct", ",")
            i += 1
            fields[key] = dims
        elif (kind, value) == ("punct", "["):  # skip a record descr, balanced, without recursion
            depth = 0
            while True:
                kind, value = tokens[i]
                if kind == "end":
                    raise ValueError("npy header is not a plain dict literal (unclosed '[')")
                depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(value, 0) if kind == "punct" else 0
                i += 1
                if depth == 0:
                    break
            fields[key] = _RECORD
        else:
            raise ValueError(f"npy header: unexpected value {value or 'end'!r} for {key!r}")
        if tokens[i] != ("punct", "}"):
            expect("punct", ",")
    expect("punct", "}")
    expect("end")
    if sorted(fields) != ["descr", "fortran_order", "shape"]:
        raise ValueError(f"npy header keys {sorted(fields)} are not descr, fortran_order, shape")
    descr, fortran, shape = fields["descr"], fields["fortran_order"], fields["shape"]
    if not isinstance(fortran, bool) or not isinstance(shape, list) or not (descr is _RECORD or isinstance(descr, str)):
        raise ValueError("npy header values have the wrong types")
    return descr, fortran, shape


@lru_cache(maxsize=256)
def _npy_dtype(descr) -> np.dtype:
    if descr is _RECORD:
        raise ValueError("structured (record) dtype: not supported, only plain numeric arrays")
    if descr.lstrip("<>|=").startswith("O"):
        raise ValueError("holds Python objects (object dtype); refusing to unpickle")
    if not _NUMERIC_DESCR.fullmatch(descr):
        raise ValueError(f"dtype {descr!r} is not a plain numeric type: not supported")
    return np.dtype(descr)


def nd_tensor(op: str, source: str, *, io: str = OUTPUT, index: int = 0, dtype: np.dtype | None = None,
            shape: Sequence[int] = (), **fields) -> Tensor:
    """A tensor of plain ND data in logical layout (as every golden-style reader gives them)."""
    return Tensor(op=op, io=io, index=index, dtype=dtype, shape=tuple(shape), source=source,
                  dtype_name=_dtype_name(dtype) if dtype is not None else "", format="ND", **fields)


@lru_cache(maxsize=256)
def _dtype_name(dtype: np.dtype) -> str:
    return dtype.name  # numpy computes it in Python, each time: 20 µs of a tiny tensor's row


def npy_tensor(op: str, source: str, problems: list[Problem], open_stream: Callable[[], IO[bytes]],
                size: int, reader: Callable[[], np.ndarray], *, label: str = "", mapped: bool = False,
                **fields) -> Tensor:
    """A Tensor from an npy stream's header; a broken header becomes a Problem and a tensor carrying it.

    `mapped`: the stream is a plain file, so C-ordered data get a Payload for chunked reads.
    """
    try:
        with open_stream() as fh:
            head = npy_header(fh, size)
    except MEMBER_ERRORS as exc:
        message = f"{label}: {exc}" if label else str(exc)
        problems.append(Problem(source, message))
        return nd_tensor(op, source, problem=message, **fields)
    payload = None
    if mapped and not head.fortran:
        payload = Payload(source, head.offset, head.nbytes, head.dtype, head.shape)
        reader = partial(read_payload, payload)  # the header is parsed once: here, not again to load
    return nd_tensor(op, source, dtype=head.dtype, shape=head.shape, payload=payload, reader=reader, **fields)


def load_npy(path: str) -> np.ndarray:
    """A read-only memory map, placed by our own header parse (numpy's parser never sees the file)."""
    with open(path, "rb") as fh:
        head = npy_header(fh, os.fstat(fh.fileno()).st_size)
    order: Literal["C", "F"] = "F" if head.fortran else "C"
    if head.nbytes == 0:
        return np.empty(head.shape, dtype=head.dtype, order=order)
    return np.memmap(path, dtype=head.dtype, mode="r", offset=head.offset, shape=head.shape, order=order)



def user_npy(path: str, what: str) -> np.ndarray:
    """An .npy file the user named (a model input, a calibration sample) read into a writable array: through
    the checked opener (inputfile.open_user_file: a FIFO or device refused, never waited on) and our own header
    parse (no pickle); SourceError naming the path and what it was given as for anything else."""
    with open_user_file(path, what) as fh:
        try:
            head = npy_header(fh, os.fstat(fh.fileno()).st_size)
            data = bytearray(head.nbytes)
            got = fh.readinto(data)
        except (OSError, ValueError) as exc:
            raise SourceError(f"{path}: cannot read it as an .npy {what} ({exc})") from None
    if got < head.nbytes:
        raise SourceError(f"{path}: cannot read it as an .npy {what} ({got:,} of {head.nbytes:,} data bytes)")
    return np.frombuffer(data, dtype=head.dtype).reshape(head.shape, order="F" if head.fortran else "C")


def user_npz(path: str, what: str) -> dict[str, np.ndarray]:
    """An .npz file the user named, every array by its name: the checked opener's checks, then `read_npz`;
    SourceError naming the path (and the member) for a damaged one."""
    user_path(path, what)
    tensors, problems = read_npz(path)
    if problems:
        raise SourceError(f"{path}: cannot read it as an .npz {what} ({problems[0].message})")
    try:
        return {t.op: np.array(t.load()) for t in tensors}  # read_npz names each tensor's op by its key
    except MEMBER_ERRORS as exc:
        raise SourceError(f"{path}: cannot read it as an .npz {what} ({exc})") from None


# --- npy files in a folder ------------------------------------------------------------------------

HEAD_READ = 4096
"""Bytes of an npy file read at once when its folder is listed: the header (numpy writes it 64-byte
aligned: 128 bytes for most arrays) and, for a file this small, the data too."""


def read_npy_file(path: str, *, keep: bool = False) -> tuple[NpyMeta, int, bytes | None]:
    """An npy file's header from one open and one read: its `NpyMeta`, where its data start, and (with
    `keep`) the file's bytes when that read held the whole file: its data, with no second open to load
    them. The descriptor read is checked to be a regular file (NotRegular: skipped, with the reason); a
    bad header is a ValueError with the reason, as `npy_header` gives it."""
    fd = os.open(path, OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        why = mode_problem(st.st_mode)
        if why:
            raise NotRegular(why)
        raw = os.pread(fd, HEAD_READ, 0)
        if _longer_header(raw):  # (up to 10 KB)
            _, start, hlen = _npy_prefix(raw[:12])
            raw += os.pread(fd, start + hlen - len(raw), len(raw))
    finally:
        os.close(fd)
    meta, offset, whole = _npy_file_head(raw, st.st_size)
    return meta, offset, whole if keep else None


def _npy_file_head(raw: bytes, size: int) -> tuple[NpyMeta, int, bytes | None]:
    """read_npy_file's result from a file's first bytes `raw` (all of its header) and its size, with
    `raw` where it is the whole file."""
    major, start, hlen = _npy_prefix(raw[:12])
    head = raw[start:start + hlen]
    if len(head) < hlen:
        raise ValueError(f"npy header truncated ({len(head)} of {hlen} bytes)")
    meta = npy_meta(head, major)
    _check_size(start + hlen, meta[3], size)
    return meta, start + hlen, raw if size <= len(raw) else None


def _longer_header(raw: bytes) -> bool:
    """Whether an npy file's header goes on beyond the HEAD_READ bytes `raw` holds."""
    if len(raw) < HEAD_READ:
        return False
    _, start, hlen = _npy_prefix(raw[:12])
    return start + hlen > len(raw)


READ_BATCH = 1024  # files whose first bytes the compiled reader reads in one call (4 MB)
NpyFileRead = tuple[NpyMeta, int, bytes | None]


def read_npy_files(paths: Sequence[str]) -> Iterator[NpyFileRead | Exception]:
    """`read_npy_file(path, keep=True)` of each path in turn, or the error it raises (NotRegular, OSError,
    ValueError: MEMBER_ERRORS), READ_BATCH files at a time: their system calls in one call of the compiled reader
    (_npyread.c: a folder of 20,000 tiny npy files without Python's objects between them, 3 us a file
    less), else one by one. A file whose header is longer than that read is read by read_npy_file."""
    for lo in range(0, len(paths), READ_BATCH):
        batch = list(paths[lo:lo + READ_BATCH])
        if _npyread is None:
            for path in batch:
                try:
                    yield read_npy_file(path, keep=True)
                except MEMBER_ERRORS as exc:
                    yield exc
            continue
        for path, (raw, size, mode, err, call) in zip(batch, _npyread.heads(batch, HEAD_READ, OPEN_FLAGS)):
            try:
                if err:  # os.open's error names the file, fstat's and pread's do not
                    raise OSError(err, os.strerror(err), path) if call == 0 else OSError(err, os.strerror(err))
                if raw is None:  # no regular file: the reader reads none (mode_problem's test, a call a file less)
                    raise NotRegular(mode_problem(mode))
                yield read_npy_file(path, keep=True) if _longer_header(raw) else _npy_file_head(raw, size)
            except MEMBER_ERRORS as exc:
                yield exc


def npy_file_tensor(op: str, path: str, meta: NpyMeta, offset: int, data: bytes | None, *, io: str = OUTPUT, index: int = 0,
                    timestamp: int | None = None, **fields) -> Tensor:
    """The Tensor of an npy file `read_npy_file` read (the header parsed there, not again to load): its data
    come from `data` when that read held them (a file of a few KB: no Payload, whose chunked reads a tensor
    this small never takes; 2 us of a tiny tensor's 8), else from the file: C-ordered data through a Payload
    (chunked reads; read when small, memory-mapped when large), others memory-mapped."""
    dtype, shape, fortran, nbytes = meta
    payload = None if fortran or data is not None else Payload(path, offset, nbytes, dtype, shape)
    if data is not None:
        reader = partial(_from_bytes, data, offset, meta)
    elif payload is not None:
        reader = partial(read_payload, payload)
    else:
        reader = partial(_map_npy, path, offset, meta)
    if fields:  # a reader's other fields (msprobe: op_type, tensor_name, stats, checksum)
        return Tensor(op=op, io=io, index=index, dtype=dtype, shape=shape, source=path, dtype_name=_dtype_name(dtype),
                      format="ND", payload=payload, reader=reader, timestamp=timestamp, **fields)
    return file_tensor(op, io, index, dtype, shape, path, _dtype_name(dtype), payload, reader, timestamp)


def held_data(t: Tensor) -> memoryview | None:
    """The data bytes of a tensor `npy_file_tensor` made from a read that held its whole file (C order),
    without an array made of them: a group of tiny tensors joins them into one (compare.pairjob.run_small);
    None for any other tensor."""
    reader = t.reader
    if type(reader) is partial and reader.func is _from_bytes and not t.problem and t.value is None:
        data, offset, (_, _, fortran, nbytes) = reader.args
        if not fortran:
            return memoryview(data)[offset:offset + nbytes]
    return None


def _from_bytes(data: bytes, offset: int, meta: NpyMeta) -> np.ndarray:
    dtype, shape, fortran, nbytes = meta
    if nbytes == 0:
        return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    flat = np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C")


def _map_npy(path: str, offset: int, meta: NpyMeta) -> np.ndarray:
    dtype, shape, fortran, nbytes = meta
    if nbytes == 0:
        return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


# --- npz ---------------------------------------------------------------------------------------

def read_npz(path: str) -> tuple[list[Tensor], list[Problem]]:
    """One tensor per member, key = tensor name; only member headers are read at open time."""
    try:
        zf = zipfile.ZipFile(path)
    except MEMBER_ERRORS as exc:
        raise SourceError(f"{path}: not a readable npz file: {exc}") from exc
    entries, problems = [], []
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            if not info.filename.endswith(".npy"):
                problems.append(Problem(path, f"{info.filename}: not an npy member, skipped"))
                continue
            key = info.filename[:-4]
            entries.append(npy_tensor(key, path, problems, partial(zf.open, info), info.file_size,
                                       partial(_load_npz_member, path, info.filename),
                                       label=key, tensor_name=key))
    if not entries and not problems:
        raise SourceError(f"{path}: npz file holds no arrays")
    return entries, problems


_ZIPS: dict[tuple[str, int], tuple[tuple[int, int, int], zipfile.ZipFile]] = {}
_ZIPS_LOCK = threading.Lock()
ZIPS_KEPT = 8  # npz files whose directory stays parsed


def _zip(path: str) -> zipfile.ZipFile:
    """The npz at `path` opened once per process while it is unchanged (same inode, size, mtime): a zip's
    central directory is parsed on open, 8 ms for tpu-mlir's 250-member npz, which every member's load paid
    (the value checks on pairs re-load dozens: 1.6 s of the re-pairing's 1.9 s on the tpu-mlir fixture).
    ZipFile reads a member under its own lock (threads share it); a forked process opens its own."""
    st = os.stat(path)
    stamp, key = (st.st_ino, st.st_size, st.st_mtime_ns), (path, os.getpid())
    with _ZIPS_LOCK:
        found = _ZIPS.get(key)
        if found is not None and found[0] == stamp:
            return found[1]
    zf = zipfile.ZipFile(path)
    with _ZIPS_LOCK:
        if len(_ZIPS) >= ZIPS_KEPT:  # dropped, not closed: a thread may still read it (closed when unused)
            _ZIPS.pop(next(iter(_ZIPS)))
        _ZIPS[key] = (stamp, zf)
    return zf


def _load_npz_member(path: str, member: str) -> np.ndarray:
    try:
        zf = _zip(path)
        with zf.open(member) as fh:
            head = npy_header(fh, zf.getinfo(member).file_size)
            data = fh.read(head.nbytes)  # a damaged stream fails its CRC check here
    except (KeyError, *MEMBER_ERRORS) as exc:
        raise ValueError(f"damaged npz member {member}: {exc}") from exc
    if len(data) < head.nbytes:
        raise ValueError(f"damaged npz member {member}: {len(data)} of {head.nbytes} data bytes")
    return np.frombuffer(data, dtype=head.dtype).reshape(head.shape, order="F" if head.fortran else "C")
