"""Live pages in real headless Chromium (issue 38): a recorder in another process writes, and the open sessions
list, session page, timeline and usage page show its calls within a second, recorded text still as text."""
from __future__ import annotations

import pytest
from browser import CHROMIUM, shot
from live_helpers import Stepper, until
from test_dashboard import HOSTILE
from test_ingest import Served, free_port

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)")
WITHIN_S = 1.0  # the promise: the open page shows a new call within a second


@pytest.fixture
def served(db):
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", db


def live(page) -> None:  # noqa: F811
    """Wait until the page's event stream is open (its `● live` mark shows)."""
    page.locator(".live-state").wait_for(state="visible", timeout=10_000)


@pytest.fixture
def listening(served, page):
    """The sessions list open and live, a recorder in another process having recorded one call."""
    base, db = served
    recorder = Stepper(db, "live-agent")
    try:
        recorder.call("the first question")
        page.goto(base + "/")
        live(page)
        yield base, recorder
    finally:
        recorder.close()


def test_the_sessions_list_and_a_session_page_follow_a_recorder_in_another_process(listening, page):
    base, recorder = listening
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 1
    recorder.call("the second question")
    calls = until(lambda: rows.first.locator("td.num").first.inner_text() == "2", WITHIN_S)
    assert calls, "the list did not show the second call within a second"
    assert rows.first.locator(".status").inner_text() == "running"
    shot(page, "live-sessions")

    rows.first.locator("td.title a").click()
    page.wait_for_url("**/sessions/**")
    live(page)
    assert page.locator("ol.timeline li.call").count() == 2
    recorder.call(HOSTILE[0])
    grown = until(lambda: page.locator("ol.timeline li.call").count() == 3, WITHIN_S)
    assert grown, "the session page did not show the third call within a second"
    assert page.locator("ol.timeline li.message.user").last.inner_text().endswith(HOSTILE[0])
    assert page.locator(".running-now").inner_text().startswith("running: call 3 landed ")
    shot(page, "live-session")

    recorder.end()
    ended = until(lambda: page.locator("p.meta .status").inner_text() == "completed", WITHIN_S)
    assert ended and page.locator(".running-now").count() == 0
    assert (page.evaluate("typeof window.__xss"), page.dialogs) == ("undefined", [])


def test_the_timeline_and_the_usage_page_follow_new_calls(listening, page):
    base, recorder = listening
    session_link = page.locator("table.sessions tbody td.title a").first.get_attribute("href")
    page.goto(f"{base}{session_link}/timeline")
    live(page)
    assert page.locator("p.meta").first.inner_text().startswith("Calls 1–1 of 1")
    recorder.call("two")
    assert until(lambda: page.locator("p.meta").first.inner_text().startswith("Calls 1–2 of 2"), WITHIN_S)

    page.goto(base + "/usage")
    live(page)
    cell = page.locator("#by-agent tbody tr").first.locator("td.num").first
    assert cell.inner_text() == "2"
    recorder.call("three")
    # the usage page refreshes at most every 2 s (live.js): it may wait out that gap once
    assert until(lambda: cell.inner_text() == "3", 2.0 + WITHIN_S)
