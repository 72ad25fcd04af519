"""What ingestion answers, on both dialects: what it wrote and what the store rejected (line and reason), a line
that lacks a field named with the field, bodies refused as soon as they pass the limit (never read whole), a
size limit on reasoning records too, every method in Allow, and no page but /healthz open once keys exist."""
from __future__ import annotations

import contextlib
import selectors
import socket
import time

import orjson
import pytest
from fastapi.testclient import TestClient
from pg_cluster import free_port
from test_ingest import Served

from reasonlog.capture.spillfiles import dump_event
from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.server.app import create_app
from reasonlog.store import open_store

AT = "2026-01-01T00:00:00Z"


def body(batch_id: str, *events) -> bytes:
    header = orjson.dumps({"$reasonlog": "batch", "id": batch_id, "counters": {}})
    return b"\n".join([header, *(e if isinstance(e, bytes) else dump_event(e) for e in events)])


def call(call_id: str, session_id: str) -> CallRecorded:
    return CallRecorded(call_id=call_id, session_id=session_id, exchange_id=None, started_at=AT,
                        request={"messages": [{"role": "user", "content": call_id}]}, response=None)


@pytest.fixture
def client(db):
    with TestClient(create_app(lambda: open_store(db))) as client:  # its end closes the app's stores
        yield client


def test_the_answer_says_what_was_written_and_what_the_store_rejected_with_its_line(client, db):
    answer = client.post("/v1/ingest", content=body("b1", SessionStarted(session_id="S1", started_at=AT),
                                                    call("C1", "S1"), call("C2", "NOPE"), call("C3", "S1")))
    assert answer.status_code == 200
    assert answer.json() == {"batch_id": "b1", "events": 3, "duplicate": False, "spilled": False, "rejected": [
        {"line": 4, "reason": "RecordError: session_id: no session 'NOPE' in the store"}]}
    answer = client.post("/v1/ingest", content=body("b2", call("C4", "NOPE"), call("C5", "GONE")))
    assert answer.status_code == 422
    assert answer.json() == {"detail": "the store rejected every event", "batch_id": "b2", "events": 0,
                             "duplicate": False, "spilled": False, "rejected": [
                                 {"line": 2, "reason": "RecordError: session_id: no session 'NOPE' in the store"},
                                 {"line": 3, "reason": "RecordError: session_id: no session 'GONE' in the store"}]}
    with contextlib.closing(open_store(db, read_only=True)) as store:
        assert store.status()["counts"]["calls"] == 2


def test_a_line_that_lacks_a_field_is_answered_with_the_fields_name(client):
    line = orjson.dumps({"event": "call", "call_id": "C1", "session_id": "S1", "exchange_id": None,
                         "started_at": AT, "response": None, "colour": "red"})
    answer = client.post("/v1/ingest", content=body("b3", line))
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail.startswith("line 2: a call event lacks request and has unknown colour; it takes call_id,"
                             " session_id, exchange_id, started_at, request, response (required) and model,")
    assert "TypeError" not in detail and "__init__" not in detail


@pytest.mark.parametrize("batch_id", ["../../escape", "", ".hidden", "a/b", "x" * 129, "nul\x00"])
def test_a_batch_id_that_cannot_name_a_spill_file_is_refused_naming_the_field(client, db, batch_id):
    answer = client.post("/v1/ingest", content=body(batch_id, SessionStarted(session_id="S1", started_at=AT)))
    assert (answer.status_code, answer.json()["detail"]) == (422, f"line 1: id {batch_id[:140]!r}: expected 1 to 128"
                                                                  " letters, digits, '.', '_' or '-', not starting"
                                                                  " with '.'")
    with contextlib.closing(open_store(db, read_only=True)) as store:
        assert store.status()["counts"]["sessions"] == 0


def test_options_allows_both_methods_of_a_route(client):
    for path in ("/v1/ingest", "/v1/reasoning-records"):
        answer = client.options(path)
        assert (path, answer.status_code, answer.headers["allow"]) == (path, 204, "GET, POST, OPTIONS")


def test_once_a_key_exists_only_healthz_answers_without_one(db):
    with contextlib.closing(open_store(db)) as store:
        secret = store.create_api_key("read", "dash")["secret"]
    with TestClient(create_app(lambda: open_store(db))) as client:
        check_keys(client, secret)


def check_keys(client: TestClient, secret: str) -> None:
    for path in ("/readyz", "/openapi.json", "/docs", "/redoc"):
        assert (path, client.get(path).status_code) == (path, 401)
        assert (path, client.get(path, headers={"Authorization": f"Bearer {secret}"}).status_code) == (path, 200)
    assert client.get("/healthz").status_code == 200
    client.cookies.set("reasonlog_key", secret)  # signed in to the dashboard: its browser reads the docs too
    assert client.get("/openapi.json").status_code == 200


def test_a_reasoning_record_past_the_body_limit_is_a_413(db):
    record = {"session": "s", "phase": "completion", "compact": {"summary": "done"}, "details": "x" * (2 << 20)}
    with TestClient(create_app(lambda: open_store(db), max_body_bytes=1 << 20)) as client:
        answer = client.post("/v1/reasoning-records", json=record)
    assert (answer.status_code, answer.json()["detail"]) == (413, f"body: {len(orjson.dumps(record))} bytes,"
                                                                  " more than max_bytes 1048576")


def sent_before_the_answer(port: int, path: str, total: int, chunk: int = 256 << 10) -> tuple[int, bytes]:
    """Send `total` bytes to `path` in chunks (Transfer-Encoding: chunked, no length said), stopping when the
    server answers; how many bytes went before it did, and the answer's first line."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    sent, piece = 0, b"%x\r\n%s\r\n" % (chunk, b"\n" * chunk)
    deadline = time.monotonic() + 60
    answered = selectors.DefaultSelector()  # epoll: no limit on the descriptor's number, unlike select()
    answered.register(conn, selectors.EVENT_READ)
    try:
        while sent < total and time.monotonic() < deadline:
            if answered.select(0):
                break  # the answer is there
            conn.settimeout(5)
            try:
                conn.sendall(piece)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                break  # the server stopped reading
            sent += chunk
        conn.settimeout(30)
        return sent, conn.recv(200).split(b"\r\n")[0]
    finally:
        answered.close()
        conn.close()


@pytest.mark.parametrize("path", ["/v1/ingest", "/v1/traces"])
def test_a_chunked_body_past_the_limit_is_refused_before_it_is_read_whole(db, path):
    port = free_port()
    with Served(db, port, max_body_bytes=1 << 20):
        sent, status = sent_before_the_answer(port, path, 256 << 20)
    assert status == b"HTTP/1.1 413 Request Entity Too Large"
    # The answer came after the limit, and long before the 256 MB: what the sockets' buffers hold at most.
    assert (1 << 20) < sent < (32 << 20), sent
