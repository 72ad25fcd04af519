"""The review queue (issue 38, docs/review.md): sessions no person reviewed yet, failed and low-scored first; a
review from the dashboard is written as a person's annotation and needs the write scope once keys exist."""
from __future__ import annotations

from contextlib import closing

import httpx
import pytest
from test_ingest import Served, free_port

import reasonlog
from reasonlog.store import open_store


def record_three(db) -> dict[str, str]:
    """Three one-call sessions: `fine` (completed), `broken` (failed), `scored` (completed, task_done=0.2 by a
    code check); their ids by agent."""
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    ids = {}
    for agent in ("scored", "broken", "fine"):
        try:
            with rec.session(agent=agent) as s:
                s.call(messages=[{"role": "user", "content": f"task of {agent}"}], response="done", model="gpt-5")
                ids[agent] = s.id
                if agent == "broken":
                    raise RuntimeError("the agent crashed")
        except RuntimeError:
            pass
    rec.close()
    with closing(open_store(db)) as store:
        store.annotate(ids["scored"], scores={"task_done": 0.2}, by="check.py", source="code")
    return ids


def queue_of(db) -> list[str]:
    with closing(open_store(db, read_only=True)) as store:
        return [s["agent"] for s in store.review_queue()]


def test_the_queue_puts_failed_then_low_scores_first_and_drops_what_a_person_reviewed(db):
    ids = record_three(db)
    assert queue_of(db) == ["broken", "scored", "fine"]
    with closing(open_store(db)) as store:
        store.annotate(ids["fine"], scores={"task_done": 0.9}, by="judge", source="llm")
        assert [s["lowest_score"] for s in store.review_queue()] == [None, 0.2, 0.9]
        store.annotate(f"{ids['broken']}#0", note="looked at it", by="ana")  # a person, on one of its calls
    assert queue_of(db) == ["scored", "fine"]


@pytest.fixture
def served(db):
    ids = record_three(db)
    with closing(open_store(db)) as store:
        read = store.create_api_key("read", "viewer")["secret"]
        write = store.create_api_key("write", "reviewer")["secret"]
    port = free_port()
    with Served(db, port):
        yield f"http://127.0.0.1:{port}", db, ids, read, write


def test_a_review_needs_the_write_scope_and_moves_on(served):
    base, db, ids, read, write = served
    form = {"session": ids["broken"], "at": "0", "verdict": "pass", "note": "ok after all"}
    with httpx.Client(base_url=base, cookies={"reasonlog_key": read}) as viewer:
        assert viewer.get("/review").status_code == 200
        assert viewer.post("/review", data=form).status_code == 403
    with httpx.Client(base_url=base, cookies={"reasonlog_key": write}) as reviewer:
        answer = reviewer.post("/review", data=form)
        assert (answer.status_code, answer.headers["location"]) == (303, "/review?at=0")
        bad = reviewer.post("/review", data={"session": ids["fine"], "score": "no equals sign"})
        assert (bad.status_code, "expected NAME=VALUE" in bad.text) == (400, True)
    with closing(open_store(db, read_only=True)) as store:
        got = [(a["kind"], a.get("name"), a["value"], a["by"], a["source"])
               for a in store.list_annotations(ids["broken"])]
    assert got == [("note", None, "ok after all", "dashboard", "human"),
                   ("score", "verdict", "pass", "dashboard", "human")]
    assert queue_of(db) == ["scored", "fine"]
