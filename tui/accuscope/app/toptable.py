"""The TopN table of the operator detail: the worst elements of a tensor pair, worst first."""
from __future__ import annotations

import math
from typing import ClassVar

from rich.segment import Segment
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip

from ..engine.diagnose.opdetail import TopN, layout_of
from . import formatting as fmt
from .cursorlist import CursorList

NUM = 10  # cells of a number


class TopTable(CursorList):
    """The TopN elements, worst first; formats only the lines on screen."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"toptable--header", "toptable--cursor", "toptable--nonfinite",
                                             "toptable--empty"}
    DEFAULT_CSS = """
    TopTable {
        height: 1fr;
        background: $surface;
        & > .toptable--header { text-style: bold; background: $panel; }
        & > .toptable--cursor { background: $block-cursor-blurred-background;
                                color: $block-cursor-blurred-foreground; }
        &:focus > .toptable--cursor { background: $block-cursor-background; color: $block-cursor-foreground;
                                      text-style: $block-cursor-text-style; }
        & > .toptable--nonfinite { color: $text-error; text-style: bold; }
        & > .toptable--empty { color: $text-muted; text-style: italic; }
        &:nocolor > .toptable--cursor { text-style: reverse; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("g", "first", "First row", show=False, id="toptable.first")]

    message: reactive[str] = reactive("computing…")
    """What the table says when it has no rows."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.top: TopN | None = None
        self.layout_name = "ID"
        self.rank = 1  # coordinates shown per element
        self.by = "abs"
        self._widths: list[int] = []
        self._labels: list[str] = []
        self._right: list[bool] = []

    def show(self, top: TopN | None, shape: tuple[int, ...], by: str, message: str = "") -> None:
        """`top` of a tensor of `shape`: its coordinates as many as its axes (a 2-D tensor's N C,
        not N C H W padded with 1s)."""
        layout, grid = layout_of(shape)
        self.rank = len(shape) if layout == "N C H W" else len(grid)
        layout = " ".join(layout.split()[:self.rank])
        self.top, self.layout_name, self.by = top, layout, by
        self.message = message
        n = len(top) if top is not None else 0
        coords = " ".join(str(max(d - 1, 0)) for d in grid[:self.rank])
        arrow = {by: "▼"}
        self._labels = ["#", layout, "NPU", "golden", "abs err" + arrow.get("abs", ""),
                        "rel err" + arrow.get("rel", ""), "note"]
        self._widths = [max(len(str(n)), 1), max(len(layout), len(coords)), NUM, NUM, NUM, NUM, 7]
        self._right = [True, False, True, True, True, True, False]
        self.set_reactive(TopTable.cursor, 0)
        self.virtual_size = Size(self.line_width, n + 1)
        self.scroll_to(0, 0, animate=False, force=True)
        self.refresh()

    @property
    def line_width(self) -> int:
        return sum(w + 1 for w in self._widths)

    @property
    def row_count(self) -> int:
        return len(self.top) if self.top is not None else 0

    def cells(self, i: int) -> list[str]:
        """The texts of row i: rank, coordinates, NPU, golden, abs err, rel err, note."""
        t = self.top
        assert t is not None  # rows are asked for below row_count: of a top shown
        rel = float(t.rel_err[i])
        return [str(i + 1), " ".join(str(int(v)) for v in t.coords[i][:self.rank]),
                fmt.number(float(t.npu[i]), NUM), fmt.number(float(t.golden[i]), NUM),
                fmt.number(float(t.abs_err[i]), NUM), "-" if math.isnan(rel) else fmt.number(rel, NUM),
                "NaN/inf" if t.nonfinite[i] else ""]

    def line_text(self, i: int | None) -> str:
        """Row i as drawn (None: the header)."""
        texts = self._labels if i is None else self.cells(i)
        return "".join(fmt.pad(s, w, r) + " " for s, w, r in zip(texts, self._widths, self._right))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        st = self.component_styles
        base = st["base"]
        x0 = int(self.scroll_x)
        if y == 0 and self._widths:
            style = base + st["header"]
            return Strip([Segment(self.line_text(None), style)]).crop(x0, x0 + width).adjust_cell_length(width, style)
        position = int(self.scroll_y) + y - 1
        if not 0 <= position < self.row_count:
            if position == 0 or (y == 0 and not self._widths):
                style = base + st["empty"]
                text = fmt.fit(" " + (self.message or "no element has this error"), width)
                return Strip([Segment(text, style)]).adjust_cell_length(width, style)
            return Strip.blank(width, base)
        style = base
        assert self.top is not None  # a position below row_count: of a top shown
        if self.top.nonfinite[position]:
            style += st["nonfinite"]
        if position == self.cursor:
            style += st["cursor"]
        return Strip([Segment(self.line_text(position), style)]).crop(x0, x0 + width).adjust_cell_length(width, style)
