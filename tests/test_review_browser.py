"""The review queue from the keyboard in real headless Chromium (issue 38): p passes, n skips, a writes a note
that Ctrl+Enter saves, f fails; each review moves to the next session, and a hostile note reads as text."""
from __future__ import annotations

from contextlib import closing

import pytest
from browser import CHROMIUM, shot
from test_dashboard import HOSTILE
from test_ingest import Served, free_port
from test_review_queue import record_three

import reasonlog
from reasonlog.store import open_store

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian's chromium package)")


def agents(page) -> list[str]:  # noqa: F811
    return page.locator("table.review-queue tbody tr td:nth-child(3)").all_inner_texts()


def chosen(page) -> str:  # noqa: F811
    return page.locator("table.review-queue tbody tr.current td:nth-child(3)").inner_text()


def test_p_passes_the_chosen_session_and_the_next_one_is_chosen(tmp_path, page):
    """One review from the keyboard, for the quick run (`-m "not slow"`); the test below goes through the queue."""
    db = tmp_path / "review.db"
    ids = record_three(db)
    port = free_port()
    with Served(db, port):
        page.goto(f"http://127.0.0.1:{port}/review")
        assert (agents(page), chosen(page)) == (["broken", "scored", "fine"], "broken")
        page.keyboard.press("p")
        page.wait_for_url("**/review?at=0")
        assert (agents(page), chosen(page)) == (["scored", "fine"], "scored")
    with closing(open_store(db, read_only=True)) as store:
        given = [(a.get("name"), a["value"]) for a in store.list_annotations(ids["broken"]) if a["source"] == "human"]
    assert given == [("verdict", "pass")]


@pytest.mark.slow  # five reviews, each a post and a new page: about 25 s on the loaded CI machine
def test_reviewing_the_queue_from_the_keyboard(tmp_path, page):
    db = tmp_path / "review.db"
    ids = record_three(db)
    with reasonlog.Recorder(db, writer="sync") as rec, rec.session(agent="extra") as s:
        s.call(messages=[{"role": "user", "content": "task of extra"}], response="done", model="gpt-5")
        ids["extra"] = s.id
    port = free_port()
    with Served(db, port):
        page.goto(f"http://127.0.0.1:{port}/review")
        assert (agents(page), chosen(page)) == (["broken", "scored", "extra", "fine"], "broken")
        shot(page, "review-queue")
        page.keyboard.press("p")
        page.wait_for_url("**/review?at=0")
        assert (agents(page), chosen(page)) == (["scored", "extra", "fine"], "scored")
        page.keyboard.press("n")
        page.keyboard.press("n")
        assert chosen(page) == "fine"
        assert page.locator("form.review a.chosen").inner_text() == "task of fine"
        page.keyboard.press("a")
        page.keyboard.type(HOSTILE[0])
        page.keyboard.press("Control+Enter")
        page.wait_for_url("**/review?at=2")
        assert (agents(page), chosen(page)) == (["scored", "extra"], "extra")  # the last row: the one before it
        page.keyboard.press("f")
        page.wait_for_url("**/review?at=1")
        assert (agents(page), chosen(page)) == (["scored"], "scored")
        page.fill("form.review input[name=score]", "task_done=0.5")
        page.press("form.review input[name=score]", "Enter")  # Enter saves the score, and gives no verdict
        page.wait_for_url("**/review?at=0")
        assert page.locator("main p.muted").last.inner_text() == "Nothing left to review."
        page.goto(f"http://127.0.0.1:{port}/sessions/{ids['fine']}")
        assert page.locator("#annotations .annotation.note .text").inner_text() == HOSTILE[0]
        assert (page.evaluate("typeof window.__xss"), page.dialogs) == ("undefined", [])
    with closing(open_store(db, read_only=True)) as store:
        given = {agent: [(a.get("name"), a["value"], a["source"]) for a in store.list_annotations(sid)
                         if a["source"] == "human"] for agent, sid in ids.items()}
    assert given == {"broken": [("verdict", "pass", "human")], "fine": [(None, HOSTILE[0], "human")],
                     "extra": [("verdict", "fail", "human")], "scored": [("task_done", 0.5, "human")]}
