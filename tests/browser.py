"""Headless Chromium for the tests that look at a page: Debian's `chromium` (never a downloaded browser)."""
from __future__ import annotations

import shutil

import pytest

NO_CHROMIUM = "chromium not found (apt-get install chromium)"


def chromium() -> str:
    """The Chromium executable; the test skips when there is none."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip(NO_CHROMIUM)
    return path
