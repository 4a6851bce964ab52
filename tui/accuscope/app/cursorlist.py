"""CursorList: the base of the app's list widgets (the operator table, the graph, the TopN table).

A Line-API ScrollView with a header on line 0 and one row per line below it; subclasses render
lines (`render_line`) and say how many rows there are (`row_count`). The base owns what every list
does the same way:

- `cursor`, a reactive row position, validated (clamped into the rows) and kept in view by its
  watcher, which repaints only the two lines that changed when the list did not scroll;
- the keys: up/down (k/j), home/end (G), page up/down, half a page (ctrl+u/d), and the scroll keys
  it inherits, declared again with ids;
- a click on a row moves the cursor there, a click on the cursor row selects it (`action_select`);
- the component styles, built once and rebuilt when the styles (the theme) change.
"""
from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.scroll_view import ScrollView

__all__ = ["CursorList"]


class CursorList(ScrollView, can_focus=True):
    """A list with a header line and a row cursor; renders only the visible lines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False, id="list.cursor_up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="list.cursor_down"),
        Binding("home", "first", "First row", show=False, id="list.first"),
        Binding("end,G", "last", "Last row", show=False, id="list.last"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="list.page_up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="list.page_down"),
        Binding("ctrl+u", "page(-0.5)", "Half page up", show=False, id="list.half_page_up"),
        Binding("ctrl+d", "page(0.5)", "Half page down", show=False, id="list.half_page_down"),
        Binding("left", "scroll_left", "Scroll left", show=False, id="list.scroll_left"),
        Binding("right", "scroll_right", "Scroll right", show=False, id="list.scroll_right"),
        Binding("ctrl+pageup", "page_left", "Page left", show=False, id="list.page_left"),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False, id="list.page_right"),
    ]

    cursor: reactive[int] = reactive(0, init=False)
    """Position of the cursor among the rows (0 when there is none: see `has_rows`)."""

    @property
    def row_count(self) -> int:
        """Rows below the header."""
        raise NotImplementedError

    # ---- the cursor -------------------------------------------------------------------------------
    def validate_cursor(self, position: int) -> int:
        return max(0, min(self.row_count - 1, position))

    def watch_cursor(self, old: int, new: int) -> None:
        top = int(self.scroll_y)
        self.scroll_to_cursor()
        if int(self.scroll_y) == top and top <= old < top + self.page_rows():
            self.refresh_line(old + 1)  # just the two lines (line 0 is the header)
            self.refresh_line(new + 1)
        else:
            self.refresh()

    def move_cursor(self, position: int, center: bool = False) -> None:
        """Put the cursor on row `position` (clamped), in view; `center`: in the middle of it."""
        if not self.row_count:
            return
        self.cursor = position
        if center:
            self.scroll_to_cursor(center=True)

    def page_rows(self) -> int:
        """Rows visible below the header."""
        return max(0, self.scrollable_content_region.height - 1)

    def scroll_to_row(self, top: int) -> None:
        """Scroll so that row `top` is the first below the header (as far as the rows go)."""
        top = max(0, min(top, self.row_count + 1 - self.scrollable_content_region.height))
        if top != int(self.scroll_y):
            self.scroll_to(y=top, animate=False, force=True)

    def scroll_to_cursor(self, center: bool = False) -> None:
        page = self.page_rows()
        if not self.row_count or page <= 0:
            return
        top = int(self.scroll_y)
        if center:
            self.scroll_to_row(self.cursor - page // 2)
        elif self.cursor < top:
            self.scroll_to_row(self.cursor)
        elif self.cursor >= top + page:
            self.scroll_to_row(self.cursor - page + 1)

    # ---- keys and clicks -------------------------------------------------------------------------
    def action_cursor_up(self) -> None:
        self.move_cursor(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self.cursor + 1)

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(self.row_count - 1)

    def action_page(self, fraction: float) -> None:
        """Scroll and move the cursor by `fraction` of a page (negative: up)."""
        step = int(self.page_rows() * fraction) or (1 if fraction > 0 else -1)
        self.scroll_to_row(int(self.scroll_y) + step)
        self.move_cursor(self.cursor + step)

    def action_select(self) -> None:
        """Enter, or a click on the cursor row (nothing here)."""

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            self.click_header(offset.x)
            return
        position = int(self.scroll_y) + offset.y - 1
        if 0 <= position < self.row_count:
            self.click_row(position, offset.x)

    def click_header(self, x: int) -> None:
        """A click on the header line at content column `x` (nothing here)."""

    def click_row(self, position: int, x: int) -> None:
        if position == self.cursor:
            self.action_select()
        else:
            self.move_cursor(position)

    def on_resize(self, event: events.Resize) -> None:
        self.scroll_to_cursor()

    # ---- styles ----------------------------------------------------------------------------------
    _style_cache: dict[str, Style] | None = None

    @property
    def component_styles(self) -> dict[str, Style]:
        """The rich style of each component class by its name after `--`, and "base" (the widget's
        own); built once per style change (a theme switch included)."""
        styles = self._style_cache
        if styles is None:
            styles = {name.partition("--")[2]: self.get_component_rich_style(name)
                      for name in self.COMPONENT_CLASSES}
            styles["base"] = self.rich_style
            self._style_cache = styles
        return styles

    def notify_style_update(self) -> None:
        self._style_cache = None
        super().notify_style_update()
