"""A real browser for the tests of `crew ui` (and its screenshots and benchmark): Debian's Chromium
driven by Playwright (pinned in setup.cfg's test extra). Playwright's own browser download is never
used: scripts/test installs Chromium with apt, and a machine without it fails the test loudly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",  # as root (these machines), Chromium's own sandbox cannot start
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing: run ./scripts/test (it installs Debian's chromium with apt-get)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Playwright's Browser), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
