"""Faults of the store itself: threads sharing compressors, and a disk that fills up.

The concurrency test runs in a child process: a crash there (SIGSEGV, "double free") must fail
the test, not kill pytest. It and the reader beside a writer run on SQLite and PostgreSQL; a full disk is
SQLite's (a file's pages; PostgreSQL's disk is its server's).
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import fresh_database

import reasonlog
from reasonlog.wire.codec import canonical

TESTS = Path(__file__).resolve().parent
BENCH = TESTS.parent.parent / "shared" / "bench"
SEEDS_PER_WRITER = 4  # 4 × 240 calls per recorder


def _writer_seeds(i: int) -> range:
    return range(i * 10, i * 10 + SEEDS_PER_WRITER)


def _workloads(seeds: range) -> list[list[dict]]:
    sys.path.insert(0, str(BENCH))
    import workload

    return [list(workload.generate("small", seed=seed)) for seed in seeds]


def _record(path: Path | str, workloads: list[list[dict]], errors: list | None = None, **options) -> None:
    sys.path.insert(0, str(TESTS))
    from helpers import record_workload

    rec = reasonlog.Recorder(path, **options)
    for calls in workloads:
        record_workload(rec, calls)
    rec.close(timeout=60)
    if errors is not None and rec.stats()["last_error"] is not None:
        errors.append(f"{path}: {rec.stats()['last_error']}")


def _read_until(path: Path | str, expected: dict[str, bytes], stop: threading.Event, errors: list[str]) -> None:
    """Replay every call of `path` over and over, as a dashboard would, until told to stop."""
    store = reasonlog.open_store(path)
    try:
        while not stop.is_set():
            for session in store.list_sessions(reasonlog.SessionFilter(limit=None)):
                store.get_session(session["id"])
            for call_id, request in expected.items():
                if canonical(store.replay_call(call_id)) != request:
                    errors.append(f"replay of {call_id} differs")
    except Exception as exc:  # noqa: BLE001  (reported to the parent, which fails the test)
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


def _child(targets: list[str]) -> None:
    """Two recorders on two databases and two readers of a third, all at once, in this process."""
    read_db, *write_dbs = targets
    readable = _workloads(range(100, 101))
    _record(read_db, readable)
    expected = {c["call_id"]: canonical(c["request"]) for calls in readable for c in calls}
    stop, errors = threading.Event(), []
    readers = [threading.Thread(target=_read_until, args=(read_db, expected, stop, errors)) for _ in range(2)]
    writers = [threading.Thread(target=_record, args=(db, _workloads(_writer_seeds(i)), errors),
                                kwargs={"batch_size": 40, "flush_interval": 0.01}) for i, db in enumerate(write_dbs)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    print(json.dumps({"errors": errors}))


def test_two_recorders_and_two_readers_in_one_process_neither_crash_nor_lose_calls(dialect, tmp_path):
    with contextlib.ExitStack() as databases:
        targets = [str(databases.enter_context(fresh_database(dialect, _folder(tmp_path, name))))
                   for name in ("read", "w0", "w1")]
        child = subprocess.run([sys.executable, __file__, *targets], capture_output=True, text=True, timeout=300)
        assert child.returncode == 0, f"child died ({child.returncode}): {child.stderr[-2000:]}"
        assert json.loads(child.stdout.splitlines()[-1]) == {"errors": []}  # no store error, no wrong replay
        for i, path in enumerate(targets[1:]):
            workloads = _workloads(_writer_seeds(i))
            store = reasonlog.open_store(path)
            try:
                status = store.status()
                assert status["counts"]["calls"] == 240 * SEEDS_PER_WRITER
                # Batches the writer could not keep up with may spill and come back; none may fail or wait.
                assert (status["pending_spill_files"], status["dropped_records"], status["rejected_records"]) == \
                    ([], 0, 0)
                for c in (c for calls in workloads for c in calls):
                    assert canonical(store.replay_call(c["call_id"])) == canonical(c["request"]), c["call_id"]
            finally:
                store.close()


def _folder(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


# ------------------------------------------------------------------ a full disk

# 16 KiB pages past the empty schema: the first 40 calls' batches need 8, and 6 more when their text is indexed in
# bulk at close (migration 25): the disk fills part way through the batches
ROOM_PAGES = 4


def _check_everything_arrived_once(path: Path, calls: list[dict]) -> None:
    store = reasonlog.open_store(path)
    try:
        status = store.status()
        assert (status["counts"]["calls"], status["pending_spill_files"]) == (len(calls), [])
        for c in calls:
            assert canonical(store.replay_call(c["call_id"])) == canonical(c["request"]), c["call_id"]
        sessions = store.list_sessions(reasonlog.SessionFilter(limit=None))
        assert sum(len(store.get_session(s["id"])["calls"]) for s in sessions) == len(calls)
        exported = [r for r in store.export_records() if r["type"] == "call"]
        assert sorted(r["id"] for r in exported) == sorted(c["call_id"] for c in calls)
    finally:
        store.close()


@pytest.mark.slow
def test_a_full_disk_then_free_space_leaves_every_call_stored_once_and_replaying_exactly(db_path):
    """SQLite only: the file capped at a number of pages (PostgreSQL's disk is its server's)."""
    calls = _workloads(range(7, 8))[0][:60]
    reasonlog.open_store(db_path).close()
    with sqlite3.connect(db_path) as conn:
        empty = conn.execute("PRAGMA page_count").fetchone()[0]  # the schema alone
    full = _record_stats(db_path, calls[:40], store_options={"max_page_count": empty + ROOM_PAGES})
    assert full["spilled_batches"] > 0 and "full" in full["last_error"]  # the disk did fill
    _record_stats(db_path, calls[40:])  # space again: what waited is written first, then the rest
    _check_everything_arrived_once(db_path, calls)


@pytest.mark.slow
def test_a_full_disk_while_waiting_text_is_indexed_at_close_loses_nothing_search_finds(db_path):
    """The batches fit, the bulk index of their text at close does not (migration 25): the text waits, search still
    finds it, and the next writer with room indexes it (with its own) when it closes."""
    calls = _workloads(range(7, 8))[0][:60]
    reasonlog.open_store(db_path).close()
    with sqlite3.connect(db_path) as conn:
        empty = conn.execute("PRAGMA page_count").fetchone()[0]
    full = _record_stats(db_path, calls[:40], store_options={"max_page_count": empty + 2 * ROOM_PAGES})
    assert full["spilled_batches"] == 0  # every batch was written
    assert _waiting(db_path) > 0  # the index's catch-up met the full disk
    phrases = [_said(c) for c in calls]
    _check_found(db_path, phrases[:40])
    _record_stats(db_path, calls[40:])  # room again
    assert _waiting(db_path) == 0
    _check_found(db_path, phrases)
    _check_everything_arrived_once(db_path, calls)


def _waiting(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM search_pending").fetchone()[0]


def _said(call: dict) -> str:
    """Words of the call's last message that holds text (what a person would search for)."""
    for message in reversed(call["request"]["messages"]):
        content = message["content"]
        texts = [content] if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"]
        if texts:
            return " ".join(texts[0].split()[:4])
    raise AssertionError(f"{call['call_id']}: no message holds text")


def _check_found(path: Path, phrases: list[str]) -> None:
    store = reasonlog.open_store(path, read_only=True)
    try:
        for phrase in phrases:
            assert store.search(phrase, reasonlog.SessionFilter(limit=None), None), phrase
    finally:
        store.close()


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as probe:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], capture_output=True).returncode:
            return False
        subprocess.run(["umount", probe], check=False)
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root and tmpfs mounts")
def test_a_real_full_disk_then_more_space_leaves_every_call_stored_once_and_replaying_exactly(tmp_path):
    """SQLite only: the file on a small tmpfs (PostgreSQL's disk is its server's)."""
    calls = _workloads(range(7, 8))[0][:60]
    mount, spilled = tmp_path / "small", tmp_path / "spill"
    mount.mkdir(), spilled.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3072k", "tmpfs", str(mount)], check=True)
    try:
        db = mount / "full.db"
        (mount / "full.db.spill").symlink_to(spilled)  # spill files wait on a disk with room
        reasonlog.open_store(db).close()
        full = _record_stats(db, calls[:40])
        assert full["spilled_batches"] > 0 and "full" in full["last_error"]  # the disk did fill
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        _record_stats(db, calls[40:])
        _check_everything_arrived_once(db, calls)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _record_stats(path: Path, calls: list[dict], **options) -> dict:
    sys.path.insert(0, str(TESTS))
    from helpers import record_workload

    rec = reasonlog.Recorder(path, writer="sync", **options)
    record_workload(rec, calls)
    rec.close()
    return rec.stats()


if __name__ == "__main__":
    _child(sys.argv[1:])


@pytest.mark.slow
def test_a_reader_opened_beside_a_writer_sees_what_other_processes_write(db):
    """Opening a second store on a database must not drop the first one's locks: on SQLite, a process that saw no
    other connection would checkpoint and remove the WAL under this one, whose reads would then stay stale."""
    from conftest import FIXTURES

    writer = reasonlog.open_store(db)
    reader = reasonlog.open_store(db, read_only=True)
    spotter = FIXTURES / "claude-code-transcripts" / "spotter"
    seen = []
    try:
        for name in ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"):
            done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "import", str(spotter / name)],
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            seen.append(len(reader.list_sessions(reasonlog.SessionFilter(limit=None))))
        assert seen == [1, 2, 4]
        assert len(writer.list_sessions(reasonlog.SessionFilter(limit=None))) == 4
    finally:
        reader.close()
        writer.close()
