"""The op table's columns, apart from the widget that draws them (optable.OperatorTable): which
columns a table shows and how wide (`measure` the longest text of each, `column_specs`), where each
sits in a line (`place`: the sticky ones, the divider, the scrolled ones) and the text of each cell
(`cell`, with the row's marks). Plain functions of the engine's ResultTable and the judged rows'
`Flags`: the widget keeps the state (the table, its view, the column cursor) and the drawing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..engine.compare.columns import METRIC, TABLE_ORDER, TABLE_TAIL
from ..engine.compare.judgement import RowState
from ..engine.compare.results import KIND, ResultTable
from ..engine.compare.textcodes import PAGE
from ..engine.compare.thresholds import Thresholds
from . import formatting as fmt

LABELS = {"index": "#", "op_seq": "seq", "npu_op": "NPU op", "golden_op": "golden op",
          "slot": "io", "overflow": "ovf"}
MARK_FAIL, MARK_INVALID, MARK_EXEMPT = "✗", "?", "·"
NUMBER_WIDTH = 9
TEXT_MEASURED = ("npu_op", "type", "golden_op", "shape", "reason", "std", "overflow", "param")
MEASURED = (*TEXT_MEASURED, "npu_dtype", "golden_dtype", "op_seq", "step", "rank", "index")  # measure's columns
CAPS = {"type": 14, "golden_op": 40, "shape": 18, "reason": 60, "overflow": 8,
        "custom": 14, "npu_op": 100, "param": 12}
DIVIDER = "│"


@dataclass
class Column:
    key: str  # table column key, plugin column name, or one of mark / slot / dtype
    label: str
    width: int
    right: bool = False
    sticky: bool = False
    sort_key: str | None = None  # table column the sort keys act on; None: not sortable
    offset: int = 0  # x of the cell: in the line for sticky columns, in the scrolled part otherwise


@dataclass(frozen=True)
class Flags:
    """The judged rows' marks the cells show: failing, exempt, not compared, and per threshold key the
    rows breaking it with the direction its numbers are rounded in (-1: fails below)."""

    fail: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    exempt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    invalid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    device_only: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # not compared, nothing wrong
    broken: dict[str, tuple[np.ndarray, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, state: RowState, thresholds: Thresholds) -> Flags:
        return cls(state.fail, state.exempt, state.not_compared & ~state.device_only, state.device_only,
                   {t.key: (state.broken[t.key], -1 if t.op == "<" else 1) for t in thresholds.items})


def measured(t: ResultTable) -> dict[str, int]:
    """`measure` of the whole table, kept with it (the measured columns' arrays unchanged): a worker
    that read the table calls it, so the app's thread does not (seconds for 1M rows); do not modify."""
    def whole(*_) -> dict[str, int]:
        lengths: dict[str, int] = {}
        measure(t, lengths)
        return lengths
    return cast("dict[str, int]", t.cached("lengths", (*MEASURED, *t.custom), whole))


def measure(t: ResultTable, lengths: dict[str, int], done: int = 0) -> None:
    """Update `lengths`, the longest text per text column (and the widest number of each counted
    column), with rows `done` on of `t` (0: all of them, each column's distinct values through its
    codes where it has them stored)."""
    for key in (*TEXT_MEASURED, *t.custom):  # a column's stored codes give its distinct values; else page by page, in C
        paged = not done and hasattr(t.columns[key], "encoded")  # a columnar task's: codes stored
        values = t.codes(key).values.tolist() if paged else None
        longest = max(map(len, values), default=0) if values is not None else \
            max((max(map(len, page), default=0) for page in pages(t.columns[key], done)), default=0)
        lengths[key] = max(lengths.get(key, 0), longest)
    pairs: set = set()
    differs = False
    for npu, golden, npu_op, golden_op in zip(*(pages(t.columns[k], done) for k in (
            "npu_dtype", "golden_dtype", "npu_op", "golden_op"))):
        pairs.update(zip(npu, golden))
        differs = differs or npu_op != golden_op
    lengths["dtype"] = max([lengths.get("dtype", 0)] + [len(fmt.dtypes(a, b)) for a, b in pairs])
    lengths["golden_differs"] = int(lengths.get("golden_differs", 0) or differs)
    seq = t.columns["op_seq"][done:]
    lengths["op_seq"] = max(lengths.get("op_seq", 0), int(seq.max()) if len(seq) else -1)
    for key in ("step", "rank"):  # a multi-rank task's rows
        part = t.columns[key][done:]
        lengths[key] = max(lengths.get(key, -1), int(part.max()) if len(part) else -1)
    lengths["index"] = int(t.columns["index"].max()) if len(t) else 0


def column_specs(t: ResultTable, lengths: dict[str, int], lead: tuple[str, ...] = ()) -> list[Column]:
    """The columns to show of `t` (with the app's columns), sized by `measure`'s `lengths`, without
    offsets; the name column gets its width in `place`. `lead`: app columns shown first right of the
    divider (a chain's stage group), the rest after the table's metrics."""
    cols = [Column("mark", "", 1, sticky=True),
            Column("index", "#", max(2, len(str(lengths.get("index", 0)))), True, True, "index"),
            Column("npu_op", "NPU op", max(6, min(lengths.get("npu_op", 0), CAPS["npu_op"])),
                   sticky=True, sort_key="npu_op")]
    lead = tuple(name for name in lead if name in t.custom)
    cols += [_custom(name, lengths) for name in lead]
    if lengths.get("op_seq", -1) >= 0:
        cols.append(Column("op_seq", "seq", max(3, len(str(lengths["op_seq"]))), True, sort_key="op_seq"))
    for key in ("step", "rank"):
        if lengths.get(key, -1) >= 0:
            cols.append(Column(key, key, max(4, len(str(lengths[key]))), True, sort_key=key))
    if lengths.get("type", 0):
        cols.append(Column("type", "type", max(4, min(lengths["type"], CAPS["type"])), sort_key="type"))
    cols.append(Column("slot", "io", max(5, min(lengths.get("param", 0), CAPS["param"])), sort_key="io"))
    present = set(t.metric_keys) | {k for k in t.present if METRIC[k].kind == "text"}
    for m in (METRIC[k] for k in TABLE_ORDER if k in present):
        if m.kind == "text":  # sized to the content (when measured), at most its width
            width = max(len(m.title), min(lengths[m.key], m.width)) if m.key in lengths else m.width
            cols.append(Column(m.key, m.title, width, sort_key=m.key))
        else:
            cols.append(Column(m.key, m.title, m.width, True, sort_key=m.key))
    cols += [_custom(name, lengths) for name in t.custom if name not in lead]
    for m in (METRIC[k] for k in TABLE_TAIL if k in t.present):
        cols.append(Column(m.key, m.title, m.width, True, sort_key=m.key))
    if lengths.get("shape", 0):
        cols.append(Column("shape", "shape", max(5, min(lengths["shape"], CAPS["shape"])), sort_key="shape"))
    if lengths.get("dtype", 0):
        cols.append(Column("dtype", "dtype", max(5, lengths["dtype"]), sort_key="npu_dtype"))
    if lengths.get("golden_differs"):
        cols.append(Column("golden_op", "golden op", max(9, min(lengths.get("golden_op", 0),
                                                                CAPS["golden_op"])), sort_key="golden_op"))
    if lengths.get("overflow", 0):
        cols.append(Column("overflow", "ovf", max(3, min(lengths["overflow"], CAPS["overflow"])),
                           sort_key="overflow"))
    if lengths.get("reason", 0):
        cols.append(Column("reason", "reason", max(6, min(lengths["reason"], CAPS["reason"])),
                           sort_key="reason"))
    return cols


def _custom(name: str, lengths: dict[str, int]) -> Column:
    """A plugin's or the app's column, sized to its values (numbers right-aligned)."""
    return Column(name, name, max(len(name), min(max(lengths.get(name, 0), NUMBER_WIDTH), CAPS["custom"])), True,
                  sort_key=name)


def place(cols: list[Column], width: int) -> tuple[int, int]:
    """Set the columns' offsets for a line `width` cells wide (the name column capped when not all
    fit); returns the width of the sticky part (with the divider) and of the scrolled part."""
    sticky = [c for c in cols if c.sticky]
    scrolled = [c for c in cols if not c.sticky]
    scroll_width = sum(c.width + 1 for c in scrolled)
    other = sum(c.width + 1 for c in sticky if c.key != "npu_op") + len(DIVIDER)
    name = next(c for c in sticky if c.key == "npu_op")
    if other + name.width + 1 + scroll_width > width:  # it does not all fit: cap the name
        cap = max(12, int((width - other) * 0.35))
        name.width = min(name.width, cap)
    x = 0
    for c in sticky:
        c.offset = x
        x += c.width + 1
    sticky_width = x + len(DIVIDER)
    x = 0
    for c in scrolled:
        c.offset = x
        x += c.width + 1
    return sticky_width, x


def cell(column: Column, row: int, cols: dict, flags: Flags) -> tuple[str, bool]:
    """(text, breaks its threshold) of one cell: `column` of row `row` of the table's `cols`."""
    key, width = column.key, column.width
    if key == "mark":
        if flags.fail[row]:
            return MARK_FAIL, False
        if flags.invalid[row]:
            return MARK_INVALID, False
        return (MARK_EXEMPT if flags.exempt[row] else " "), False
    if key == "npu_op":
        return fmt.fit(cols["npu_op"][row], width, keep="end"), False
    if key == "slot":
        return fmt.fit(fmt.slot(cols["tensor"][row], cols["io"][row], cols["param"][row]), width), False
    if key == "dtype":
        return fmt.dtypes(cols["npu_dtype"][row], cols["golden_dtype"][row]), False
    if key == "shape":
        return fmt.shape(cols["shape"][row]), False
    kind = KIND.get(key, "custom")
    value = cols[key][row]
    if kind == "float":
        broken = flags.broken.get(key)
        if broken is not None and broken[0][row]:
            return fmt.number(float(value), width, broken[1]), True
        return fmt.number(float(value), width), False
    if kind == "int":
        broken = flags.broken.get(key)
        return fmt.integer(int(value)), bool(broken is not None and broken[0][row])
    if kind == "custom":
        try:
            return fmt.number(float(value), width), False
        except (TypeError, ValueError):
            return value, False
    return value, False


def pages(column, start: int):
    """A text column's rows from `start` as lists of str, PAGE rows at a time (a paged column is
    never held whole as Python strings)."""
    for lo in range(start, len(column), PAGE):
        yield column[lo:lo + PAGE].tolist()
