"""Live events (issue 38, docs/dashboard.md "Live"): `/live` says what changed as another process records, behind
the same keys as the pages, on SQLite and PostgreSQL; one poller serves every listener, each with a bounded queue,
and a listener that leaves is forgotten."""
from __future__ import annotations

import asyncio
import json
import time
from contextlib import closing

import httpx
import pytest
from live_helpers import Stepper, until
from test_ingest import Served, free_port

import reasonlog
from reasonlog.server.live import Hub
from reasonlog.store import open_store


def change_events(response):
    """The `change` events of an open `/live` response, each as its JSON data."""
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "change":
            yield json.loads(line[6:])


@pytest.fixture
def served(db):
    with closing(open_store(db)) as store:
        key = store.create_api_key("read", "viewer")["secret"]
    port = free_port()
    with Served(db, port) as running:
        yield f"http://127.0.0.1:{port}", db, key, running.server.config.app


def test_live_needs_a_key_once_keys_exist(served):
    base, _, _, _ = served
    assert httpx.get(base + "/live").status_code == 401
    assert httpx.get(base + "/live", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_live_says_each_call_another_process_records(served):
    base, db, key, _ = served
    recorder = Stepper(db, "far-agent")
    try:
        recorder.call("first")
        with httpx.stream("GET", base + "/live", headers={"Authorization": f"Bearer {key}"}, timeout=10) as r:
            assert (r.status_code, r.headers["content-type"]) == (200, "text/event-stream; charset=utf-8")
            events = change_events(r)
            first = next(events)["sessions"]
            [(sid, row)] = first.items()
            assert (row["agent"], row["calls"], row["status"]) == ("far-agent", 1, "open")
            started = time.monotonic()
            recorder.call("second")
            second = next(events)
            assert time.monotonic() - started < 1.0
            # the server's first digest was its generation 1: no listener had asked before this one
            assert (second["generation"], second["sessions"][sid]["calls"]) == (2, 2)
            recorder.end()
            assert next(events)["sessions"][sid]["status"] == "completed"
    finally:
        recorder.close()


def test_live_says_what_ingestion_through_the_same_server_writes(served, tmp_path, monkeypatch):
    """The server's own writer (POST /v1/ingest) is another connection: its commits move the marker too."""
    base, db, key, _ = served
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # a remote recorder's spill files go here
    with closing(open_store(db)) as store:
        writer = store.create_api_key("write", "agents")["secret"]
    with httpx.stream("GET", base + "/live", headers={"Authorization": f"Bearer {key}"}, timeout=10) as r:
        events = change_events(r)
        assert next(events)["sessions"] == {}
        rec = reasonlog.Recorder(base, api_key=writer, writer="sync")
        with rec.session(agent="over-http") as s:
            s.call(messages=[{"role": "user", "content": "hi"}], response="yo", model="gpt-5")
        rec.close()
        seen = {}
        while not any(row["status"] == "completed" for row in seen.values()):
            seen = next(events)["sessions"]
        assert [(row["agent"], row["calls"]) for row in seen.values()] == [("over-http", 1)]


def test_a_listener_that_leaves_is_forgotten(served):
    base, _, key, app = served
    hub = app.state.live
    streams = [httpx.Client(timeout=10) for _ in range(5)]
    opened = [c.stream("GET", base + "/live", headers={"Authorization": f"Bearer {key}"}) for c in streams]
    lines = [o.__enter__().iter_lines() for o in opened]  # kept: a dropped iterator would close its stream
    for each in lines:
        assert next(each) == "retry: 500"
    assert until(lambda: len(hub.listeners) == 5, 5.0), f"{len(hub.listeners)} listeners"
    for o, c in zip(opened, streams, strict=True):
        o.__exit__(None, None, None)
        c.close()
    assert until(lambda: len(hub.listeners) == 0, 5.0), f"{len(hub.listeners)} listeners left"


def test_a_slow_listener_keeps_the_newest_digests_only(db):
    """A listener that reads nothing holds its queue's few newest digests; the older ones are counted as dropped."""
    open_store(db).close()  # made, so that a reader can open it
    rec = reasonlog.Recorder(db, writer="sync")
    with closing(open_store(db, read_only=True)) as reader:
        hub = Hub(lambda: reader, interval_s=0.01, queue=2)

        async def scenario():
            async with hub.listen() as q:
                with rec.session(agent="busy") as s:
                    for n in range(4):
                        s.call(messages=[{"role": "user", "content": f"q{n}"}], response="a", model="gpt-5")
                        seen = hub.generation
                        while hub.generation == seen:
                            await asyncio.sleep(0.01)
                return [q.get_nowait()[0] for _ in range(q.qsize())]

        held = asyncio.run(scenario())
        hub.close()
    rec.close()
    assert (held, hub.generation, hub.dropped) == ([4, 5], 5, 3)
