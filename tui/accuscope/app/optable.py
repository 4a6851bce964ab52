"""The operator table: one row per compared tensor, backed by the engine's numpy ResultTable.

A Line-API ScrollView: it keeps a *view* (an int array of table row numbers in display order) and
formats only the lines on screen, so 50,000 rows cost the same per frame as 50. Sorting is an
argsort, filtering a boolean mask and searching a vectorized match, all done by the engine.

Layout of a line (left to right):

    mark  #  name │ seq  type  io  cos  red  kl ... custom ... shape  dtype  golden  reason
    └─ sticky ────┘ └─ scrolls horizontally, following the column cursor ──────────────────┘

The mark column carries the row's state without colour: `✗` breaks a threshold, `?` could not be
compared (its reason is in the reason column), `·` exempt (layout-only op, network input,
device-only op); colour repeats it (fail red, invalid amber, exempt dim). Cells that break their
own threshold are bold on a red background.

Defaults: both input and output rows are shown (as MindStudio does; `i` cycles outputs only /
inputs only / both), and rows that could not be compared are shown with their reasons (`x` hides
them). The hosting screen shows the prompts for `/` (search) and `f` (filter) and calls
`search` / `set_filter`; this widget does not bind those keys.

Which columns show, their widths and offsets and each cell's text are opcolumns.py's; this module
holds the widget: its state (table, view, sort, filter, toggles, column cursor), keys and drawing.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from ..engine.compare import judgement
from ..engine.compare.columns import METRIC
from ..engine.compare.judgement import RowState
from ..engine.compare.results import FilterError, ResultTable
from ..engine.compare.thresholds import Thresholds
from . import formatting as fmt
from .cursorlist import CursorList
from .opcolumns import DIVIDER, LABELS, MARK_FAIL, Column, Flags, cell, column_specs, measure, measured, place

__all__ = ["OperatorTable", "FilterError", "IO_MODES"]

IO_MODES = ("both", "outputs", "inputs")
"""What `toggle_io` cycles through; "outputs" keeps rows whose io is not "input"."""


class _FromTable(Message):
    """A message an OperatorTable posts about itself."""

    def __init__(self, operator_table: OperatorTable) -> None:
        super().__init__()
        self.operator_table = operator_table

    @property
    def control(self) -> OperatorTable:
        return self.operator_table


class OperatorTable(CursorList):
    """Operator rows of a comparison result; renders only the visible lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "optable--header",
        "optable--header-cursor",
        "optable--cursor",
        "optable--fail",
        "optable--fail-cell",
        "optable--exempt",
        "optable--invalid",
        "optable--divider",
        "optable--empty",
    }
    """
    | Class | Description |
    | :- | :- |
    | `optable--header` | The header line. |
    | `optable--header-cursor` | Header cell of the column the sort keys act on. |
    | `optable--cursor` | The cursor row. |
    | `optable--fail` | A row that breaks a threshold (mark ✗). |
    | `optable--fail-cell` | A cell that breaks its threshold. |
    | `optable--exempt` | A row that never fails: TransData, Data, device-only (mark ·). |
    | `optable--invalid` | A row that could not be compared (mark ?). |
    | `optable--divider` | The line between the sticky columns and the scrolled ones. |
    | `optable--empty` | The message shown when no row is in the view. |
    """

    DEFAULT_CSS = """
    OperatorTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .optable--header { text-style: bold; background: $panel; color: $foreground; }
        & > .optable--header-cursor { text-style: bold underline; background: $accent-muted; }
        & > .optable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .optable--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .optable--fail { color: $error-lighten-2; }  /* stays red with 16 colours */
        & > .optable--fail-cell { color: $error-lighten-2; background: $error-muted; text-style: bold; }
        & > .optable--exempt { color: $text-muted; }
        & > .optable--invalid { color: $text-warning; }
        & > .optable--divider { color: $foreground-muted; }
        & > .optable--empty { color: $text-muted; text-style: italic; }
        &:nocolor > .optable--cursor { text-style: reverse bold; }
        &:nocolor > .optable--header-cursor { text-style: reverse bold; }
        &:nocolor > .optable--fail { color: $foreground; text-style: bold; }  /* never dimmer than passing */
        &:nocolor > .optable--fail-cell { color: $foreground; text-style: bold underline; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "column_left", "Column left", show=False, id="optable.column_left"),
        Binding("right,l", "column_right", "Column right", show=False, id="optable.column_right"),
        Binding("[", "sort(False)", "Sort ↑", key_display="[", id="optable.sort_ascending"),
        Binding("]", "sort(True)", "Sort ↓", key_display="]", id="optable.sort_descending"),
        Binding("!", "next_failing", "Next failing", key_display="!", id="optable.next_failing"),
        Binding("i", "toggle_io", "In/out", id="optable.toggle_io"),
        Binding("x", "toggle_invalid", "Rows not compared", id="optable.toggle_invalid"),
        Binding("n", "search_next(False)", "Next match", show=False, id="optable.search_next"),
        Binding("N", "search_next(True)", "Previous match", show=False, id="optable.search_previous"),
        Binding("enter", "select", "Detail", id="optable.select"),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | left, h / right, l | Move the column cursor (the column `[` / `]` sort by). |
    | [ / ] | Sort ascending / descending by the current column (`#` ascending: execution order). |
    | ! | Next failing row in execution order, wrapping. |
    | i | Cycle outputs+inputs / outputs only / inputs only. |
    | x | Hide / show rows that could not be compared. |
    | n / N | Next / previous match of the last search. |
    | enter | Post `Selected` for the cursor row. |
    """

    class Highlighted(_FromTable):
        """The cursor moved to another operator row (`row` is None when the view is empty)."""

        def __init__(self, operator_table: OperatorTable, row: int | None) -> None:
            super().__init__(operator_table)
            self.row = row

    class Selected(_FromTable):
        """Enter (or a click on the cursor row) on operator row `row`."""

        def __init__(self, operator_table: OperatorTable, row: int) -> None:
            super().__init__(operator_table)
            self.row = row

    class ViewChanged(_FromTable):
        """Rows, sort, filter or toggles changed: the status bar should show `status` again."""

        def __init__(self, operator_table: OperatorTable, status: str) -> None:
            super().__init__(operator_table)
            self.status = status

    empty_text: reactive[str] = reactive("no rows yet")
    """What an empty table says; the hosting screen knows why."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None,
                 disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._table = ResultTable.empty()  # the engine's table, as loaded
        self._extra: dict[str, np.ndarray] = {}  # the app's columns beside it (the advisor's origin, iso_cos)
        self._shown = self._table  # what the rows show, filter and sort: the table with the app's columns
        self._thresholds = Thresholds()
        self._base = np.zeros(0, dtype=np.int64)  # rows passing filter and toggles, in row order
        self._view = self._base  # _base in display order
        self._announced: int | None = None  # row of the last Highlighted message
        self._sort: tuple[str, bool] | None = None
        self._filter = ""
        self._io = 0  # index into IO_MODES
        self._show_invalid = True
        self._search = ""
        self._marks = Flags()  # the judged rows' fail / exempt / not compared, the cells breaking a threshold
        self._failing_shown = 0
        self._total: int | None = None  # the table is the first rows of this many (load's total)
        self._lengths: dict[str, int] = {}  # longest text per measured column
        self._measured: tuple[ResultTable | None, int] = (None, 0)  # (table, rows measured)
        self._columns: list[Column] = []
        self._column_key = ""  # the column cursor, by key, so it survives re-layouts
        self._sticky_width = 0
        self._scroll_width = 0
        self._lead: tuple[str, ...] = ()  # app columns shown first right of the divider (set_lead)

    # ---- the API for the hosting screen --------------------------------------------------------
    def load(self, table: ResultTable, thresholds: Thresholds | None = None, total: int | None = None,
             extra: dict[str, np.ndarray] | None = None) -> None:
        """Show `table`, applying `thresholds` to it (this sets its `fail` column). `total`: the
        table is the first rows of this many, the rest being read: the status says so, and the keys
        that need every row (sort, next failing, toggles, next match) wait for the whole table.
        `extra`: the app's own columns, one value per row, shown, filtered and sorted by after the
        table's plugin columns but never written into it (the advisor's origin and iso_cos); None
        keeps the ones given before while the table is the same object with as many rows.

        Call again whenever rows were appended or thresholds changed: the cursor stays on the same
        operator row (by row number for the same table object, by tensor name for a new one) at the
        same height on screen, and sort, filter and toggles are kept (a filter the new table cannot
        evaluate is dropped). Call it on the app's thread: from a worker, use app.call_from_thread.
        """
        old_row = self.cursor_row
        old_name = self._table.columns["tensor"][old_row] if old_row is not None else None
        keep_offset = self.cursor - int(self.scroll_y) if old_row is not None else None
        if table is not self._table and old_name is not None:
            names = table.columns["tensor"]
            if isinstance(names, np.ndarray):  # one pass in C; encoding 1M names took seconds here
                hits = np.flatnonzero(names == old_name)
            else:
                tensors = table.codes("tensor")
                hits = np.flatnonzero(tensors.where(tensors.values == old_name)) if len(table) else []
            old_row = int(hits[0]) if len(hits) else None
        same = table is self._table and all(len(v) == len(table) for v in self._extra.values())
        if extra is None:
            extra = self._extra if same else {}
        kept = same and extra is self._extra and len(self._shown) == len(table)  # its text codes stay cached
        self._table, self._total, self._extra = table, total, extra
        if thresholds is not None:
            self._thresholds = thresholds
        self._flags(judgement.apply(table, self._thresholds))
        if not extra:
            self._shown = table
        elif kept and self._shown is not table:
            self._shown.columns.update(table.columns)  # the judged columns apply() just set
        else:  # the engine's arrays, not copied
            self._shown = ResultTable({**table.columns, **extra},
                                      [*table.custom, *(k for k in extra if k not in table.custom)], table.present)
        self._measure()
        try:
            self._base = self._filtered(self._filter)
        except FilterError:
            self._filter = ""
            self._base = self._filtered("")
        if self._sort is not None and self._sort[0] not in table.columns:
            self._sort = None
        self._layout()
        self._show(old_row, keep_offset)

    @property
    def table(self) -> ResultTable:
        """The engine's table loaded (without the app's columns: see `extra`)."""
        return self._table

    @property
    def extra(self) -> dict[str, np.ndarray]:
        """The app's columns shown beside the table (see load); do not modify."""
        return self._extra

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def view(self) -> np.ndarray:
        """Table row numbers shown, in display order (do not modify)."""
        return self._view

    @property
    def cursor_row(self) -> int | None:
        """Table row number under the cursor, or None when nothing is shown."""
        return int(self._view[self.cursor]) if len(self._view) else None

    @property
    def cursor_position(self) -> int:
        """Position of the cursor in the view (-1 when the view is empty)."""
        return self.cursor if len(self._view) else -1

    @property
    def column_key(self) -> str:
        """Key of the column under the column cursor (what `[` / `]` sort by)."""
        return self._column_key

    @property
    def columns(self) -> list[str]:
        """Keys of the columns shown, left to right (without the mark column)."""
        return [c.key for c in self._columns if c.key != "mark"]

    @property
    def sort_key(self) -> tuple[str, bool] | None:
        """(column key, descending) of the current sort, None for execution order."""
        return self._sort

    @property
    def filter(self) -> str:
        return self._filter

    @property
    def io_mode(self) -> str:
        """"both", "outputs" or "inputs"."""
        return IO_MODES[self._io]

    @property
    def show_invalid(self) -> bool:
        return self._show_invalid

    @property
    def search_text(self) -> str:
        return self._search

    def move_to(self, row: int) -> bool:
        """Put the cursor on table row `row`; False (cursor unchanged) when it is not in the view."""
        hits = np.flatnonzero(self._view == row)
        if not len(hits):
            return False
        self.move_cursor(int(hits[0]))
        return True

    def sort(self, key: str | None, descending: bool = False) -> None:
        """Sort by a column (key, CSV name or alias; FilterError if unknown); None: execution order.

        Sorting by the index ascending is execution order too. Missing values sort last both ways.
        The cursor stays on its row (home goes to the extremes).
        """
        if key is not None:
            key = self._shown.resolve(key)
            if key == "index" and not descending:
                key = None
        self._sort = None if key is None else (key, descending)
        self._show(self.cursor_row, None)

    def sort_current(self, descending: bool = False) -> None:
        """Sort by the column under the column cursor."""
        column = self._current_column()
        if column is not None and column.sort_key is not None:
            self.sort(column.sort_key, descending)

    def set_lead(self, keys: tuple[str, ...]) -> None:
        """App columns (given to `load` as `extra`) to show first right of the divider, the column cursor
        on the first of them (a chain's stage group: where the eye goes first); shown from the next load."""
        if keys and keys != self._lead:
            self._column_key = keys[0]
        self._lead = keys

    def move_column(self, step: int) -> None:
        """Move the column cursor `step` columns right (negative: left), clamped."""
        keys = [c.key for c in self._columns if c.sort_key is not None]
        if not keys:
            return
        here = keys.index(self._column_key) if self._column_key in keys else 0
        self._column_key = keys[max(0, min(len(keys) - 1, here + step))]
        self._scroll_to_column()
        self.refresh()

    def set_filter(self, expression: str) -> int:
        """Show only rows matching a filter expression; returns the number of rows shown.

        Raises the engine's FilterError (message and position for the user) and then keeps the
        previous filter. An empty expression clears the filter.
        """
        base = self._filtered(expression)
        self._filter = expression.strip()
        self._base = base
        self._show(self.cursor_row, self._screen_offset())
        return len(self._view)

    def clear_filter(self) -> int:
        return self.set_filter("")

    def toggle_io(self) -> str:
        """Cycle both / outputs only / inputs only; returns the new mode."""
        self._io = (self._io + 1) % len(IO_MODES)
        self._refilter()
        return self.io_mode

    def toggle_invalid(self) -> bool:
        """Hide or show rows that could not be compared; returns whether they are shown now."""
        self._show_invalid = not self._show_invalid
        self._refilter()
        return self._show_invalid

    def search(self, text: str, backwards: bool = False, include_current: bool = False) -> bool:
        """Move to the next row whose NPU op, golden op, type or tensor contains `text`.

        Case-insensitive, wrapping; starts after the cursor (before it when backwards), or at the
        cursor itself with include_current (for search-as-you-type). False when nothing matches.
        """
        self._search = text
        if not text or not len(self._view):
            return False
        start = self.cursor_position
        if include_current:
            start += 1 if backwards else -1
        elif start < 0:
            start = len(self._view) if backwards else -1
        hit = self._shown.search(text, self._view, start, backwards)
        if hit is None:
            return False
        self.move_cursor(hit)
        return True

    def search_next(self, backwards: bool = False) -> bool:
        """Repeat the last search forwards (`n`) or backwards (`N`)."""
        return self.search(self._search, backwards)

    def next_failing(self) -> bool:
        """Cursor to the next failing row in execution order (by row number), wrapping."""
        if not len(self._view):
            return False
        hit = self._shown.next_failing(self._view, self.cursor)
        if hit is None:
            return False
        self.move_cursor(hit)
        return True

    @property
    def failing_shown(self) -> int:
        """Failing rows in the view."""
        return self._failing_shown

    @property
    def status(self) -> str:
        """One line for the status bar: `rows 312/18,204 · ✗ 12 · sort cos↑ · filter cos<0.99`."""
        if self._total is not None:
            return f"rows {fmt.count(len(self._view))}/{fmt.count(self._total)} · reading the rest…"
        parts = [f"rows {fmt.count(len(self._view))}/{fmt.count(len(self._shown))}"]
        if self._failing_shown:
            parts.append(f"{MARK_FAIL} {fmt.count(self._failing_shown)} failing")
        if self._sort is not None:
            key, descending = self._sort
            parts.append(f"sort {LABELS.get(key, METRIC[key].title if key in METRIC else key)}{'↓' if descending else '↑'}")
        if self._filter:
            parts.append(f"filter {self._filter}")
        if self._io:
            parts.append(f"{IO_MODES[self._io]} only")
        if not self._show_invalid:
            parts.append(f"{fmt.count(int(self._uncompared().sum()))} not compared hidden")
        return " · ".join(parts)

    # ---- view computation -----------------------------------------------------------------------
    def _flags(self, state: RowState) -> None:
        self._marks = Flags.of(state, self._thresholds)

    def _filtered(self, expression: str) -> np.ndarray:
        t = self._shown
        mask = t.filter_mask(expression) if expression.strip() else None
        io = t.columns["io"]
        if self._io == 1:
            mask = (io != "input") if mask is None else mask & (io != "input")
        elif self._io == 2:
            mask = (io == "input") if mask is None else mask & (io == "input")
        if not self._show_invalid:
            mask = ~self._uncompared() if mask is None else mask & ~self._uncompared()
        return np.arange(len(t), dtype=np.int64) if mask is None else np.flatnonzero(mask)

    def _uncompared(self) -> np.ndarray:
        """Rows `x` hides: not compared (`?`) and the conversion's own ops (`·`, not compared either)."""
        return self._marks.invalid | self._marks.device_only

    def _refilter(self) -> None:
        self._base = self._filtered(self._filter)
        self._show(self.cursor_row, self._screen_offset())

    def _show(self, keep_row: int | None, keep_offset: int | None) -> None:
        """Order the base rows, put the cursor back on `keep_row`, resize, scroll, announce."""
        base = self._base
        if self._sort is not None:
            key, descending = self._sort
            self._view = self._shown.sort_order(key, descending, rows=base)
        else:
            self._view = base
        view = self._view
        self._failing_shown = int(np.count_nonzero(self._marks.fail[view])) if len(view) else 0
        position = -1
        if len(view):
            position = 0
            if keep_row is not None:
                hits = np.flatnonzero(view == keep_row)
                if len(hits):
                    position = int(hits[0])
                elif self._sort is None:  # the nearest row after it in execution order
                    position = min(int(np.searchsorted(view, keep_row)), len(view) - 1)
                    keep_offset = None
        self.set_reactive(OperatorTable.cursor, max(0, position))
        self._set_virtual_size()
        if position >= 0 and keep_offset is not None and self.page_rows() > 0:
            self.scroll_to_row(position - keep_offset)
        self.scroll_to_cursor()
        self.refresh()
        self._announce()
        self.post_message(self.ViewChanged(self, self.status))

    def _announce(self) -> None:
        row = self.cursor_row
        if row != self._announced:
            self._announced = row
            self.post_message(self.Highlighted(self, row))

    # ---- columns ---------------------------------------------------------------------------------
    def _measure(self) -> None:
        """Longest text per text column (opcolumns.measure); only the new rows when the same table
        grew (a new table: its columns' distinct values, through their codes)."""
        t = self._table
        table, done = self._measured
        if table is not t or done > len(t):
            self._lengths, done = {}, 0
        if done == len(t):
            return
        if done:
            measure(t, self._lengths, done)
        else:  # a new table: measured once (a loading worker may have done it)
            self._lengths = dict(measured(t))
        self._measured = (t, len(t))

    def _layout(self) -> None:
        """Column widths and offsets for the current widget width; sets the virtual size."""
        cols = column_specs(self._shown, self._lengths, self._lead)
        self._sticky_width, self._scroll_width = place(cols, self.scrollable_content_region.width or 160)
        self._columns = cols
        keys = [c.key for c in cols if c.sort_key is not None]
        if self._column_key not in keys:
            first_metric = next((c.key for c in cols if not c.sticky and c.right and c.key != "op_seq"), None)
            self._column_key = first_metric or "index"
        self._set_virtual_size()

    def _set_virtual_size(self) -> None:
        self.virtual_size = Size(self._sticky_width + self._scroll_width, len(self._view) + 1)

    def _current_column(self) -> Column | None:
        return next((c for c in self._columns if c.key == self._column_key), None)

    # ---- cursor and scrolling ------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._view)

    def _screen_offset(self) -> int | None:
        return self.cursor - int(self.scroll_y) if len(self._view) else None

    def _scroll_to_column(self) -> None:
        column = self._current_column()
        if column is None or column.sticky:
            return
        visible = self.scrollable_content_region.width - self._sticky_width
        if visible <= 0:
            return
        x = int(self.scroll_x)
        if column.offset < x:
            x = column.offset
        elif column.offset + column.width > x + visible:
            # the first column start that shows all of this one: no cut-off cell at the left edge
            need = column.offset + column.width + 1 - visible
            x = next((c.offset for c in self._columns if not c.sticky and c.offset >= need), column.offset)
        self.scroll_to(x=max(0, x), animate=False, force=True)

    def watch_cursor(self, old: int, new: int) -> None:
        super().watch_cursor(old, new)
        self._announce()

    def on_resize(self, event: events.Resize) -> None:
        self._layout()
        super().on_resize(event)
        self._scroll_to_column()

    # ---- actions ---------------------------------------------------------------------------------
    def action_column_left(self) -> None:
        self.move_column(-1)

    def action_column_right(self) -> None:
        self.move_column(1)

    def waiting(self) -> bool:
        """Whether the table is its first rows only (load's total), saying so: keys that need
        every row wait for the rest."""
        if self._total is not None:
            self.notify(f"still reading the table ({fmt.count(self._total)} rows): a moment", timeout=3)
        return self._total is not None

    def action_sort(self, descending: bool) -> None:
        if not self.waiting():
            self.sort_current(descending)

    def action_next_failing(self) -> None:
        if not self.waiting() and not self.next_failing():
            self.notify("no failing rows in the view", timeout=3)

    def action_toggle_io(self) -> None:
        if not self.waiting():
            self.toggle_io()

    def action_toggle_invalid(self) -> None:
        if not self.waiting():
            self.toggle_invalid()

    def action_search_next(self, backwards: bool) -> None:
        if self.waiting():
            return
        if not self._search:
            self.notify("nothing to repeat: search with / first", timeout=3)
        elif not self.search_next(backwards):
            self.notify(f"no match for '{self._search}'", timeout=3)

    def action_select(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.Selected(self, row))

    def click_header(self, x: int) -> None:
        """Sort by the clicked column; again: the other way."""
        column = self._column_at(x)
        if column is not None and column.sort_key is not None and not self.waiting():
            self._column_key = column.key
            was = self._sort if self._sort is not None and self._sort[0] == self._shown.resolve(column.sort_key) \
                else None  # sorted by this column already: the other way
            self.sort(column.sort_key, descending=was is not None and not was[1])

    def click_row(self, position: int, x: int) -> None:
        """The column cursor goes to the clicked column too."""
        column = self._column_at(x)
        if column is not None and column.sort_key is not None and not self.waiting():
            self._column_key = column.key
        super().click_row(position, x)
        self.refresh()

    def _column_at(self, x: int) -> Column | None:
        if x < self._sticky_width:
            return next((c for c in self._columns if c.sticky and c.offset <= x < c.offset + c.width + 1), None)
        x = x - self._sticky_width + int(self.scroll_x)
        return next((c for c in self._columns if not c.sticky and c.offset <= x < c.offset + c.width + 1), None)

    # ---- rendering ---------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self.component_styles
        base = styles["base"]
        if y == 0:
            return self._header(width, base, styles)
        position = int(self.scroll_y) + y - 1
        if not 0 <= position < len(self._view):
            if position == 0:
                return self._message(width, base + styles["empty"])
            return Strip.blank(width, base)
        row = int(self._view[position])
        row_style = base
        if self._marks.fail[row]:
            row_style += styles["fail"]
        elif self._marks.invalid[row]:
            row_style += styles["invalid"]
        elif self._marks.exempt[row]:
            row_style += styles["exempt"]
        cursor = position == self.cursor
        if cursor:
            row_style += styles["cursor"]
        fail_cell = row_style + styles["fail-cell"]
        if cursor:
            fail_cell += styles["cursor"] + Style(bold=True, underline=True)

        def cells(columns: list[Column]) -> list[Segment]:
            out = []
            for c in columns:
                text, broken = cell(c, row, self._shown.columns, self._marks)
                if broken:
                    out.append(Segment(fmt.pad(text, c.width, c.right), fail_cell))
                    out.append(Segment(" ", row_style))
                else:
                    out.append(Segment(fmt.pad(text, c.width, c.right) + " ", row_style))
            return out

        return self._join(width, cells, base + styles["divider"] + (styles["cursor"] if cursor else Style()),
                             row_style)

    def _header(self, width: int, base: Style, styles: dict[str, Style]) -> Strip:
        header = base + styles["header"]
        current = header + styles["header-cursor"]
        sort_key, descending = self._sort if self._sort is not None else (None, False)

        def cells(columns: list[Column]) -> list[Segment]:
            out = []
            for c in columns:
                label = c.label
                if sort_key is not None and c.sort_key == sort_key:
                    label = fmt.fit(label, c.width - 1) + ("↓" if descending else "↑")
                style = current if c.key == self._column_key else header
                out.append(Segment(fmt.pad(label, c.width, c.right), style))
                out.append(Segment(" ", header))
            return out

        return self._join(width, cells, header, header)

    def _join(self, width: int, cells, divider: Style, fill: Style) -> Strip:
        """Sticky cells, the divider, then the scrolled cells in view, cropped to `width`."""
        sticky = [c for c in self._columns if c.sticky]
        segments = cells(sticky)
        segments.append(Segment(DIVIDER, divider))
        length = self._sticky_width
        visible = width - self._sticky_width
        if visible > 0:
            x0 = int(self.scroll_x)
            shown = [c for c in self._columns if not c.sticky
                     and c.offset + c.width + 1 > x0 and c.offset < x0 + visible]
            if shown:
                start = shown[0].offset
                end = shown[-1].offset + shown[-1].width + 1
                part = Strip(cells(shown), end - start).crop(x0 - start, x0 - start + visible)
                segments.extend(part)
                length += part.cell_length
        return Strip(segments, length).adjust_cell_length(width, fill)

    def _message(self, width: int, style: Style) -> Strip:
        if not len(self._shown):
            text = self.empty_text
        elif self._filter:
            text = f"no row matches the filter: {self._filter}"
        else:
            text = "no rows shown: press i or x to show the hidden rows"
        return Strip([Segment(fmt.fit(" " + text, width), style)]).adjust_cell_length(width, style)
