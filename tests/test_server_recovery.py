"""`reasonlog serve` outlives its PostgreSQL: restarted under load, stopped and started again, the server answers
503 with Retry-After while the database is away (never a 500), 200 again within seconds of its return with no
restart of its own, and every batch a client sent (retrying on 503) is stored once.

The test runs its own throwaway cluster (tests/pg_cluster.py): the shared test server is never restarted.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import pg_cluster
import pytest

from reasonlog.capture.spillfiles import dump_event
from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.store import SessionFilter, open_store

BACK_WITHIN_S = 5.0  # the promise: 200 again this soon after the database is back
READS = ["/readyz", "/v1/sessions?agent=load", "/v1/stats?by=model", "/", "/usage"]


@pytest.fixture
def cluster():
    bindir = pg_cluster.binaries()
    if bindir is None:
        if os.environ.get("REASONLOG_REQUIRE_POSTGRES"):
            pytest.fail("REASONLOG_REQUIRE_POSTGRES is set but no PostgreSQL binaries (initdb, pg_ctl) were found")
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl): install PostgreSQL to run the restart tests")
    cluster = pg_cluster.Cluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


def serve(url: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """`reasonlog serve` on `url` in a process of its own; the base URL once /healthz answers."""
    port = pg_cluster.free_port()
    env = {**os.environ, "REASONLOG_DB": url, "XDG_DATA_HOME": str(tmp_path / "data")}
    process = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "wb"))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"the server did not start: {(tmp_path / 'serve.log').read_text()}")


def batch(n: int) -> bytes:
    """Ingestion body n: its own session with one call."""
    sid, at = f"S{n:05d}", f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z"
    events = [SessionStarted(session_id=sid, started_at=at, agent="load", model="gpt-5"),
              CallRecorded(call_id=f"C{n:05d}", session_id=sid, exchange_id=None, started_at=at, model="gpt-5",
                           request={"messages": [{"role": "user", "content": f"question {n}"}]},
                           response={"role": "assistant", "content": f"answer {n}"})]
    header = orjson.dumps({"$reasonlog": "batch", "id": f"batch-{n}", "counters": {}})
    return b"\n".join([header, *map(dump_event, events)])


class Load:
    """A client in a thread sending batches (each again after a 503, as recorders do) and reading every route in
    READS between them, keeping every status it got. Bounded: it stops when told, or after `limit_s`."""

    def __init__(self, base: str, limit_s: float = 120.0):
        self.base, self.limit_s = base, limit_s
        self.sent, self.statuses, self.unavailable_without_retry_after = 0, [], []
        self.failure: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait_for_batches(self, more: int, within_s: float = 60.0) -> None:
        """Until `more` batches more were stored (failing after `within_s`, or when the client failed)."""
        goal, deadline = self.sent + more, time.monotonic() + within_s
        while self.sent < goal:
            assert self._thread.is_alive(), f"the client stopped: {self.failure!r}; statuses {set(self.statuses)}"
            assert time.monotonic() < deadline, f"{more} batches took over {within_s} s: {set(self.statuses)}"
            time.sleep(0.05)

    def _run(self) -> None:
        try:
            self._load()
        except Exception as exc:  # noqa: BLE001 - kept for the test to report
            self.failure = exc

    def _load(self) -> None:
        deadline = time.monotonic() + self.limit_s
        with httpx.Client(base_url=self.base, timeout=20) as client:
            while not self._stop.is_set() and time.monotonic() < deadline:
                self._ingest(client, batch(self.sent), deadline)
                self.sent += 1
                for path in READS:
                    self._note(client.get(path, headers={"Accept": "text/html"} if "/v1" not in path else {}))

    def _ingest(self, client: httpx.Client, body: bytes, deadline: float) -> None:
        while time.monotonic() < deadline:
            answer = client.post("/v1/ingest", content=body)
            self._note(answer)
            if answer.status_code != 503:
                return
            time.sleep(0.2)

    def _note(self, answer: httpx.Response) -> None:
        self.statuses.append(answer.status_code)
        if answer.status_code == 503 and "retry-after" not in answer.headers:
            self.unavailable_without_retry_after.append(str(answer.url))


def wait_for(base: str, path: str, status: int, within_s: float) -> float:
    """Seconds until `path` answers `status` (failing after `within_s`)."""
    began = time.monotonic()
    while time.monotonic() - began < within_s:
        if httpx.get(base + path, timeout=10).status_code == status:
            return time.monotonic() - began
        time.sleep(0.05)
    raise AssertionError(f"{path} did not answer {status} within {within_s} s")


def test_the_server_recovers_from_a_postgresql_restart_under_load_and_loses_nothing(cluster, tmp_path):
    process, base = serve(cluster.url, tmp_path)
    try:
        with Load(base) as load:
            wait_for(base, "/readyz", 200, 30)
            load.wait_for_batches(20)
            cluster.restart()  # fast: every connection the server held is cut
            load.wait_for_batches(20)
            cluster.stop()
            for path in READS:  # away: 503 and when to ask again, on every route
                answer = httpx.get(base + path, timeout=10)
                assert (path, answer.status_code, answer.headers.get("retry-after")) == (path, 503, "2")
            assert httpx.post(base + "/v1/ingest", content=batch(99_999), timeout=10).status_code == 503
            cluster.start()
            assert wait_for(base, "/readyz", 200, BACK_WITHIN_S) < BACK_WITHIN_S
            load.wait_for_batches(20)
        assert set(load.statuses) <= {200, 503} and load.statuses.count(200) > 0, sorted(set(load.statuses))
        assert load.unavailable_without_retry_after == []
        assert process.poll() is None  # recovered without a restart of its own
    finally:
        process.terminate()
        process.wait(30)
    with contextlib.closing(open_store(cluster.url, read_only=True)) as store:
        sessions, calls = store.list_sessions(SessionFilter(limit=None)), store.status()["counts"]["calls"]
    assert (len(sessions), calls) == (load.sent, load.sent)
