"""A ResultTable as one .npz file: a task's result.npz (the typed copy of its result) and a multi-rank
task's ranks/{key}.npz, each with a description of itself (`meta`: format, rows, columns, and what the
writer says it is: the CSV and generation it goes with, or the rank and comparison it holds).

Numeric and bool columns are stored as they are. Text columns are stored as UTF-8 bytes joined by NUL:
fixed-width unicode arrays measured 115 MB for 50k rows with dump paths (every cell as wide as the
longest, 4 bytes a character) against 12 MB packed, and the packed form loads as fast. Reading checks
the file's claims before anything of the claimed size is allocated.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from accuscope.engine.compare.results import KIND, ResultTable
from accuscope.engine.sources.inputfile import json_loads, open_user_file

NPZ_FORMAT = 1


def write_npz(table: ResultTable, path: Path, about: dict) -> None:
    """`about`: what the writer says the file is (result.npz: its CSV's name and generation; a rank
    file: its rank and comparison), kept in the file's meta."""
    arrays, layout = {}, []
    for i, (key, col) in enumerate(table.columns.items()):
        name = f"c{i}"
        if col.dtype == object:
            joined = "\x00".join(col.tolist())
            if joined.count("\x00") == max(len(col) - 1, 0):
                arrays[name] = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
                layout.append([key, "packed"])
            else:  # a value holds NUL itself
                arrays[name] = np.array(col.tolist(), dtype=str)
                layout.append([key, "unicode"])
        else:
            arrays[name] = col
            layout.append([key, "array"])
    meta = {"format": NPZ_FORMAT, "rows": len(table), "columns": layout, "custom": table.custom,
            "present": sorted(table.present), **about}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle, not **kwds


def read_npz(path: Path, head: int | None = None) -> tuple[ResultTable, dict]:
    """The table and the file's own description; ValueError when its claims do not hold (checked
    before anything of the claimed size is allocated). `head`: only the first `head` rows, each
    column read only as far as they go (the first screen of a 1M-row task: milliseconds, where the
    whole table takes seconds to decode its text columns). Opened by the checked opener: a FIFO in its place is
    a SourceError (a ValueError), never waited on."""
    with open_user_file(path, "result file") as fh, np.load(fh, allow_pickle=False) as z:
        meta = json_loads(z["meta"].tobytes().decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != NPZ_FORMAT:
            raise ValueError(f"format {meta.get('format') if isinstance(meta, dict) else None} is not {NPZ_FORMAT}")
        n, layout, custom = meta.get("rows"), meta.get("columns"), meta.get("custom")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"rows {n!r} is not a row count")
        if not (isinstance(layout, list) and all(isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c)
                                                 for c in layout)):
            raise ValueError("its column list is not a list of [name, layout] pairs")
        if not (isinstance(custom, list) and all(isinstance(c, str) for c in custom)
                and isinstance(meta.get("present"), list)):
            raise ValueError("its custom or present column lists are not lists of names")
        rows = n if head is None else min(n, head)
        columns = {}
        for i, (key, how) in enumerate(layout):
            if key not in KIND and key not in custom:
                continue
            if rows < n:
                columns[key] = _member_head(z.zip, f"c{i}.npy", rows, how == "packed")
                continue
            data = z[f"c{i}"]
            if how == "packed":
                values = data.tobytes().decode("utf-8").split("\x00") if n else []  # one "" row packs to no byte
                if len(values) != n:
                    raise ValueError(f"column {key!r} holds {len(values):,} values, not the {n:,} rows it claims")
                data = np.empty(n, dtype=object)
                data[:] = values
            else:
                if data.ndim != 1 or len(data) != n:
                    raise ValueError(f"column {key!r} holds {data.size:,} values, not the {n:,} rows it claims")
                if how == "unicode":
                    data = data.astype(object)
            columns[key] = data
        if n and not columns:
            raise ValueError(f"it claims {n:,} rows but holds no column")
    return ResultTable.from_columns(columns, custom, meta["present"]), meta


def _member_head(archive: zipfile.ZipFile, name: str, rows: int, packed: bool) -> np.ndarray:
    """The first `rows` values of one npz member, read no further than they go: a packed text
    column (UTF-8, NUL between values) as an object array of str, any other as its 1-D array.
    ValueError when the member holds fewer or is not a plain 1-D array."""
    with archive.open(name) as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject or len(shape) != 1 or fortran or (packed and dtype != np.uint8):
            raise ValueError(f"{name} is not a plain 1-D array")
        if not packed:
            if shape[0] < rows:
                raise ValueError(f"{name} holds {shape[0]:,} values, fewer than {rows:,}")
            raw = f.read(rows * dtype.itemsize)
            data = np.frombuffer(bytearray(raw), dtype=dtype)
            if len(data) != rows:
                raise ValueError(f"{name} ends before its {rows:,}th value")
            return data.astype(object) if dtype.kind == "U" else data
        raw, found = b"", 0
        while found < rows:  # values end at the rows-th NUL (the last value: at the member's end)
            chunk = f.read(1 << 16)
            if not chunk:
                break
            raw += chunk
            found += chunk.count(b"\x00")
        values = raw.split(b"\x00", rows)[:rows]
        if len(values) < rows:
            raise ValueError(f"{name} holds {len(values):,} values, fewer than {rows:,}")
        column = np.empty(rows, dtype=object)
        column[:] = [v.decode("utf-8") for v in values]
        return column
