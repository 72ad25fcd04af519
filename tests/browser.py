"""The real Chromium the browser tests drive (Debian's /usr/bin/chromium, through Playwright): the flags, the
module's browser and a fresh page per test, and screenshots when REASONLOG_SCREENSHOTS names a folder.

A test module takes the fixtures with `from browser import browser, page  # noqa: F401  (the fixtures)` and skips
itself with `pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), ...)`."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = os.environ.get("REASONLOG_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A page of its own context; the texts of the dialogs it opened (dismissed) are in `page.dialogs`."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    p = context.new_page()
    p.dialogs = []
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    yield p
    context.close()


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)
