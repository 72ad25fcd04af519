"""Recording into `reasonlog serve` over HTTP: a Recorder given the server's URL and a write key sends its batches
to POST /v1/ingest (a real uvicorn server on 127.0.0.1), a batch sent twice adds nothing, batches are sized to
the limit the server advertises, and while the server is down batches wait in spill files and arrive, once,
when it is back."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.capture.http_sink import HttpSink
from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.server import ingest
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter, open_store

ALL = SessionFilter(limit=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`reasonlog serve`'s app under uvicorn in a thread, on 127.0.0.1; stops by itself."""

    def __init__(self, db, port: int, keep_alive_s: float = 5, **options):
        app = create_app(lambda: open_store(db), **options)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                                    access_log=False, timeout_keep_alive=keep_alive_s))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture
def server_db(db, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # spill files of remote recorders go here
    key = open_store(db).create_api_key("write", "agents")["secret"]
    return db, key


def record(rec, n: int, agent: str = "remote") -> None:
    with rec.session(agent=agent, run="job-1") as s:
        for i in range(n):
            s.call(messages=[{"role": "user", "content": f"question {i} " + "x" * 200}], response=f"answer {i}",
                   usage=reasonlog.Usage(input_tokens=10, output_tokens=2), model="gpt-5")


def test_a_recorder_records_into_the_server(server_db):
    db, key = server_db
    port = free_port()
    with Served(db, port):
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key, writer="sync")
        record(rec, 3)
        rec.close()
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    assert (session["agent"], session["run"], session["call_count"], session["input_tokens"]) == (
        "remote", "job-1", 3, 30)
    last = store.get_session(session["id"])["calls"][-1]
    assert store.replay_call(last["id"])["messages"][0]["content"].startswith("question 2 ")


def test_a_recorder_keeps_one_connection_and_opens_another_once_the_server_closed_it(server_db):
    """One connection for all of a recorder's batches (with `serve --workers N` they reach one worker, whose memory
    of the session stays current); one the server closed when idle is replaced, and the batch sent on it arrives."""
    db, key = server_db
    port = free_port()
    with Served(db, port, keep_alive_s=1) as served:
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key, writer="sync")
        record(rec, 3, agent="first")
        assert len(served.server.server_state.connections) == 1
        time.sleep(2.5)  # past the server's keep-alive: it closed the connection
        assert len(served.server.server_state.connections) == 0
        record(rec, 2, agent="second")
        assert len(served.server.server_state.connections) == 1
        rec.close()
    store = open_store(db, read_only=True)
    assert sorted((s["agent"], s["call_count"]) for s in store.list_sessions(ALL)) == [("first", 3), ("second", 2)]


@pytest.mark.slow
def test_a_batch_sent_again_adds_nothing_and_keys_are_required(server_db):
    db, key = server_db
    port = free_port()
    with Served(db, port):
        sink = HttpSink(f"http://127.0.0.1:{port}", key)
        batch = [SessionStarted(session_id="S1", started_at="2026-01-01T00:00:00Z", agent="a"),
                 CallRecorded(call_id="C1", session_id="S1", exchange_id=None, started_at="2026-01-01T00:00:01Z",
                              request={"messages": [{"role": "user", "content": "hi"}]}, response=None)]
        sink.write_batch(batch)
        sink.write_batch(batch)  # a retry after a lost answer: the same body, the same batch id
        no_key = HttpSink(f"http://127.0.0.1:{port}")
        with pytest.raises(OSError, match="401 no API key"):
            no_key.write_batch(batch)
    store = open_store(db, read_only=True)
    assert (store.status()["counts"]["calls"], store.status()["rejected_records"]) == (1, 0)


@pytest.mark.slow
def test_batches_are_sized_to_the_servers_limit(server_db, monkeypatch):
    db, key = server_db
    monkeypatch.setattr(ingest, "MAX_BYTES", 20_000)
    client = TestClient(create_app(lambda: open_store(db)))
    too_big = b'{"$reasonlog":"batch","id":"x","counters":{}}\n' + b" " * 20_001
    r = client.post("/v1/ingest", content=too_big, headers={"Authorization": f"Bearer {key}"})
    assert (r.status_code, r.json()["detail"]) == (413, "body: 20047 bytes, more than max_bytes 20000")
    port = free_port()
    with Served(db, port):
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key)  # background: batches of many events
        with rec.session(agent="big") as s:  # 30 calls of 3 KB: about 100 KB, sent as bodies under 20 KB
            for i in range(30):
                s.call(messages=[{"role": "user", "content": f"{i} " + "y" * 3_000}], response="ok")
        assert rec.close() is True
    (session,) = open_store(db, read_only=True).list_sessions(ALL)
    assert session["call_count"] == 30


@pytest.mark.slow
def test_while_the_server_is_down_batches_wait_and_arrive_once(server_db):
    db, key = server_db
    port = free_port()
    rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key, writer="sync")
    record(rec, 2, agent="patient")  # nobody listens: spilled in the user data folder
    assert open_store(db, read_only=True).count_sessions(ALL) == 0
    with Served(db, port):
        record(rec, 1, agent="later")  # the waiting batches go first, then this one
        rec.close()
    store = open_store(db, read_only=True)
    agents = sorted((s["agent"], s["call_count"]) for s in store.list_sessions(ALL))
    assert agents == [("later", 1), ("patient", 2)]
    assert store.status()["rejected_records"] == 0


@pytest.mark.slow
def test_an_event_larger_than_the_server_takes_waits_in_a_spill_file_and_holds_up_nothing(server_db, tmp_path):
    """One message past max_bytes cannot be sent in any body: the calls around it arrive, it waits (not lost)
    with a reason that names the limit, and it arrives once a server takes bodies that large."""
    db, key = server_db
    port = free_port()
    big = "z" * 50_000
    with Served(db, port, max_body_bytes=20_000):
        rec = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key)  # background: one batch for all
        with rec.session(agent="huge") as s:
            s.call(messages=[{"role": "user", "content": "small before"}], response="ok")
            s.call(messages=[{"role": "user", "content": big}], response="ok")
            s.call(messages=[{"role": "user", "content": "small after"}], response="ok")
        rec.close()
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    assert session["call_count"] == 2  # both small calls, the one after the big one too
    spills = sorted((tmp_path / "data").rglob("*.spill"))
    assert len(spills) == 1 and big.encode() in spills[0].read_bytes()
    with Served(db, port, max_body_bytes=200_000):
        later = reasonlog.Recorder(f"http://127.0.0.1:{port}", api_key=key, writer="sync")
        later.close()  # opening replays what waits
    store = open_store(db, read_only=True)
    (session,) = store.list_sessions(ALL)
    assert session["call_count"] == 3
    assert store.status()["rejected_records"] == 0
    assert sorted((tmp_path / "data").rglob("*.spill")) == []



def test_an_error_page_that_is_not_json_is_named_by_its_status_and_phrase():
    """A gateway in front of the server answers with HTML: the recorder's error says the status and its phrase."""
    from http.server import BaseHTTPRequestHandler

    from local_http import LocalHTTPServer

    class Gateway(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            page = b"<html>upstream down</html>"
            self.send_response(502, "Bad Gateway")
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = LocalHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = HttpSink(f"http://127.0.0.1:{server.server_port}")
        with pytest.raises(OSError, match="/v1/ingest: 502 Bad Gateway$"):
            sink.write_batch([SessionStarted(session_id="S1", started_at="2026-01-01T00:00:00Z", agent="a")])
    finally:
        server.stop()
