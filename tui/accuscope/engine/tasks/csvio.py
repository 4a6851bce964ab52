"""Result CSV in the MindStudio / msaccucmp / msit layout: write it, and read any variant of it.

Users bring result CSVs from earlier MindStudio, msaccucmp or msit runs, so reading is lenient:
optional columns come and go (OpSequence, OverFlow, either Address, a subset of metrics, plugin
metrics, msit's three YES/NO columns), headers repeat (DataType / Address: resolved by position,
before GroundTruth = NPU side), and a malformed row becomes a warning instead of an exception.
Our own extra columns go after everything msit knows, because msit's readers find columns by name.
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np

from accuscope.engine.compare.columns import EXTRAS, KEY_OF, METRICS
from accuscope.engine.compare.results import CSV_NAMES, KIND, ResultTable
from accuscope.engine.sources.inputfile import require_regular
from accuscope.engine.sources.outputfile import atomic_file
from accuscope.engine.sources.tensor import SourceError

MSIT_COLUMNS = [("IsNpuOps", "is_npu_only"), ("IsOutputNode", "is_output"), ("IsPrecisionError", "fail")]
# Ours, beyond the extras of columns.py: what the detail view needs to reopen the tensors.
DETAIL_COLUMNS = [("Conversion", "conversion"), ("MappedBy", "how"), ("NPUFile", "npu_file"),
                  ("GoldenFile", "golden_file")]
REQUIRED = ("NPUDump", "GroundTruth", "TensorIndex")
RANK_COLUMNS = [("Step", "step"), ("Rank", "rank")]  # a multi-rank task's rows
_OPTIONAL_TAIL = {name for name, _ in MSIT_COLUMNS + DETAIL_COLUMNS + RANK_COLUMNS} | {csv for csv, _ in EXTRAS}
_YES = {"YES", "Yes", "yes", "TRUE", "True", "true", "1", " YES"}
_MISSING = {"", "-", "nan", "NaN", "NAN", "None", "none", "N/A", "n/a", "null"}
_BY_NAME = {**CSV_NAMES, **KEY_OF, **dict(DETAIL_COLUMNS)}


# ---- writing ------------------------------------------------------------------------------------
def result_header(table: ResultTable, with_op_sequence: bool = False, with_overflow: bool = False,
                  npu_is_npy: bool = False, golden_is_npy: bool = False,
                  msit_columns: bool = True) -> list[tuple[str, str]]:
    """(CSV header, column key) pairs in file order."""
    out = [("Index", "index")]
    if with_op_sequence:
        out.append(("OpSequence", "op_seq"))
    out += [("OpType", "type"), ("NPUDump", "npu_op"), ("DataType", "npu_dtype")]
    if not npu_is_npy:
        out.append(("Address", "npu_address"))
    out += [("GroundTruth", "golden_op"), ("DataType", "golden_dtype")]
    if not golden_is_npy:
        out.append(("Address", "golden_address"))
    out += [("TensorIndex", "tensor"), ("Shape", "shape")]
    if with_overflow:
        out.append(("OverFlow", "overflow"))
    metrics = [(csv, key) for csv, key in METRICS if key in table.present]
    out += metrics or METRICS  # a table without data still gets msaccucmp's full header
    out += [(name, name) for name in table.custom]
    out.append(("CompareFailReason", "reason"))
    if msit_columns:
        out += MSIT_COLUMNS
    out += [(csv, key) for csv, key in EXTRAS if key in table.present]
    out += [(csv, key) for csv, key in DETAIL_COLUMNS if (table.columns[key] != "").any()]
    out += [(csv, key) for csv, key in RANK_COLUMNS if (table.columns[key] >= 0).any()]
    return out


def _cells(table: ResultTable, key: str) -> list[str]:
    col = table.columns[key]
    kind = KIND.get(key, "text")
    if kind == "float":
        if np.isnan(col).all():  # a metric not computed (a statistics triage: msaccucmp's ten)
            return ["NaN"] * len(col)
        return ["NaN" if v != v else f"{v:.6f}" for v in col.tolist()]
    if kind == "bool":
        return ["YES" if v else "NO" for v in col.tolist()]
    if kind == "int":
        return [str(v) if v >= 0 or key == "index" else "NaN" for v in col.tolist()]
    return col.tolist()


def write_result_csv(table: ResultTable, path: str | os.PathLike, with_op_sequence: bool = False,
                     with_overflow: bool = False, npu_is_npy: bool = False, golden_is_npy: bool = False,
                     msit_columns: bool = True) -> Path:
    """Write the result CSV atomically (a fresh file in the same folder, then renamed over `path`)."""
    columns = result_header(table, with_op_sequence, with_overflow, npu_is_npy, golden_is_npy,
                            msit_columns)
    path = Path(path)
    with atomic_file(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([name for name, _ in columns])
        writer.writerows(zip(*(_cells(table, key) for _, key in columns)))
    return path


# ---- reading ------------------------------------------------------------------------------------
def read_result_csv(path: str | os.PathLike) -> tuple[ResultTable, list[str]]:
    """Read a result CSV of MindStudio, msaccucmp, msit or accuscope; returns (table, warnings).

    SourceError when the file is not a result CSV at all. Row numbers in the table are the file's
    row order (the execution order); the file's Index values are not kept.
    """
    path = Path(path)
    warnings: list[str] = []
    text = _read_text(path, warnings)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = _find_header(reader, path)
    keys = _header_keys(header, warnings)
    rows, lines = _rows(text, reader, header, warnings)
    grid = np.array(rows, dtype=object) if rows else np.empty((0, len(header)), dtype=object)
    columns, custom = {}, []
    for pos, key in enumerate(keys):
        if key is None or key in columns:
            continue
        if key.startswith("custom:"):
            key = key[len("custom:"):]
            custom.append(key)
        columns[key] = _parse(grid[:, pos], KIND.get(key, "text"), header[pos], lines, warnings)
    columns.pop("index", None)  # the table's index is the row order
    table = ResultTable.from_columns(columns, custom)
    return table, warnings


def _read_text(path: Path, warnings: list[str]) -> str:
    require_regular(str(path))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SourceError(f"{path}: cannot read: {e.strerror or e}") from None
    if b"\x00" in data[:4096]:
        raise SourceError(f"{path}: not a comparison result CSV (binary data)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    for encoding in ("gb18030", "latin-1"):  # Chinese Windows, then anything
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    warnings.append(f"{path.name}: not UTF-8; read as {encoding}")
    return text


def _find_header(reader, path: Path) -> list[str]:
    """The first row naming NPUDump (within the first few, past any preamble)."""
    first = None
    try:
        for _, row in zip(range(5), reader):
            row = [c.strip().lstrip("\ufeff") for c in row]
            first = first or row
            if "NPUDump" in row or "GroundTruth" in row:
                missing = [name for name in REQUIRED if name not in row]
                if missing:
                    raise SourceError(f"{path}: not a comparison result CSV: the header lacks "
                                      f"{', '.join(missing)}")
                return row
    except csv.Error as e:
        raise SourceError(f"{path}: not a comparison result CSV: {e}") from None
    seen = ",".join(first or [])[:80]
    raise SourceError(f"{path}: not a comparison result CSV: no header with "
                      f"{', '.join(REQUIRED)} (first line: {seen!r})")


def _header_keys(header: list[str], warnings: list[str]) -> list[str | None]:
    """Column key per position; "custom:Name" for plugin metrics; None for ignored columns."""
    golden_at = header.index("GroundTruth")
    reason_at = header.index("CompareFailReason") if "CompareFailReason" in header else len(header)
    known = [header.index(n) for n in ("TensorIndex", "Shape", "OverFlow") if n in header]
    metrics_from = max(known) + 1
    keys: list[str | None] = []
    for pos, name in enumerate(header):
        side = "npu" if pos < golden_at else "golden"
        if name == "DataType":
            keys.append(f"{side}_dtype")
        elif name == "Address":
            keys.append(f"{side}_address")
        elif name in _BY_NAME:
            keys.append(_BY_NAME[name])
        elif name and metrics_from <= pos < reason_at:
            keys.append("custom:" + name)
        else:
            keys.append(None)
            warnings.append(f"column {pos + 1} '{name}' is not known; ignored")
    return keys


def _rows(text: str, reader, header: list[str], warnings: list[str]) -> tuple[list[list[str]], list[int]]:
    """Rows with exactly len(header) fields, and their line numbers (for warnings).

    Short rows that only lack optional trailing columns (msit leaves them off when it cannot parse
    a row) are padded; blank rows are skipped; other misfits become warnings.
    """
    width = len(header)
    needed = max(pos for pos, name in enumerate(header) if name not in _OPTIONAL_TAIL) + 1
    first_line = reader.line_num + 1
    try:
        rows = list(reader)  # the fast path; line numbers follow unless a field spans lines
        lines = range(first_line, first_line + len(rows))
        if first_line - 1 + len(rows) != reader.line_num:
            lines = None
    except csv.Error:
        rows, lines = None, None
    if lines is None:
        rows, lines = _rows_slowly(text, first_line, warnings)
    if all(len(r) == width for r in rows):
        return rows, list(lines)
    kept, kept_lines = [], []
    for row, line in zip(rows, lines):
        if len(row) != width:
            if not any(c.strip() for c in row):
                continue
            if len(row) > width and not any(c.strip() for c in row[width:]):
                row = row[:width]
            elif needed <= len(row) < width:
                row = row + [""] * (width - len(row))
            else:
                warnings.append(f"line {line}: {len(row)} fields where the header has {width}; "
                                "row skipped")
                continue
        kept.append(row)
        kept_lines.append(line)
    return kept, kept_lines


def _rows_slowly(text: str, first_line: int, warnings: list[str]):
    """Re-read row by row when fields span lines or the csv module rejects a row."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, lines = [], []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            if reader.line_num >= first_line:
                warnings.append(f"line {reader.line_num}: {e}; row skipped")
            continue
        if reader.line_num >= first_line:
            rows.append(row)
            lines.append(reader.line_num)
    return rows, lines


def _parse(cells: np.ndarray, kind: str, name: str, lines: list[int], warnings: list[str]):
    """One column of str cells (an object array) as the column kind needs."""
    if kind == "text":
        return cells.copy()
    if kind == "bool":
        return np.fromiter((c in _YES for c in cells.tolist()), dtype=bool, count=len(cells))
    values = _floats(cells, name, lines, warnings)
    if kind == "int":
        return np.where(np.isnan(values), -1, values).astype(np.int64)
    return values


def _floats(cells: np.ndarray, name: str, lines: list[int], warnings: list[str]) -> np.ndarray:
    try:
        return cells.astype(np.float64)  # parses NaN, inf, 1e-5, " 0.5"
    except ValueError:
        pass
    cells = cells.tolist()
    cleaned = ["nan" if c.strip() in _MISSING else c for c in cells]
    out = np.full(len(cells), np.nan)
    bad = []
    for i, c in enumerate(cleaned):
        try:
            out[i] = float(c)
        except ValueError:
            bad.append(i)
    if bad:
        shown = ", ".join(f"line {lines[i]} {cells[i]!r}" for i in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        warnings.append(f"{name}: not a number at {shown}{more}; read as NaN")
    return out

