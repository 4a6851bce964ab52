"""The comparison result as numpy columns, and the view operations the TUI needs.

One row per compared tensor. Columns are equal-length numpy arrays, so sorting, filtering and
searching 50k rows are a few vectorized passes; the TUI keeps a view (an int array of row numbers)
and renders only the visible lines.

Text columns are numpy object arrays of `str` (or a columnar task's PagedText): measured at 50k
rows they are built from Python lists in about 2 ms (fixed-width unicode: 25 ms). Whole-column text
work (case-insensitive filters, search, sort by text) goes through the column's dictionary encoding
(textcodes.TextCodes: int codes into the distinct values), built once per column array and cached:
the distinct values are lowercased, compared and searched, the rows reached by a numpy take.
"""
from __future__ import annotations

import ast
import io
import math
import operator
import tokenize
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar, cast

import numpy as np

from accuscope.engine.compare.columns import CSV_OF, FLOAT_METRICS, METRIC_TABLE, NUMERIC_METRICS
from accuscope.engine.compare.fields import CSV_NAMES, FIELD_TABLE
from accuscope.engine.compare.pair import DEVICE_ONLY
from accuscope.engine.compare.textcodes import TextCodes, encode
from accuscope.engine.sources.names import parse_tensor_name

# (key, kind) in display order (fields.py's records around columns.py's); kind: float, int, bool, text
COLUMNS: list[tuple[str, str]] = (
    [(f.key, f.kind) for f in FIELD_TABLE if not f.after_metrics]
    + [(m.key, m.kind) for m in METRIC_TABLE]
    + [(f.key, f.kind) for f in FIELD_TABLE if f.after_metrics]
)
KIND = dict(COLUMNS)
DEFAULTS = {"float": math.nan, "int": -1, "bool": False, "text": ""}
DEFAULT_OF = {key: DEFAULTS[kind] for key, kind in COLUMNS}
DEFAULT_OF.update({f.key: f.default for f in FIELD_TABLE if f.default is not None})
DTYPE = {"float": np.float64, "int": np.int64, "bool": np.bool_, "text": object}
# Metric columns that may be absent (a subset of algorithms, a foreign CSV): tracked in `present`.
METRIC_COLUMNS = [m.key for m in METRIC_TABLE]
# Numeric metrics in display order (the ten without std, then the error-ratio extras).
NUMERIC_ORDER = FLOAT_METRICS
ALIASES = {"name": "npu_op", "op": "npu_op", "golden": "golden_op"}
SEARCHED = ("npu_op", "golden_op", "type", "tensor")
# Integer columns where -1 means "unknown": they sort last and never match a comparison.
_INT_MISSING = {f.key for f in FIELD_TABLE if f.unknown_is_minus_one} | {m.key for m in METRIC_TABLE if m.kind == "int"}
# Columns that hold the judgement of the others (judgement.RowState, judgement.apply): setting them is
# no change of the table's data, so it keeps what was derived from the table (the RowState itself).
JUDGED = ("fail", "tpu_verdict")


def text_array(values: Iterable) -> np.ndarray:
    """An object array of str from any iterable (None becomes "", other values str())."""
    values = [v if type(v) is str else ("" if v is None else str(v)) for v in values]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _column(values, kind: str) -> np.ndarray:
    if kind == "text":
        if isinstance(values, np.ndarray) and values.dtype == object:
            return values
        return text_array(values)
    try:
        return np.asarray(values, dtype=DTYPE[kind])
    except (TypeError, ValueError):
        if kind != "float":
            raise
        return np.array([math.nan if v is None or v == "" else float(v) for v in values])


def _filled(kind: str, default, n: int) -> np.ndarray:
    if kind == "text":
        out = np.empty(n, dtype=object)
        out[:] = default
        return out
    return np.full(n, default, dtype=DTYPE[kind])


def _lower(col: np.ndarray) -> np.ndarray:
    """Lowercased copy of a text column, in one string operation (5x faster than per element)."""
    values = col.tolist()
    parts = "\x1f".join(values).lower().split("\x1f")
    if len(parts) != len(values):  # empty column, or a value held the separator
        parts = [s.lower() for s in values]
    return text_array(parts)


def _numbers(col: np.ndarray) -> np.ndarray:
    """Plugin metric cells as floats where they parse, NaN elsewhere."""
    out = np.full(len(col), math.nan)
    for i, s in enumerate(col.tolist()):
        try:
            out[i] = float(s)
        except (TypeError, ValueError):
            pass
    return out


def _ranks(lower: np.ndarray) -> np.ndarray:
    """Dense rank of each string (equal strings share a rank), for sorting by text."""
    order = np.argsort(lower, kind="stable")
    ranks = np.empty(len(lower), dtype=np.int64)
    if len(lower):
        s = lower[order]
        ranks[order] = np.concatenate(([0], np.cumsum(s[1:] != s[:-1])))
    return ranks


def row_columns(rows: Sequence[dict], custom: Sequence[str] = ()) -> dict[str, list]:
    """The columns of one dict per row: every column key (or plugin column name) any row has, a row
    without it its default; keys that name no column are left out."""
    keys: set[str] = set()
    for r in rows:
        keys.update(r)
    wanted = [k for k in keys if k in KIND or k in custom]
    defaults = {k: DEFAULT_OF.get(k, "") for k in wanted}
    if len(wanted) > 1:  # each row's values in one call, the columns by one transposition (3x the gets)
        get = operator.itemgetter(*wanted)
        values = []
        for r in rows:
            try:
                values.append(get(r))
            except KeyError:  # a row without some columns (not compared): their defaults
                values.append(get({**defaults, **r}))
        return dict(zip(wanted, map(list, zip(*values))))
    return {k: [r.get(k, defaults[k]) for r in rows] for k in wanted}


_T = TypeVar("_T")


class ResultTable:
    """Columns as numpy arrays (`columns[key]`), plus the names of plugin metric columns."""

    def __init__(self, columns: dict[str, np.ndarray], custom: Sequence[str] = (),
                 present: Iterable[str] = ()):
        self.columns = columns
        self.custom = list(custom)
        self.present = set(present)  # metric columns that hold data
        self._n = len(columns["index"])
        self._buf: dict[str, np.ndarray] = {}  # grown capacity for append_rows
        self._cache: dict = {}
        self.version = 0  # grows with every change of the data: rows appended, a column set
        self._derived: dict = {}  # what derived() built for this version
        self._derived_version = 0

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_columns(cls, columns: dict, custom: Sequence[str] = (), present: Iterable[str] | None = None,
                     start: int = 0) -> ResultTable:
        """Build from column sequences; missing columns get their defaults.

        `index` defaults to start, start+1, ...; `io` is taken from the tensor name where empty;
        `is_npu_only` always follows golden_op == "*".
        """
        lengths = {len(v) for k, v in columns.items() if k in KIND or k in custom}
        if len(lengths) > 1:
            raise ValueError(f"columns differ in length: {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        cols = {}
        for key, kind in COLUMNS:
            given = columns.get(key)
            cols[key] = _filled(kind, DEFAULT_OF[key], n) if given is None else _column(given, kind)
        if "index" not in columns:
            cols["index"] = np.arange(start, start + n, dtype=np.int64)
        if "io" not in columns or (cols["io"] == "").any():
            empty = cols["io"] == ""
            derived = text_array(named.io if (named := parse_tensor_name(t)) else "" for t in cols["tensor"].tolist())
            cols["io"] = np.where(empty, derived, cols["io"]) if n else cols["io"]
        cols["is_npu_only"] = cols["golden_op"] == DEVICE_ONLY if n else np.zeros(0, dtype=bool)
        for name in custom:
            given = columns.get(name)
            cols[name] = _filled("text", "", n) if given is None else _column(given, "text")
        if present is None:
            present = [k for k in METRIC_COLUMNS if k in columns]
        return cls(cols, custom, present)

    @classmethod
    def from_rows(cls, rows: Sequence[dict], custom: Sequence[str] = (), start: int = 0) -> ResultTable:
        """One dict per row, keyed by column key (or plugin column name); absent keys get defaults."""
        columns = row_columns(rows, custom)
        if not columns:
            columns["tensor"] = [""] * len(rows)
        return cls.from_columns(columns, custom, start=start)

    @classmethod
    def concat(cls, tables: Sequence[ResultTable]) -> ResultTable:
        """The rows of several tables (ranks of one task) one after the other, re-indexed from 0."""
        if not tables:
            return cls.empty()
        custom = list(dict.fromkeys(c for t in tables for c in t.custom))
        columns = {}
        for key in list(KIND) + custom:
            parts = [t.columns[key] if key in t.columns else _filled("text", "", len(t)) for t in tables]
            columns[key] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        columns["index"] = np.arange(sum(len(t) for t in tables), dtype=np.int64)
        return cls.from_columns(columns, custom, set().union(*(t.present for t in tables)))

    @classmethod
    def empty(cls, custom: Sequence[str] = ()) -> ResultTable:
        return cls.from_columns({}, custom)

    def append_rows(self, rows: Sequence[dict]) -> None:
        """Add rows while a comparison runs; buffers double, so n appends cost O(n) copies."""
        if not rows:
            return
        new = ResultTable.from_rows(rows, self.custom, start=self._n)
        n, need = self._n, self._n + len(new)
        for key, col in self.columns.items():
            buf = self._buf.get(key)
            if buf is None or not (col is buf or col.base is buf) or len(buf) < need:
                grown = np.empty(max(need, 2 * n, 16), dtype=col.dtype)
                grown[:n] = col
                buf = self._buf[key] = grown
            buf[n:need] = new.columns[key]
            self.columns[key] = buf[:need]
        self._n = need
        self.present |= new.present
        self.version += 1

    def set_column(self, name: str, values) -> None:
        """Replace a column, or add one: a name that is not a built-in column becomes a plugin-style
        text column (filters, sort and the CSV see it), as the advisor's origin and iso_cos."""
        kind = KIND.get(name, "text")
        column = _column(values, kind)
        if len(column) != self._n:
            raise ValueError(f"column {name!r} holds {len(column):,} values, not {self._n:,}")
        self.columns[name] = column
        if name not in KIND and name not in self.custom:
            self.custom.append(name)
        if name not in JUDGED:
            self.version += 1

    def derived(self, key: tuple, build: Callable):
        """build() of the whole table, kept until its data change (`version`); `key` names what
        else it depends on, e.g. the thresholds for the table's RowState."""
        if self._derived_version != self.version:
            self._derived, self._derived_version = {}, self.version
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]

    # ---- access -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def row(self, i: int) -> dict:
        """Row i as plain Python values, keyed like from_rows expects."""
        out = {}
        for key, col in self.columns.items():
            value = col[i]
            out[key] = value.item() if isinstance(value, np.generic) else value
        return out

    @property
    def metric_keys(self) -> list[str]:
        """Numeric metric keys that hold data, in display order (plugin columns not included)."""
        return [k for k in NUMERIC_ORDER if k in self.present]

    def resolve(self, name: str, position: int | None = None) -> str:
        """Column key for a short key, CSV name or alias, case-insensitive; FilterError if unknown."""
        spellings = self._spellings()
        key = spellings.get(name.lower())
        if key is not None:
            return key[0]
        import difflib  # only to suggest a spelling
        close = difflib.get_close_matches(name.lower(), list(spellings), n=1, cutoff=0.6)
        hint = f"; did you mean {spellings[close[0]][1]}?" if close else ""
        raise FilterError(f"unknown column '{name}'{hint}", position)

    def _spellings(self) -> dict[str, tuple[str, str]]:
        """lowercase spelling -> (column key, spelling to suggest)."""
        out: dict[str, tuple[str, str]] = {}
        pairs = [(k, k) for k in self.columns] + [(csv, k) for k, csv in CSV_OF.items()] \
            + [(csv, k) for csv, k in CSV_NAMES.items()] + list(ALIASES.items())
        for spelled, key in pairs:
            for form in (spelled, _identifier(spelled)):
                out.setdefault(form.lower(), (key, form))
        return out

    def cached(self, tag: str, deps: tuple[str, ...], build: Callable[..., _T]) -> _T:
        """A value derived from columns `deps`, rebuilt only when one of those arrays is replaced."""
        arrays = tuple(self.columns[k] for k in deps)
        hit = self._cache.get((tag, deps))
        if hit is not None and all(a is b for a, b in zip(hit[0], arrays)):
            return hit[1]
        value = build(*arrays)
        self._cache[(tag, deps)] = (arrays, value)
        return value

    def codes(self, key: str) -> TextCodes:
        """A text column's dictionary encoding, built once per column array."""
        return self.cached("codes", (key,), encode)

    def lower(self, key: str) -> TextCodes:
        """The column's codes with its distinct values lowercased (case-insensitive text work)."""
        return self.cached("lower", (key,), lambda _: (t := self.codes(key))._replace(values=_lower(t.values)))

    def _text_ranks(self, key: str) -> np.ndarray:
        """Each row's dense rank by its lowercased text (equal texts share a rank)."""
        return self.cached("rank", (key,), lambda _: (t := self.lower(key)).take(_ranks(t.values)))

    def numbers(self, key: str) -> np.ndarray:
        """A column as float64 with NaN where there is no number (text, plugin text, -1 unknowns)."""
        kind = KIND.get(key, "custom")
        if kind == "float":
            return self.columns[key]
        if kind == "custom":
            return self.cached("num", (key,), lambda _: (t := self.codes(key)).take(_numbers(t.values)))
        if kind == "int" and key in _INT_MISSING:
            return self.cached("num", (key,), lambda c: np.where(c < 0, math.nan, c.astype(np.float64)))
        return self.columns[key].astype(np.float64)

    def any_nan(self) -> np.ndarray:
        """Rows where any computed numeric metric is NaN (the filter alias `nan`)."""
        keys = [k for k in NUMERIC_METRICS if k in self.present]
        out = np.zeros(self._n, dtype=bool)
        for k in keys:
            out |= np.isnan(self.columns[k])
        return out

    # ---- view operations ----------------------------------------------------------------------
    def _view(self, rows) -> np.ndarray:
        return np.arange(self._n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)

    def sort_order(self, key: str, descending: bool = False, rows=None) -> np.ndarray:
        """Row numbers of `rows` (default: all) sorted by a column; stable; missing values last.

        Missing = NaN, -1 for op_seq and the counts, "" for text. Text sorts case-insensitively;
        plugin columns sort numbers first, then text.
        """
        rows = self._view(rows)
        key = self.resolve(key)
        group, value = self._sort_key(key)
        value = value[rows]
        if descending:
            value = -value
        order = np.argsort(value, kind="stable")
        order = order[np.argsort(group[rows][order], kind="stable")]
        return rows[order]

    def _sort_key(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(group, value): rows sort by group first (0 = has a value), then value."""
        kind = KIND.get(key, "custom")
        col = self.columns[key]
        if kind == "text":
            t = self.codes(key)
            return t.where(t.values == "").astype(np.int8), self._text_ranks(key)
        if kind == "bool":
            return np.zeros(len(col), dtype=np.int8), col.astype(np.int64)
        if kind == "custom":
            num = self.numbers(key)
            is_num = ~np.isnan(num)
            t = self.codes(key)
            group = np.where(is_num, 0, np.where(t.where(t.values == ""), 2, 1)).astype(np.int8)
            return group, np.where(is_num, num, self._text_ranks(key))
        value = self.numbers(key) if kind == "float" or key in _INT_MISSING else col
        missing = np.isnan(value) if value.dtype.kind == "f" else np.zeros(len(col), dtype=bool)
        return missing.astype(np.int8), np.where(missing, 0, value)

    def filter_mask(self, expression: str) -> np.ndarray:
        """Boolean mask over all rows for a filter expression (language: see _Filter); "" keeps all."""
        if not expression.strip():
            return np.ones(self._n, dtype=bool)
        return _Filter(self, expression).mask()

    def match_mask(self, text: str) -> np.ndarray:
        """Rows whose npu_op, golden_op, type or tensor contains `text`, case-insensitively."""
        needle = text.lower()
        out = np.zeros(self._n, dtype=bool)
        for key in SEARCHED:
            t = self.lower(key)
            out |= t.where([needle in s for s in t.values.tolist()])
        return out

    def search(self, text: str, rows, start: int, backwards: bool = False) -> int | None:
        """Position in the view of the next match after `start` (before it when backwards).

        Wraps around; `start` itself is checked last. Use start=-1 to begin at the top
        (start=len(rows) to begin at the bottom when backwards). None when nothing matches.
        """
        rows = self._view(rows)
        if not text or not len(rows):
            return None
        return _next_hit(np.flatnonzero(self.match_mask(text)[rows]), start, backwards)

    def next_failing(self, rows, start: int) -> int | None:
        """Position in the view of the failing row that comes next in execution order.

        The view may be sorted by anything: the answer is the failing row with the smallest row
        number above that of rows[start], wrapping to the first failing row. start=-1: the first.
        """
        rows = self._view(rows)
        failing = np.flatnonzero(self.columns["fail"][rows])
        if not len(failing):
            return None
        numbers = rows[failing]
        current = rows[start] if 0 <= start < len(rows) else -1
        later = numbers > current
        pick = np.argmin(np.where(later, numbers, np.iinfo(np.int64).max)) if later.any() \
            else np.argmin(numbers)
        return int(failing[pick])


def _next_hit(hits: np.ndarray, start: int, backwards: bool) -> int | None:
    if not len(hits):
        return None
    if backwards:
        k = np.searchsorted(hits, start, side="left") - 1
        return int(hits[k]) if k >= 0 else int(hits[-1])
    k = np.searchsorted(hits, start, side="right")
    return int(hits[k]) if k < len(hits) else int(hits[0])


def _identifier(name: str) -> str:
    """`rel_0.1%` -> `rel_0_1`: a spelling of every column that is a Python name."""
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    return out


class FilterError(ValueError):
    """A filter expression the user has to fix; `position` is the 0-based offset, or None."""

    def __init__(self, message: str, position: int | None = None):
        if position is not None:
            message = f"{message} (at column {position + 1})"
        super().__init__(message)
        self.position = position


# ---- filter expressions ---------------------------------------------------------------------------
# A small language read with Python's `ast` and evaluated column-wise with numpy (never eval):
#   cos < 0.99 and type == "Conv2D"      0.9 < cos < 0.99      "conv" in name      not fail
#   type in ("Conv2D", "MatMul")         isnan(kl) or nan      abs(max_abs) > 10 * mean_abs
#   under(type, "layers.1")              (a module path and everything under it: layers.1, layers.1.attn)
# Text compares case-insensitively; a comparison with a NaN / unknown cell is false (also !=).

_OPS = {ast.Lt: ("<", operator.lt), ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt),
        ast.GtE: (">=", operator.ge), ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne)}
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.Div: operator.truediv}
_KEYWORDS = {"and", "or", "not", "in", "true", "false"}
_HELP = 'filters use comparisons (cos < 0.99), and/or/not, "text" in column, isnan(), abs(), under()'
MAX_LENGTH = 4096  # characters of a filter: longer is refused (no one types more; a script can split it)
MAX_DEPTH = 64  # nesting levels of a filter (not, and/or, operators): deeper is refused
_TOO_DEEP = f"the filter nests too deeply (at most {MAX_DEPTH} levels of not, and/or and operators)"


def _depth(tree: ast.AST) -> int:
    """How deep the expression nests, counted without recursion."""
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


class _Val(NamedTuple):
    kind: str  # "num", "text", "bool", or "mixed" (plugin column: numbers where they parse)
    data: object  # array over all rows, or a scalar for a constant; for "mixed": (numbers, text)
    label: str  # as the user wrote it, for messages
    const: bool = False

    # `data` as its kind holds it (the filter reads each only where the kind says so)
    @property
    def num(self) -> float | np.ndarray:
        """A "num" or "bool" value: a number or bool, or an array over the rows."""
        return cast("float | np.ndarray", self.data)

    @property
    def text(self) -> str:
        """A "text" constant (lowercased)."""
        return cast(str, self.data)

    @property
    def codes(self) -> TextCodes:
        """A "text" column: its lowercased codes."""
        return cast(TextCodes, self.data)

    @property
    def mixed(self) -> tuple[np.ndarray, TextCodes]:
        """A "mixed" column: (its numbers, its lowercased codes)."""
        return cast("tuple[np.ndarray, TextCodes]", self.data)


class _Filter:
    def __init__(self, table: ResultTable, expression: str):
        self.table = table
        self.text = expression.replace("\n", " ").replace("\r", " ")
        self.utf8 = self.text.encode("utf-8", "surrogatepass")  # ast's offsets count its bytes
        self.keys: dict[str, str] = {}  # column name as written -> column key

    def mask(self) -> np.ndarray:
        try:
            tree = ast.parse(_normalize_keywords(self.text), mode="eval")
        except (RecursionError, MemoryError):
            raise FilterError(_TOO_DEEP) from None
        except SyntaxError as e:
            offset = e.offset or 0  # None: no position, read as the end
            at_end = not offset or offset > len(self.text.rstrip())
            position = len(self.text.rstrip()) if at_end else offset - 1
            for pair in ("&&", "||"):  # Python points at the second character
                position = self.text.find(pair) if pair in self.text else position
            raise FilterError(_syntax_message(self.text, e), position) from None
        if _depth(tree) > MAX_DEPTH:
            raise FilterError(_TOO_DEEP)
        if len(self.text) > MAX_LENGTH:  # parsed in linear time; evaluated, it costs a pass over the rows a term
            raise FilterError(f"the filter is {len(self.text):,} characters long; at most {MAX_LENGTH:,} are read "
                              "(filter on fewer, broader conditions, or on a column: \"conv\" in name)")
        data = self.condition(tree.body)
        return self.rows(data).copy()

    def rows(self, data) -> np.ndarray:
        """A condition as a mask over all rows (a constant such as `True` holds for every row)."""
        return np.broadcast_to(np.asarray(data, dtype=bool), (len(self.table),))

    def eval(self, node: ast.expr) -> _Val:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            raise FilterError(f"'{self.source(node)}' is not supported; {_HELP}", node.col_offset)
        return method(node)

    def source(self, node: ast.expr) -> str:
        """The text of `node` as the user wrote it: a slice of the one line (ast.get_source_segment
        splits the whole text again at every call: quadratic in the filter's length)."""
        end = getattr(node, "end_col_offset", None)
        if end is None:
            return type(node).__name__
        return self.utf8[node.col_offset:end].decode("utf-8", "replace") or type(node).__name__

    # -- leaves
    def eval_Constant(self, node: ast.Constant) -> _Val:
        v = node.value
        if isinstance(v, bool):
            return _Val("bool", v, repr(v), True)
        if isinstance(v, (int, float)):
            return _Val("num", float(v), self.source(node), True)
        if isinstance(v, str):
            return _Val("text", v.lower(), f'"{v}"', True)
        raise FilterError(f"'{self.source(node)}' is not a number or a text", node.col_offset)

    def eval_Name(self, node: ast.Name) -> _Val:
        name = node.id
        if name.lower() in ("true", "false"):
            return _Val("bool", name.lower() == "true", name, True)
        if name.lower() == "nan":
            return _Val("bool", self.table.any_nan(), name)
        key = self.keys.get(name)
        if key is None:  # resolved once per spelling (resolve lists every spelling of every column)
            key = self.keys[name] = self.table.resolve(name, node.col_offset)
        kind = KIND.get(key, "mixed")
        if kind == "bool":
            return _Val("bool", self.table.columns[key], name)
        if kind == "text":
            return _Val("text", self.table.lower(key), name)
        if kind == "mixed":
            return _Val("mixed", (self.table.numbers(key), self.table.lower(key)), name)
        return _Val("num", self.table.numbers(key), name)

    # -- operators
    def eval_BoolOp(self, node: ast.BoolOp) -> _Val:
        parts = [self.rows(self.condition(v)) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return _Val("bool", combine.reduce(parts) if len(parts) > 1 else parts[0], self.source(node))

    def eval_UnaryOp(self, node: ast.UnaryOp) -> _Val:
        if isinstance(node.op, ast.Not):
            return _Val("bool", np.logical_not(self.condition(node.operand)), self.source(node))
        value = self.number(node.operand)
        return _Val("num", -value.num if isinstance(node.op, ast.USub) else value.num,
                    self.source(node), value.const)

    def eval_BinOp(self, node: ast.BinOp) -> _Val:
        op = _ARITH.get(type(node.op))
        if op is None:
            raise FilterError(f"operator in '{self.source(node)}' is not supported; {_HELP}",
                              node.col_offset)
        left, right = self.number(node.left), self.number(node.right)
        with np.errstate(all="ignore"):
            return _Val("num", op(left.num, right.num), self.source(node), left.const and right.const)

    def eval_Call(self, node: ast.Call) -> _Val:
        if isinstance(node.func, ast.Attribute):
            return self.eval_Attribute(node.func)
        name = node.func.id.lower() if isinstance(node.func, ast.Name) else ""
        if name == "under" and len(node.args) == 2 and not node.keywords:
            return self.under(node)
        if name not in ("isnan", "abs") or len(node.args) != 1 or node.keywords:
            raise FilterError(f"'{self.source(node.func)}()' is not available; functions: isnan(column), "
                              'abs(value), under(column, "module.path")', node.col_offset)
        value = self.number(node.args[0])
        if name == "abs":
            return _Val("num", np.abs(value.num), self.source(node), value.const)
        return _Val("bool", np.isnan(value.num), self.source(node))

    def eval_Attribute(self, node: ast.Attribute) -> _Val:
        raise FilterError(f"'{self.source(node)}' is not supported; to look for text inside a column "
                          f'write "text" in column', node.col_offset)

    def eval_Compare(self, node: ast.Compare) -> _Val:
        result = None
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                part = self.contains(left_node, right_node)
                if isinstance(op, ast.NotIn):
                    part = np.logical_not(part)
            else:
                part = self.compare(self.eval(left_node), op, self.eval(right_node), left_node, right_node)
            result = part if result is None else np.logical_and(result, part)
            left_node = right_node
        return _Val("bool", result, self.source(node))

    # -- helpers
    def condition(self, node: ast.expr):
        value = self.eval(node)
        if value.kind != "bool":
            hint = f", e.g. {value.label} < 0.99" if value.kind == "num" and not value.const else ""
            raise FilterError(f"'{value.label}' is not a condition{hint}; {_HELP}", node.col_offset)
        return value.data

    def number(self, node: ast.expr) -> _Val:
        value = self.eval(node)
        if value.kind == "mixed":
            return _Val("num", value.mixed[0], value.label)
        if value.kind == "bool" and not value.const:
            return _Val("num", np.asarray(value.data, dtype=np.float64), value.label)
        if value.kind != "num":
            raise FilterError(f"{value.label} is not a number", node.col_offset)
        return value

    def compare(self, a: _Val, op: ast.cmpop, b: _Val, left: ast.expr, right: ast.expr):
        symbol, fn = _OPS[type(op)]
        at = right if b.const or not a.const else left  # point at the constant, else the left side
        if {a.kind, b.kind} == {"bool", "num"} and "nan" in (a.label.lower(), b.label.lower()):
            raise FilterError("nan means 'any metric is NaN'; for one column write isnan(cos)",
                              at.col_offset)
        if "mixed" in (a.kind, b.kind):
            as_text = "text" in (a.kind, b.kind) or a.kind == b.kind
            a, b = (_side(v, as_text) for v in (a, b))
        if (a.kind == "text") != (b.kind == "text"):
            raise FilterError(_mismatch(a, symbol, b), at.col_offset)
        a, b = (_Val("num", np.asarray(v.data, dtype=np.float64) if not v.const else float(v.num),
                     v.label, v.const) if v.kind == "bool" else v for v in (a, b))
        if a.kind == "num":
            with np.errstate(invalid="ignore"):
                out = fn(a.num, b.num)
                if symbol == "!=":
                    out = np.logical_and(out, ~np.isnan(a.num) & ~np.isnan(b.num))
            return out
        if a.const and b.const:
            return fn(a.text, b.text)
        if b.const:  # a text column against a text: compared on its distinct values
            return a.codes.where(fn(a.codes.values, b.text))
        if a.const:
            return b.codes.where(fn(a.text, b.codes.values))
        return np.asarray(fn(a.codes.take(a.codes.values), b.codes.take(b.codes.values)), dtype=bool)

    def under(self, node: ast.Call) -> _Val:
        """under(column, "layers.1"): rows whose dotted path is that one or lies under it."""
        column, path = self.eval(node.args[0]), self.eval(node.args[1])
        if column.kind == "mixed":
            column = _side(column, True)
        if column.kind != "text" or column.const or path.kind != "text" or not path.const:
            raise FilterError(f'under() takes a text column and a dotted path in quotes, e.g. under(type, '
                              f'"layers.1"); not {self.source(node)}', node.col_offset)
        prefix = path.text.strip(".")
        if not prefix:
            raise FilterError('under() needs a module path, e.g. under(type, "layers.1")', node.args[1].col_offset)
        codes = column.codes
        return _Val("bool", codes.where([is_under(s, prefix) for s in codes.values.tolist()]), self.source(node))

    def contains(self, left_node: ast.expr, right_node: ast.expr):
        if isinstance(right_node, (ast.Tuple, ast.List, ast.Set)):
            value = self.eval(left_node)
            options = [self.eval(e) for e in right_node.elts]
            parts = [self.rows(self.compare(value, ast.Eq(), o, left_node, e))
                     for o, e in zip(options, right_node.elts)]
            return np.logical_or.reduce(parts) if parts else False
        needle, column = self.eval(left_node), self.eval(right_node)
        if column.kind == "mixed":
            column = _side(column, True)
        if needle.kind != "text" or not needle.const or column.kind != "text" or column.const:
            raise FilterError(f"'in' looks for a text inside a text column, e.g. \"conv\" in name; "
                              f"not {needle.label} in {column.label}", left_node.col_offset)
        text, codes = needle.text, column.codes
        return codes.where([text in s for s in codes.values.tolist()])


def is_under(path: str, module: str) -> bool:
    """`path` is the dotted path `module` or one under it (`layers.1.attn` is under `layers.1`,
    `layers.10` is not)."""
    return path == module or path.startswith(module + ".")


def _side(value: _Val, as_text: bool) -> _Val:
    if value.kind != "mixed":
        return value
    return _Val("text" if as_text else "num", value.mixed[1 if as_text else 0], value.label)


def _mismatch(a: _Val, symbol: str, b: _Val) -> str:
    column, other = (b, a) if a.const else (a, b)
    if column.const:
        return f"cannot compare {a.label} with {b.label}: one is text, the other a number"
    if column.kind == "num":
        return f"{column.label} holds numbers; compare it with a number, not {other.label}"
    if column.kind == "bool":
        return f"{column.label} is true or false; write {column.label} or not {column.label}"
    example = other.label if other.const else "..."
    return f'{column.label} holds text; compare it with text in quotes, e.g. {column.label} {symbol} "{example}"'


def _normalize_keywords(text: str) -> str:
    """AND / Or / NOT -> and / or / not (same length, so error positions stay right)."""
    chars = list(text)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string.lower() in _KEYWORDS - {"true", "false"}:
                start, end = tok.start[1], tok.end[1]
                chars[start:end] = tok.string.lower()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return "".join(chars)


def _syntax_message(text: str, error: SyntaxError) -> str:
    stripped = text.rstrip()
    for op in ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", " and", " or", "not", " in"):
        if stripped.lower().endswith(op):
            return f"the filter is incomplete: '{op.strip()}' needs something after it"
    if "&&" in text or "||" in text:
        return "use 'and' / 'or' instead of && / ||"
    if "~" in text:
        return 'to look for text inside a column write "text" in column, e.g. "conv" in name'
    unquoted = "".join(part for k, part in enumerate(text.replace("'", '"').split('"')) if k % 2 == 0)
    if "=" in unquoted.replace("==", "").replace("!=", "").replace("<=", "").replace(">=", ""):
        return "use == to compare (a single = is not a comparison)"
    if "!" in unquoted.replace("!=", ""):
        return "use 'not' instead of !"
    if "never closed" in error.msg or "unmatched" in error.msg or "does not match" in error.msg:
        return f"unbalanced parentheses: {error.msg}"
    if "unterminated string" in error.msg:
        return "a quoted text is not closed"
    return f"cannot read the filter: {error.msg}"
