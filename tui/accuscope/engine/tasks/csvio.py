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
import itertools
import os
import re
from pathlib import Path

import numpy as np

from accuscope.engine.compare.columns import EXTRAS, KEY_OF, METRICS
from accuscope.engine.compare.fields import CSV_NAMES, CSV_PART, DETAIL, FIELD, HEAD, MSIT, RANKS
from accuscope.engine.compare.results import KIND, ResultTable
from accuscope.engine.sources.inputfile import require_regular
from accuscope.engine.sources.outputfile import atomic_file
from accuscope.engine.sources.tensor import SourceError

MSIT_COLUMNS, DETAIL_COLUMNS, RANK_COLUMNS = CSV_PART[MSIT], CSV_PART[DETAIL], CSV_PART[RANKS]
REQUIRED = tuple(FIELD[k].csv for k in ("npu_op", "golden_op", "tensor"))
_OPTIONAL_TAIL = {name for name, _ in MSIT_COLUMNS + DETAIL_COLUMNS + RANK_COLUMNS} | {csv for csv, _ in EXTRAS}
_YES = {"YES", "Yes", "yes", "TRUE", "True", "true", "1", " YES"}
_MISSING = {"", "-", "nan", "NaN", "NAN", "None", "none", "N/A", "n/a", "null"}
_BY_NAME = {**CSV_NAMES, **KEY_OF}
# Spreadsheets (Excel, LibreOffice, WPS) run a cell that starts with = + - @ (or a tab or CR) as a
# formula: an op named `=cmd|'/c calc'!A1` would be live code in a result CSV opened there. Such
# a text cell is written with a ' before it (the OWASP rule: a spreadsheet shows it as text) and
# quoted; a name that itself starts with ' and then one of them gets one more '. The reader takes
# exactly one ' off a cell starting with ' and one of them: the names come back as they were. A
# plain number (-0.5, +1e-3) is no formula and stays as it is.
_FORMULA_CHARS = "=+-@\t\r"
_FORMULA = re.compile(f"'*[{re.escape(_FORMULA_CHARS)}]")
_NEUTRALISED = re.compile(f"'+[{re.escape(_FORMULA_CHARS)}]")
# the digits before a point and after it are told apart by the point (`\d+\.?\d*` split a run of digits
# each possible way before failing: a 200 KB cell of digits and a letter took minutes)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STARTS = frozenset(_FORMULA_CHARS + "'")
_ANY_FORMULA = re.compile(f"\x00'*[{re.escape(_FORMULA_CHARS)}]")  # in "\x00" + the values joined by "\x00"


def formula_safe(text: str) -> str:
    """A text cell as it is written to a CSV: `=1+1` -> `'=1+1` (see _FORMULA_CHARS); other text as it is."""
    if text[:1] in _STARTS and _FORMULA.match(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def formula_text(cell: str) -> str:
    """The text a CSV cell holds: formula_safe undone (one leading ' off `'=1+1`, `''-x`)."""
    return cell[1:] if cell[:1] == "'" and _NEUTRALISED.match(cell) else cell


def formula_rows(values: list) -> list[int]:
    """Positions of the str values that formula_safe changes (one pass in C when there are none)."""
    try:
        if not _ANY_FORMULA.search("\x00" + "\x00".join(values)):
            return []
    except TypeError:  # not all text (a plugin's numbers): look at each
        pass
    return [r for r, v in enumerate(values) if type(v) is str and v[:1] in _STARTS and formula_safe(v) != v]


def formula_cells(row) -> set[int]:
    """Positions of the str cells of `row` that formula_safe changes."""
    return {i for i, v in enumerate(row) if type(v) is str and v[:1] in _STARTS and formula_safe(v) != v}


def write_rows(f, writer, rows, unsafe: dict[int, set[int]]) -> None:
    """`writer.writerows(rows)`, except that the cells `unsafe` names (row number -> positions) are
    written formula_safe and quoted (the rest of such a row as the csv module writes it)."""
    rows = iter(rows)
    at = 0
    for r in sorted(unsafe):
        writer.writerows(itertools.islice(rows, r - at))
        row = next(rows)
        f.write(",".join(_quoted(formula_safe(v)) if i in unsafe[r] else _field(v) for i, v in enumerate(row)))
        f.write("\n")
        at = r + 1
    writer.writerows(rows)


def write_columns(f, columns: list[list], unsafe: dict[int, set[int]]) -> None:
    """`write_rows` of the rows of `columns` (each a list of one column's cells), the same bytes, made column
    by column: a column of text that holds nothing csv.writer quotes (most: numbers, names) is joined
    as it is, any other cell by _field; the rows `unsafe` names as write_rows writes them. 20,000 rows
    of 40 columns: 3 us a row instead of csv.writer's 16."""
    ready = []
    for column in columns:
        try:
            plain = not _quotes_in("".join(column))
        except TypeError:  # not all text (a plugin's numbers)
            plain = False
        ready.append(column if plain else [_field(v) for v in column])
    lines = list(map(",".join, zip(*ready)))
    if len(ready) == 1:  # a row of one empty cell: "" (an empty line would be no row)
        lines = [line or '""' for line in lines]
    for r, at in unsafe.items():
        lines[r] = ",".join(_quoted(formula_safe(v)) if i in at else _field(v) for i, v in enumerate(c[r] for c in columns))
    if lines:
        f.write("\n".join(lines))
        f.write("\n")


def _csv_quotes() -> str:
    """The characters of ',"\r\n' for which csv.writer (QUOTE_MINIMAL, lineterminator "\n") quotes a cell
    (not "\r" on Python 3.11): asked of the csv module itself."""
    found = ""
    for c in ',"\r\n':
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow([f"a{c}b", "x"])
        if out.getvalue().startswith('"'):
            found += c
    return found


_CSV_QUOTES = _csv_quotes()


def _quotes_in(text: str) -> bool:
    """Whether csv.writer quotes `text`: a character of _CSV_QUOTES in it, one str search each (memchr: a
    column's cells joined at a few ns a row, where a regex character class took 0.5 us; 2.5k instructions of
    a tiny tensor's row, bench_compare.py --case small)."""
    for c in _CSV_QUOTES:
        if c in text:
            return True
    return False


def _field(value) -> str:
    """One cell as csv.writer (QUOTE_MINIMAL, ',' and '\n') writes it."""
    text = value if type(value) is str else "" if value is None else str(value)
    return _quoted(text) if _quotes_in(text) else text


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


# ---- writing ------------------------------------------------------------------------------------
def result_header(table: ResultTable, with_op_sequence: bool = False, with_overflow: bool = False,
                  npu_is_npy: bool = False, golden_is_npy: bool = False,
                  msit_columns: bool = True) -> list[tuple[str, str]]:
    """(CSV header, column key) pairs in file order."""
    left_out = {"op_seq": not with_op_sequence, "npu_address": npu_is_npy, "golden_address": golden_is_npy,
                "overflow": not with_overflow}
    out = [(csv, key) for csv, key in CSV_PART[HEAD] if not left_out.get(key)]
    metrics = [(csv, key) for csv, key in METRICS if key in table.present]
    out += metrics or METRICS  # a table without data still gets msaccucmp's full header
    out += [(name, name) for name in table.custom]
    out.append((FIELD["reason"].csv, "reason"))
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
        nan = np.isnan(col)
        if nan.all():  # a metric not computed (a statistics triage: msaccucmp's ten)
            return ["NaN"] * len(col)
        values = col.tolist()  # "%.6f" is f"{v:.6f}"; one format of the whole column, 40% less than one a cell
        cells = ("%.6f\n" * len(values) % tuple(values)).split("\n")[:-1]
        for i in np.flatnonzero(nan).tolist():
            cells[i] = "NaN"
        return cells
    if kind == "bool":
        return ["YES" if v else "NO" for v in col.tolist()]
    if kind == "int":
        return [str(v) if v >= 0 or key == "index" else "NaN" for v in col.tolist()]
    return col.tolist()


def write_result_csv(table: ResultTable, path: str | os.PathLike, with_op_sequence: bool = False,
                     with_overflow: bool = False, npu_is_npy: bool = False, golden_is_npy: bool = False,
                     msit_columns: bool = True) -> Path:
    """Write the result CSV atomically (a fresh file in the same folder, then renamed over `path`).
    Text cells a spreadsheet would run as a formula are written neutralised (see formula_safe)."""
    columns = result_header(table, with_op_sequence, with_overflow, npu_is_npy, golden_is_npy,
                            msit_columns)
    path = Path(path)
    cells = [_cells(table, key) for _, key in columns]
    unsafe: dict[int, set[int]] = {}
    for pos, (_, key) in enumerate(columns):
        if KIND.get(key, "text") == "text":
            for r in formula_rows(cells[pos]):
                unsafe.setdefault(r, set()).add(pos)
    header = [name for name, _ in columns]  # a plugin's metric names too
    with atomic_file(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        write_rows(f, writer, [header], {0: formula_cells(header)} if formula_cells(header) else {})
        write_columns(f, cells, unsafe)
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
    quoted = "'" in text  # else no cell was neutralised (formula_safe): nothing to undo
    grid = np.array(rows, dtype=object) if rows else np.empty((0, len(header)), dtype=object)
    columns, custom = {}, []
    for pos, key in enumerate(keys):
        if key is None or key in columns:
            continue
        if key.startswith("custom:"):
            key = key[len("custom:"):]
            custom.append(key)
        columns[key] = _parse(grid[:, pos], KIND.get(key, "text"), header[pos], lines, warnings, quoted)
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
            row = [formula_text(c.strip().lstrip("\ufeff")) for c in row]
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
    rows: list[list[str]] | None
    lines: range | list[int] | None
    try:
        rows = list(reader)  # the fast path; line numbers follow unless a field spans lines
        lines = range(first_line, first_line + len(rows))
        if first_line - 1 + len(rows) != reader.line_num:
            lines = None
    except csv.Error:
        rows, lines = None, None
    if rows is None or lines is None:
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


def _parse(cells: np.ndarray, kind: str, name: str, lines: list[int], warnings: list[str],
           quoted: bool = True):
    """One column of str cells (an object array) as the column kind needs; text cells with
    formula_safe undone (`quoted`: some cell may hold a ')."""
    if kind == "text":
        if not quoted:
            return cells.copy()
        out = np.empty(len(cells), dtype=object)
        out[:] = [formula_text(c) if c[:1] == "'" else c for c in cells.tolist()]
        return out
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

