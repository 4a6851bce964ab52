"""Headless Chromium for the tests that look at a page: Debian's `chromium` (never a downloaded browser)."""
from __future__ import annotations

import shutil

import pytest

NO_CHROMIUM = ("needs headless Chromium, none on PATH (`chromium` or `chromium-browser`): install it with "
               "`sudo apt-get install chromium` (Debian/Ubuntu) or your system's package, then run the tests again")


def chromium() -> str:
    """The Chromium executable; the test skips when there is none."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip(NO_CHROMIUM)
    return path
