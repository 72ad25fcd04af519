"""Nothing lost, nothing crashed: the writer, its sinks, spill files, back-pressure, loss counting and liveness.

Every test breaks something on purpose: a locked database, a slow sink, a killed process, two
processes replaying the same spill files, a process whose pid lives on after its recorder died.
Each runs on SQLite and on PostgreSQL (`db_target` over the `dialect` fixture).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest
from helpers import Locked, is_postgres, spill_folder

import reasonlog

try:
    from reasonlog.capture.sinks import SpillingSink, StoreSink
except ImportError:  # before the fix: only the tests that inject a sink need it
    SpillingSink = StoreSink = object  # type: ignore[misc,assignment]
from reasonlog.capture.spillfiles import spill_dirs

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "reasonlog"]


@pytest.fixture
def db_target(db):
    """This suite runs on SQLite and on PostgreSQL."""
    return db


def _run(code: str, db: Path | str, *, wait: bool = True, **kw):
    args = [sys.executable, "-c", textwrap.dedent(code)]
    env = {**os.environ, "REASONLOG_DB": str(db)}
    if not wait:
        return subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # stdin stays open: the child waits on it
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, **kw)


class NotJSON:
    """Something no JSON form can hold."""


# ------------------------------------------------------------------ defect 4: one bad event never drops its batch

def test_values_json_cannot_hold_spill_and_come_back_and_only_the_unspillable_event_is_rejected(db_target, store_of):
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, flush_interval=60, store_options={"busy_timeout_ms": 20})
        with rec.session(agent="odd values") as s:
            raw = s.call(messages=[{"role": "user", "content": "raw bytes"}], response="a", raw=b"\x00\xffpayload")
            big = s.call(messages=[{"role": "user", "content": "big"}], response="b", params={"seed": 2 ** 70})
            s.call(messages=[{"role": "user", "content": NotJSON()}], response="never")
            last = s.call(messages=[{"role": "user", "content": "last"}], response="d")
            sid = s.id
        rec.close()
        stats = rec.stats()
    assert (stats["dropped"], stats["rejected"], stats["spilled_batches"]) == (0, 1, 1)

    reasonlog.Recorder(db_target).close()  # opening for writing replays what waited
    store = store_of()
    calls = {c["id"]: c for c in store.get_session(sid)["calls"]}
    assert sorted(calls) == sorted([raw, last])  # the store itself rejects a 70-bit integer, as when not spilled
    assert store.get_call(raw)["raw"] == "\x00\ufffdpayload"  # as when written straight to the store
    assert store.get_session(sid)["status"] == "completed"
    status = store.status()
    assert (status["rejected_records"], status["dropped_records"], status["pending_spill_files"]) == (2, 0, [])
    assert big not in calls


@pytest.mark.slow
def test_a_spilled_batch_keeps_its_count_of_masked_secrets(db_target, store_of):
    key = "sk-ant-api03-" + "A" * 90
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, writer="sync", store_options={"busy_timeout_ms": 20})
        with rec.session(agent="secrets") as s:
            s.call(messages=[{"role": "user", "content": f"my key is {key}"}], response=f"and again {key}")
        rec.close()
    spilled = b"".join(p.read_bytes() for p in spill_folder(db_target).glob("*.spill"))
    assert key.encode() not in spilled
    reasonlog.Recorder(db_target).close()
    assert store_of().status()["redacted_secrets"] == 2


# ------------------------------------------------------------------ defect 2: the spill queue is never blocked

def _craft_spill(db: Path | str, lines: list) -> Path:
    folder = spill_folder(db)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "01J0000000000000000000000A.spill"
    path.write_bytes(b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in lines))
    return path


@pytest.mark.slow
def test_an_event_the_store_cannot_take_on_replay_is_set_aside_and_the_rest_is_written(db_target, store_of):
    reasonlog.open_store(db_target).close()
    started = {"event": "session_started", "session_id": "S1", "started_at": "2025-01-01T00:00:00Z"}
    call = {"event": "call", "session_id": "S1", "exchange_id": None, "started_at": 1.7e9, "response": None}
    _craft_spill(db_target, [
        started,
        {**call, "call_id": "C1", "request": {"messages": [{"role": "user", "content": "one"}]}},
        {**call, "call_id": "C2", "request": "a request that is not a dict"},  # the store fails on it
        b'{"event": "no such event"}',
        {**call, "call_id": "C3", "request": {"messages": [{"role": "user", "content": "three"}]}},
        {"event": "session_ended", "session_id": "S1", "ended_at": "2025-01-01T00:01:00Z"},
    ])
    out = subprocess.run(CLI + ["--db", str(db_target), "db", "upgrade"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    store = store_of()
    session = store.get_session("S1")
    assert [c["id"] for c in session["calls"]] == ["C1", "C3"] and session["status"] == "completed"
    status = store.status()
    assert (status["pending_spill_files"], status["set_aside_records"]) == ([], 2)
    aside = [json.loads(line) for line in (spill_folder(db_target) / "set-aside.jsonl").read_text().splitlines()]
    assert sorted(str(a.get("event", {}).get("call_id")) for a in aside) == ["C2", "None"]
    assert all(a["file"] == "01J0000000000000000000000A.spill" and a["error"] for a in aside)
    cli = subprocess.run(CLI + ["--db", str(db_target), "db", "status"], capture_output=True, text=True, timeout=60)
    assert "set_aside_records" in cli.stdout and "2" in cli.stdout


@pytest.mark.slow
def test_opening_for_writing_replays_spill_files_even_when_nothing_new_is_recorded(db_target, store_of):
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, writer="sync", store_options={"busy_timeout_ms": 20})
        with rec.session(agent="waiting") as s:
            s.call(messages=[{"role": "user", "content": "q"}], response="a")
        rec.close()
    assert len(list(spill_folder(db_target).glob("*.spill"))) == 3
    reasonlog.Recorder(db_target).close()
    status = store_of().status()
    assert (status["pending_spill_files"], status["counts"]["calls"], status["replayed_batches"]) == ([], 1, 3)


@pytest.mark.slow
def test_two_processes_replaying_the_same_spill_files_write_each_once(db_target, store_of):
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, writer="sync", store_options={"busy_timeout_ms": 5})
        with rec.session(agent="twice?") as s:
            for i in range(30):
                s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
        rec.close()
    files = len(list(spill_folder(db_target).glob("*.spill")))
    assert files == 32
    procs = [subprocess.Popen(CLI + ["--db", str(db_target), "db", "upgrade"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0 and "Traceback" not in err, err
    status = store_of().status()
    assert (status["counts"]["calls"], status["replayed_batches"], status["pending_spill_files"]) == (30, 32, [])


@pytest.mark.slow
def test_stale_and_empty_spill_files_are_cleaned_up(db_target, store_of):
    reasonlog.open_store(db_target).close()
    folder = spill_folder(db_target)
    folder.mkdir(parents=True)
    (folder / "01J0000000000000000000000B.tmp").write_bytes(b'{"event": "session_st')  # a writer died mid-file
    (folder / "01J0000000000000000000000C.spill").write_bytes(b"")
    reasonlog.Recorder(db_target).close()
    assert sorted(p.name for p in folder.iterdir()) == [".replay.lock"]
    assert store_of().status()["unreadable_spill_files"] == []


def _files_a_store_may_leave(target) -> list[str]:
    """Every file beside a SQLite database (its WAL aside, which SQLite keeps as it likes) and in the folders a
    recorder spills to (for a PostgreSQL URL, only those: it has no 'beside')."""
    folders = [*([] if is_postgres(target) else [target.parent]), *spill_dirs(target)]
    return sorted(str(p) for folder in folders if folder.exists() for p in folder.iterdir()
                  if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.slow
def test_a_reading_command_leaves_no_files_beside_the_database(db_target):
    rec = reasonlog.Recorder(db_target)
    rec.session(agent="read me").end()
    rec.close()
    before = _files_a_store_may_leave(db_target)
    out = subprocess.run(CLI + ["--db", str(db_target), "sessions"], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.count("read me")) == (0, 1), out.stderr
    assert _files_a_store_may_leave(db_target) == before


# ------------------------------------------------------------------ defect 5: every loss is counted, and kept

@pytest.mark.slow
def test_rejections_from_many_threads_are_all_counted(db_target, store_of):
    rec = reasonlog.Recorder(db_target, flush_interval=0.001)
    s = rec.session(agent="threads")

    def reject_many():
        for _ in range(3000):
            s.outcome("")  # an outcome needs a kind: rejected
            s.call(messages=[{"role": "user", "content": "fine"}], response="ok")

    threads = [threading.Thread(target=reject_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.end()
    rec.close()
    assert rec.stats()["rejected"] == 12_000
    assert store_of().status()["rejected_records"] == 12_000


@pytest.mark.slow
def test_rejections_while_the_database_cannot_be_written_are_counted_after_the_next_open(db_target, store_of):
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, writer="sync", store_options={"busy_timeout_ms": 20})
        for _ in range(7):
            rec.reject(reasonlog.RecordError("bad input"))
        rec.close()
    reasonlog.Recorder(db_target).close()
    assert store_of().status()["rejected_records"] == 7


@pytest.mark.slow
def test_drops_are_explicit_and_counted_exactly_even_when_the_database_is_locked(db_target, store_of):
    with Locked(db_target):
        rec = reasonlog.Recorder(db_target, on_full="drop", max_queue=5, flush_interval=60,
                                 store_options={"busy_timeout_ms": 20})
        with rec.session(agent="dropper") as s:
            for i in range(20):
                s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
        rec.close()
        stats = rec.stats()
    assert stats["dropped"] > 0 and stats["dropped"] + stats["spilled_events"] == 22
    reasonlog.Recorder(db_target).close()
    status = store_of().status()
    assert status["dropped_records"] == stats["dropped"]


# ------------------------------------------------------------------ defect 6: overload waits, then spills; never drops

class _SlowSink(StoreSink):
    """The real store, made slow: each event costs `per_event` seconds (a slow disk, a busy server)."""

    def __init__(self, db: Path | str, per_event: float):
        super().__init__(lambda: reasonlog.open_store(db))
        self.per_event, self.sizes = per_event, []

    def write_batch(self, events, counters=None, *, batch_id=None):
        time.sleep(self.per_event * len(events))
        self.sizes.append(len(events))
        return super().write_batch(events, counters, batch_id=batch_id)


@pytest.mark.slow
def test_a_full_queue_makes_the_caller_wait_instead_of_dropping(db_target, store_of):
    rec = reasonlog.Recorder(db_target, max_queue=100)
    with rec.session(agent="flat out") as s:
        for i in range(2000):
            s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
    rec.close()
    assert rec.stats()["dropped"] == 0
    assert store_of().status()["counts"]["calls"] == 2000


@pytest.mark.slow
def test_batches_are_sized_by_time_so_the_writer_commits_at_least_every_200_ms(db_target):
    sink = _SlowSink(db_target, per_event=0.002)
    rec = reasonlog.Recorder(db_target, sink=sink)
    with rec.session(agent="slow store") as s:
        for i in range(600):
            s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
    rec.close()
    assert sum(sink.sizes) == 602 and max(sink.sizes) <= 100  # 100 events x 2 ms = 200 ms


@pytest.mark.slow
def test_close_with_a_timeout_spills_what_is_still_queued_and_says_so(db_target, store_of, caplog):
    sink = SpillingSink(_SlowSink(db_target, per_event=0.01), spill_folder(db_target))
    rec = reasonlog.Recorder(db_target, sink=sink)
    s = rec.session(agent="closing in a hurry")
    for i in range(300):
        s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")
    s.end()
    with caplog.at_level(logging.WARNING, logger="reasonlog"):
        assert rec.close(timeout=0.3) is False
    assert "still pending" in caplog.text and rec.stats()["dropped"] == 0
    time.sleep(1.0)  # the batch being written when close gave up (50 events x 10 ms) commits meanwhile
    reasonlog.Recorder(db_target).close()
    status = store_of().status()
    assert (status["counts"]["calls"], status["dropped_records"], status["pending_spill_files"]) == (300, 0, [])


@pytest.mark.slow
def test_a_process_killed_while_recording_flat_out_loses_at_most_the_queue_bound(db_target, store_of):
    out = _run("""
        import os, signal, time, reasonlog
        rec = reasonlog.Recorder()
        s = rec.session(agent="killed flat out")
        t0, n = time.monotonic(), 0
        while time.monotonic() - t0 < 1.5:
            s.call(messages=[{"role": "user", "content": f"q{n}"}], response=f"a{n}")
            n += 1
        st = rec.stats()
        print(n, st["queue_bound"], st["batch_size"], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """, db_target)
    recorded, bound, batch = (int(x) for x in out.stdout.split())
    reasonlog.Recorder(db_target).close()  # the restart: what overflowed into spill files is written
    stored = store_of().status()["counts"]["calls"]
    # The queue bound, the batch being committed, and one event per MAX_WAIT (0.1 s) a caller waited in
    # vain (queued beyond the bound until the writer spills it): 15 in 1.5 s.
    assert 0 < recorded - stored <= bound + batch + 15, (recorded, stored, bound, batch)
    assert store_of().list_sessions(reasonlog.SessionFilter())[0]["status"] == "interrupted"


# ------------------------------------------------------------------ defect 7: liveness by a lock, not a pid

@pytest.mark.slow
def test_a_session_whose_pid_lives_on_but_whose_recorder_is_gone_is_interrupted(db_target, store_of):
    """The recorder execs another program: the pid stays alive (as after pid reuse, or pid 1 in a container)."""
    proc = _run("""
        import os, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="exec'd away")
        s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
        print(s.id, flush=True)
        os.execv("/bin/sleep", ["sleep", "30"])
    """, db_target, wait=False)
    try:
        sid = proc.stdout.readline().strip()
        time.sleep(0.2)
        assert proc.poll() is None  # the pid is alive
        assert store_of().get_session(sid)["status"] == "interrupted"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_session_of_a_live_recorder_stays_open_until_the_recorder_is_killed(db_target, store_of):
    proc = _run("""
        import sys, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="alive")
        print(s.id, flush=True)
        sys.stdin.read()
    """, db_target, wait=False)
    try:
        sid = proc.stdout.readline().strip()
        assert store_of().get_session(sid)["status"] == "open"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert store_of().get_session(sid)["status"] == "interrupted"


@pytest.mark.slow
def test_a_child_forked_by_a_recorder_does_not_keep_its_sessions_open_after_it_dies(db_target, store_of):
    """The child inherits the recorder's lock (a file's descriptor, a connection's socket) and must let go of it."""
    proc = _run("""
        import os, sys, time, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="forks a worker")
        s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        print(s.id, child, flush=True)
        sys.stdin.read()
    """, db_target, wait=False)
    sid, child = proc.stdout.readline().split()
    try:
        assert store_of().get_session(sid)["status"] == "open"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.kill(int(child), 0)  # the forked child lives on
        assert store_of().get_session(sid)["status"] == "interrupted"
    finally:
        proc.kill()
        proc.wait()
        os.kill(int(child), signal.SIGKILL)


class _Fatal(BaseException):
    """What no `except Exception` catches: a sink (user code behind Recorder(sink=...)) that dies hard."""


class _DyingSink(StoreSink):
    def write_batch(self, events, counters=None, *, batch_id=None):
        raise _Fatal("the sink died")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # it dies on purpose
def test_flush_never_waits_for_a_writer_thread_that_died(db_target, caplog):
    rec = reasonlog.Recorder(db_target, sink=_DyingSink(lambda: reasonlog.open_store(db_target)))
    with rec.session(agent="orphaned") as s:
        s.call(messages=[{"role": "user", "content": "q"}], response="a")
    done: list[bool] = []
    waiter = threading.Thread(target=lambda: done.append(rec.flush()), daemon=True)
    with caplog.at_level(logging.WARNING, logger="reasonlog"):
        waiter.start()
        waiter.join(10)
    assert done == [False]  # it answered, within seconds, instead of waiting for ever
    assert "writer thread is gone; 3 recorded events are still queued" in caplog.text
