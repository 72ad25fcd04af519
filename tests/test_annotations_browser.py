"""Annotations in real headless Chromium (issue 38): hostile notes, labels and scores on a session's and a call's
pages run nothing and read as the text they are."""
from __future__ import annotations

from contextlib import closing

import pytest
from browser import CHROMIUM
from test_annotations import record_two_sessions
from test_dashboard import HOSTILE
from test_ingest import Served, free_port

from reasonlog.store import open_store

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("review") / "t.db"
    first, _, _ = record_two_sessions(db)
    with closing(open_store(db)) as store:
        for text in HOSTILE:
            store.annotate(first, note=text, by=text)
        store.annotate(f"{first}#0", scores={"verdict": HOSTILE[1]}, labels={HOSTILE[5]: HOSTILE[3]})
        call_id = store.resolve_id("call", f"{first}#0")
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", first, call_id


def test_hostile_annotations_run_nothing_and_read_as_text(site, page):
    base, first, call_id = site
    page.goto(f"{base}/sessions/{first}")
    page.wait_for_timeout(300)
    review = page.locator("#annotations")
    assert [review.locator(".annotation.note .text").nth(i).inner_text() for i in range(len(HOSTILE))] == HOSTILE
    assert review.locator(".annotation").count() == len(HOSTILE) + 2
    assert (page.evaluate("typeof window.__xss"), page.dialogs) == ("undefined", [])
    page.goto(f"{base}/calls/{call_id}")
    page.wait_for_timeout(300)
    texts = page.locator("#annotations .annotation").all_inner_texts()
    assert [t.split(" · ")[0] for t in texts] == [f"label on a call: {HOSTILE[5]} = {HOSTILE[3]}",
                                                    f"score on a call: verdict = {HOSTILE[1]}"]
    assert (page.evaluate("typeof window.__xss"), page.dialogs) == ("undefined", [])
