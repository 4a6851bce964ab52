"""CursorList, the base of the operator table, the graph view and the TopN table: a clamped reactive
cursor kept in view, paging keys, clicks, and component styles rebuilt on a theme change."""
from __future__ import annotations

from rich.segment import Segment
from textual.app import App
from textual.geometry import Size
from textual.strip import Strip

from accuscope.app.cursorlist import CursorList
from appkit import drive, screen_text


class Numbers(CursorList):
    COMPONENT_CLASSES = {"numbers--cursor"}
    DEFAULT_CSS = """
    Numbers { height: 1fr; & > .numbers--cursor { background: $block-cursor-background; } }
    """

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.selected = n, list[int]()

    def on_mount(self) -> None:
        self.virtual_size = Size(20, self.n + 1)

    @property
    def row_count(self) -> int:
        return self.n

    def action_select(self) -> None:
        self.selected.append(self.cursor)

    def render_line(self, y: int) -> Strip:
        styles = self.component_styles
        position = int(self.scroll_y) + y - 1
        if y == 0 or not 0 <= position < self.n:
            return Strip([Segment("header" if y == 0 else "")])
        mark = ">" if position == self.cursor else " "
        style = styles["base"] + (styles["cursor"] if position == self.cursor else styles["base"])
        return Strip([Segment(f"{mark}row {position}", style)])


class ListApp(App):
    def __init__(self, n: int = 100) -> None:
        super().__init__()
        self.n = n

    def compose(self):
        yield Numbers(self.n)


def test_the_cursor_is_clamped_and_kept_in_view():
    async def script(pilot):
        numbers = pilot.app.query_one(Numbers)
        numbers.focus()
        numbers.move_cursor(10**6)
        assert numbers.cursor == 99
        await pilot.pause()
        assert ">row 99" in screen_text(pilot.app)
        numbers.cursor = -5  # validated however it is set
        assert numbers.cursor == 0
        await pilot.pause()
        assert ">row 0" in screen_text(pilot.app) and "row 99" not in screen_text(pilot.app)
    drive(ListApp(), script, size=(30, 10))


def test_keys_page_and_jump():
    async def script(pilot):
        numbers = pilot.app.query_one(Numbers)
        numbers.focus()
        page = numbers.page_rows()
        await pilot.press("j", "j", "k")
        assert numbers.cursor == 1
        await pilot.press("pagedown")
        assert numbers.cursor == 1 + page
        await pilot.press("ctrl+u")
        assert numbers.cursor == 1 + page - page // 2
        await pilot.press("G")
        assert numbers.cursor == 99
        await pilot.press("home")
        assert numbers.cursor == 0 and numbers.scroll_y == 0
    drive(ListApp(), script, size=(30, 10))


def test_a_click_moves_the_cursor_a_second_selects():
    async def script(pilot):
        numbers = pilot.app.query_one(Numbers)
        await pilot.click(Numbers, offset=(2, 3))  # line 3: row 2 (line 0 is the header)
        assert numbers.cursor == 2 and numbers.selected == []
        await pilot.click(Numbers, offset=(2, 3))
        assert numbers.selected == [2]
        await pilot.click(Numbers, offset=(2, 0))  # the header: no row
        assert numbers.cursor == 2 and numbers.selected == [2]
    drive(ListApp(), script, size=(30, 10))


def test_an_empty_list_keeps_its_cursor_at_zero():
    async def script(pilot):
        numbers = pilot.app.query_one(Numbers)
        numbers.focus()
        await pilot.press("j", "G", "pagedown")
        assert numbers.cursor == 0
    drive(ListApp(0), script, size=(30, 10))


def test_styles_are_rebuilt_when_the_theme_changes():
    async def script(pilot):
        numbers = pilot.app.query_one(Numbers)
        dark = numbers.component_styles["cursor"]
        assert numbers.component_styles is numbers.component_styles  # built once
        pilot.app.theme = "textual-light"
        await pilot.pause()
        assert numbers.component_styles["cursor"] != dark
    drive(ListApp(), script, size=(30, 10))
