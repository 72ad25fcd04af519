"""`reasonlog serve` told to stop (SIGTERM) while requests are under way ends within a few seconds, and every
batch it answered is in the database: a client stalled in the middle of its body, and a write blocked behind
another process's lock whose client has gone, hold it up no longer than the grace it was given."""
from __future__ import annotations

import contextlib
import signal
import socket
import sqlite3
import time

import httpx
import psycopg
from test_server_recovery import batch, serve

from reasonlog.store import SessionFilter, open_store

GRACE_S = 3.0  # `reasonlog serve`'s default --shutdown-grace
ENDS_WITHIN_S = GRACE_S + 2.0 + 1.5  # the grace, the app's own shutdown, and the start-up of the signal's handling


def stalled_upload(base: str) -> socket.socket:
    """A request that announced a 1 MB body, sent 10 bytes of it and waits: the client is there, silent."""
    host, port = base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    conn.sendall(b"POST /v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n0123456789")
    return conn


def abandoned_blocked_write(base: str, db) -> tuple[object, None]:
    """Another process holds the lock the batch's write needs; the batch is sent whole, then its client goes."""
    if isinstance(db, str) and db.startswith("postgresql"):
        holder = psycopg.connect(db, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 7))", ("S00099",))
    else:
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the server's write waits its 5 s busy timeout: past the grace
    body = batch(99)
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(b"POST /v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.3)
    return holder, None


def test_sigterm_with_requests_under_way_ends_the_server_within_seconds_and_keeps_what_it_answered(db, tmp_path):
    open_store(db).close()
    process, base = serve(db, tmp_path)
    try:
        for n in range(5):
            assert httpx.post(f"{base}/v1/ingest", content=batch(n), timeout=30).status_code == 200
        stalled = stalled_upload(base)
        holder, _ = abandoned_blocked_write(base, db)
        time.sleep(0.5)
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        finally:
            took = time.monotonic() - began
            stalled.close()
            holder.close()
        assert took < ENDS_WITHIN_S, f"the server took {took:.1f} s to end"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with contextlib.closing(open_store(db, read_only=True)) as store:
        ids = sorted(s["id"] for s in store.list_sessions(SessionFilter(limit=None)))
    assert ids == [f"S{n:05d}" for n in range(5)]
