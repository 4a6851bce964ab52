"""The key bar of every screen: Textual's footer, showing only the keys that fit whole."""
from __future__ import annotations

from textual.dom import DOMNode
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer as TextualFooter
from textual.widgets._footer import FooterKey


class Footer(TextualFooter):
    """The screen's own keys first, then its focused widget's, then the app's; keys that do not fit
    in the width are left out whole (never cut mid-word; `?` lists them all), the help key last."""

    def compose(self):
        self.call_after_refresh(self.fit_keys)
        active = self.screen.active_bindings.values()
        if any(binding.group is not None for _, binding, _, _ in active):  # key groups: textual's order
            yield from map(self._settled, super().compose())
            return
        owner = {binding.action: node for node, binding, _, _ in active}
        rank: dict[DOMNode | None, int] = {self.screen: 0, self.app: 2}

        def place(key: Widget) -> int:
            return rank.get(owner.get(key.action), 1) if isinstance(key, FooterKey) else 1
        yield from sorted(map(self._settled, super().compose()), key=place)

    def _settled(self, key: Widget) -> Widget:
        """A key given the footer's `compact` before it mounts: textual's keys start compact and are
        bound to the footer's value after mounting, restyling each key twice (a third of the start-up's
        time after the imports, with two screens of keys)."""
        if isinstance(key, FooterKey) and "compact" in (key._reactive_connect or {}):  # not the palette's
            key.set_reactive(FooterKey.compact, self.compact)
        return key

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        keys = list(self.children)  # keys, and key groups with their labels
        if not keys or not self.size.width:
            return
        width = {key: _width(key) for key in keys}
        fixed = [k for k in keys if k.has_class("-command-palette") or getattr(k, "action", "").endswith("help")]
        room = self.size.width - sum(width[k] for k in fixed)
        for key in keys:
            if key in fixed:
                continue
            fits = width[key] <= room
            room -= width[key] if fits else 0
            room = room if fits else -1  # keep the order: after one key is left out, the rest are too
            key.display = fits
        for key in fixed:
            key.display = True


def _width(key: Widget) -> int:
    """Cells a key takes in the bar, margins included (measured from its text, shown or not)."""
    styles = key.styles
    content = key.get_content_width(Size(0, 0), Size(0, 0))
    return content + styles.padding.width + styles.margin.width + styles.border.spacing.width
