"""The app's notifications from data: line breaks stay line breaks (an error's last lines, the export's
toast), other control characters and bidi overrides are still neutralised (engine and CLI side:
tests/engine/test_exports_hostile.py)."""
from __future__ import annotations

from textual.app import App

from accuscope.app.app import AccuscopeApp


def test_notify_keeps_line_breaks_and_neutralises_controls_and_bidi(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(App, "notify", lambda self, message, **kw: seen.append((message, kw["title"])))
    app = AccuscopeApp(tmp_path)
    app.notify("export written\r\nto exports/a--b\nlast line\x1b[2J\u202eevil", title="title\nx\u2066")
    assert seen == [("export written\nto exports/a--b\nlast line?[2J?evil", "title?x?")]
