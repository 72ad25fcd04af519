"""Keeping a database healthy: `db backup`, `db check`, `prune`, and what `db status` says about space.

`db backup` and `db check` work on SQLite files and on PostgreSQL name its own tools; `prune` works on both (on
PostgreSQL beside live writers: tests/test_pg_prune.py). The tests that take `db_target` run on both dialects;
those on `db_path` look inside the SQLite file (its pages, its full-text index, its bytes), which PostgreSQL
does not have.
"""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import is_postgres, query_db
from search_cases import block_texts

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.wire.codec import canonical

SHARED_SYSTEM = "You are a careful research agent. Cite every source you use and say when you are unsure."
PAGE = 16384


def _noise(seed: str, n: int) -> str:
    """`n` characters zstd cannot shrink, so that a pruned session frees pages we can count."""
    out, block = [], seed.encode()
    while sum(map(len, out)) < n:
        block = hashlib.sha256(block).digest()
        out.append(block.hex())
    return "".join(out)[:n]


def _session(rec: reasonlog.Recorder, run: str, words: str, big: int = 0) -> tuple[str, dict]:
    """One ended session of two calls sharing SHARED_SYSTEM; returns its id and its last request."""
    s = rec.session(agent="researcher", run=run, model="claude-sonnet-4-5")
    history = [{"role": "user", "content": f"{words} {_noise(run, big)}"}]
    for i in range(2):
        s.call(system=SHARED_SYSTEM, messages=list(history), response={"role": "assistant", "content": f"{run} {i}"})
        history += [{"role": "assistant", "content": f"{run} {i}"}, {"role": "user", "content": f"go on {run} {i}"}]
    s.end()
    return s.id, {"system": SHARED_SYSTEM, "messages": history[:-2]}


@pytest.fixture
def db_target(db):
    """The tests that take it run on SQLite and on PostgreSQL."""
    return db


def _cli(db: Path | str, *args: str):
    return CliRunner().invoke(cli, ["--db", str(db), *args])


def _file_pages(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA page_count").fetchone()[0], conn.execute("PRAGMA freelist_count").fetchone()[0]


def test_prune_removes_the_sessions_and_their_text_keeps_shared_contents_and_shrinks_the_file(db_path):
    """SQLite only: the file's pages and its FTS5 index (PostgreSQL's prune: tests/test_pg_prune.py)."""
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    _session(rec, "old", "qxjzqv marmalade", big=200_000)
    kept_id, kept_request = _session(rec, "new", "plain words")
    rec.close()
    store = reasonlog.open_store(db_path)
    assert [h["session_id"] for h in store.search("qxjzqv marmalade", reasonlog.SessionFilter())] != []
    store.close()

    dry = _cli(db_path, "prune", "--run", "old", "--dry-run")
    listed, said = dry.output.splitlines()[2:-1], dry.output.splitlines()[-1]  # issue 39: which, then how many
    assert (dry.exit_code, said.split(" (")[0]) == (0, "would remove 1 sessions, 2 calls, 5 messages, 4 contents")
    assert len(listed) == 1
    result = _cli(db_path, "prune", "--run", "old", "--yes")
    assert result.exit_code == 0, result.output

    store = reasonlog.open_store(db_path)
    try:
        assert store.search("qxjzqv marmalade", reasonlog.SessionFilter()) == []
        assert [s["id"] for s in store.list_sessions(reasonlog.SessionFilter())] == [kept_id]
        last_call = store.get_session(kept_id)["calls"][-1]["id"]
        replayed = store.replay_call(last_call)
        assert canonical({k: replayed[k] for k in ("system", "messages")}) == canonical(kept_request)
        assert store.status()["free_bytes"] == 0
    finally:
        store.close()
    assert not [t for t in block_texts(db_path).values() if "qxjzqv" in t]  # the searched text forgot it too
    pages, free = _file_pages(db_path)
    before, after = (int(x) for x in result.output.split("file ")[1].split(" bytes")[0].split(" -> "))
    assert (free, after, db_path.stat().st_size) == (0, pages * PAGE, pages * PAGE)
    assert _file_pages(_only_the_new_session(db_path.with_name("fresh.db"))) == (pages, 0)  # as if never recorded
    assert before > after
    assert _cli(db_path, "db", "check").exit_code == 0


def _only_the_new_session(path: Path) -> Path:
    rec = reasonlog.Recorder(path, writer="sync", strict=True)
    _session(rec, "new", "plain words")
    rec.close()
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def test_a_recorder_that_stays_open_across_a_prune_still_stores_what_replays(db_target):
    rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
    _session(rec, "old", "first")  # its system prompt is now in the writer's cache
    assert _cli(db_target, "prune", "--run", "old", "--yes").exit_code == 0  # and gone from the database
    kept_id, kept_request = _session(rec, "new", "second")
    rec.close()
    if not is_postgres(db_target):
        check = _cli(db_target, "db", "check")
        assert check.exit_code == 0, check.output
    store = reasonlog.open_store(db_target)
    try:
        replayed = store.replay_call(store.get_session(kept_id)["calls"][-1]["id"])
        assert canonical({k: replayed[k] for k in ("system", "messages")}) == canonical(kept_request)
        assert store.search("first", reasonlog.SessionFilter()) == []
        assert [h["session_id"] for h in store.search("second", reasonlog.SessionFilter())] == [kept_id]
    finally:
        store.close()


def test_prune_never_takes_an_open_session_unless_asked(db_target):
    rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
    s = rec.session(run="live")
    s.call(messages=[{"role": "user", "content": "hi"}], response="hello")
    rec.flush()
    assert _cli(db_target, "prune", "--run", "live", "--yes").output.startswith("nothing to prune: 0 sessions")
    result = _cli(db_target, "prune", "--run", "live", "--include-open", "--dry-run")
    assert result.output.splitlines()[-1].startswith("would remove 1 sessions, 1 calls, 2 messages")
    assert s.id in result.output  # the open session it would take, listed
    rec.close()


def test_a_backup_taken_while_another_thread_writes_holds_every_earlier_session_and_checks_clean(db_path, tmp_path):
    """SQLite only: a backup of the file (PostgreSQL's is pg_dump's)."""
    rec = reasonlog.Recorder(db_path, writer="sync")
    earlier = {_session(rec, f"before-{i}", f"words {i}")[0] for i in range(5)}
    stop = threading.Event()

    def keep_writing():
        n = 0
        while not stop.is_set():
            _session(rec, f"during-{n}", "more words")
            n += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        dest = tmp_path / "copy.db"
        result = _cli(db_path, "db", "backup", str(dest))
        again = _cli(db_path, "db", "backup", str(dest))
    finally:
        stop.set()
        writer.join()
        rec.close()
    assert result.exit_code == 0, result.output
    assert (again.exit_code, again.output) == (1, f"error: {dest} already exists; use --force to replace it\n")
    assert _cli(db_path, "db", "backup", str(dest), "--force").exit_code == 0
    check = _cli(dest, "db", "check")
    assert check.exit_code == 0, check.output
    copy = reasonlog.open_store(dest)
    try:
        ids = {s["id"] for s in copy.list_sessions(reasonlog.SessionFilter(limit=None))}
        assert earlier <= ids
        assert [len(copy.get_session(sid)["calls"]) for sid in sorted(earlier)] == [2] * 5
    finally:
        copy.close()


def test_check_names_a_corrupt_content_and_a_missing_one(db_path, tmp_path):
    """SQLite only: `db check` reads the file (PostgreSQL checks its pages with amcheck)."""
    rec = reasonlog.Recorder(db_path, writer="sync", strict=True)
    sid, _ = _session(rec, "run", "some words " * 20)
    rec.close()
    assert _cli(db_path, "db", "check").output.startswith("ok: 1 sessions, 0 exchanges, 2 calls")
    broken = tmp_path / "broken.db"
    shutil.copy(db_path, broken)
    with sqlite3.connect(broken) as conn:
        corrupt = conn.execute("SELECT id FROM contents WHERE codec = 1 ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE contents SET data = ? WHERE id = ?", (b"\x28\xb5\x2f\xfd garbage", corrupt))
        idx, gone = conn.execute("SELECT idx, content_id FROM messages WHERE role = 'assistant' ORDER BY idx"
                                 " LIMIT 1").fetchone()
        conn.execute("DELETE FROM contents WHERE id = ?", (gone,))
        conn.execute("INSERT INTO search_blocks (kind, lo, hi, ids, ends, data) VALUES (2, 7, 7, ?, ?, ?)",
                     ((7).to_bytes(8, "little"), (3).to_bytes(4, "little"), b"\x28\xb5\x2f\xfd garbage"))
        (bad_block,) = conn.execute("SELECT MAX(id) FROM search_blocks").fetchone()
    result = _cli(broken, "db", "check")
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert [ln for ln in lines if ln.startswith(f"content {corrupt} ")] == [
        next(ln for ln in lines if ln.startswith(f"content {corrupt} (message): cannot be decompressed"))]
    assert f"message {idx} of session {sid}: content {gone} is missing" in lines
    assert any(ln.startswith("call ") and ln.endswith(f"refers to missing content {gone}") for ln in lines)
    assert f"search blocks: hold the text of 1 contents no longer stored: [{gone}]" in lines
    assert any(ln.startswith(f"search block {bad_block}: cannot be read: ") for ln in lines)
    assert lines[-1].startswith(f"{len(lines) - 1} problem(s): ")


@pytest.mark.parametrize("args", [["db", "check"], ["db", "backup", "{tmp}/copy.db"],
                                  ["prune", "--older-than", "30d", "--yes"]])
def test_care_commands_never_create_a_missing_database(dialect, tmp_path, args):
    """A missing SQLite file, or a PostgreSQL database without reasonlog's tables (an empty schema)."""
    from conftest import empty_database

    (tmp_path / "db").mkdir()
    with empty_database(dialect, tmp_path / "db") as target:
        result = _cli(target, *[a.format(tmp=tmp_path) for a in args])
        missing = "no reasonlog database" if is_postgres(target) else "no database"
        assert (result.exit_code, result.output) == (1, f"error: {missing} at {target}\n")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]
        assert sorted(p.name for p in (tmp_path / "db").iterdir()) == []
        if is_postgres(target):
            assert query_db(target, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()") == [(0,)]


PG_BACKUP = "back up a PostgreSQL database with its own tools (pg_dump), or copy its sessions with `reasonlog export`"
PG_CHECK = "`db check` reads SQLite files; PostgreSQL checks its own pages (amcheck, pg_checksums)"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["prune", "--older-than", "30x"], 2,
     "error: --older-than: expected a number of days or hours like 30d or 12h, got '30x'"),
    (["prune", "--before", "last week"], 2, "error: --before: expected a date like 2025-01-31, got 'last week'"),
    (["prune"], 2, "error: say which sessions: --older-than, --before, --run, --agent or --model"),
    (["prune", "--older-than", "1d", "--before", "2025-01-01"], 2, "error: give --older-than or --before, not both"),
    (["db", "backup", "{tmp}"], 1, "error: {tmp} is a directory; give a file name for the backup"),
])
def test_bad_input_to_care_commands_gives_one_line(db_target, tmp_path, args, code, message):
    reasonlog.open_store(db_target).close()
    if is_postgres(db_target) and args[:2] == ["db", "backup"]:  # PostgreSQL is backed up by its own tools
        message = f"error: {db_target}: {PG_BACKUP}"
    result = _cli(db_target, *[a.format(tmp=tmp_path) for a in args])
    assert (result.exit_code, result.output) == (code, message.format(tmp=tmp_path) + "\n")


def test_each_care_command_does_its_work_or_names_the_tool_that_does(db_target, tmp_path):
    rec = reasonlog.Recorder(db_target, writer="sync", strict=True)
    _session(rec, "old", "some words")
    rec.close()
    dest = tmp_path / "copy.db"
    backup, check = _cli(db_target, "db", "backup", str(dest)), _cli(db_target, "db", "check")
    prune = _cli(db_target, "prune", "--run", "old", "--yes")
    left = reasonlog.open_store(db_target)
    try:
        sessions = len(left.list_sessions(reasonlog.SessionFilter()))
    finally:
        left.close()
    assert prune.output.startswith("removed 1 sessions, 2 calls, 5 messages, 5 contents (")
    if is_postgres(db_target):
        assert [(r.exit_code, r.output) for r in (backup, check)] == [
            (1, f"error: {db_target}: {PG_BACKUP}\n"), (1, f"error: {db_target}: {PG_CHECK}\n")]
        assert (dest.exists(), prune.exit_code, sessions) == (False, 0, 0)
        assert prune.output.endswith(" bytes (PostgreSQL reuses the freed space for new rows)\n")
        return
    assert backup.output == f"backed up {db_target} to {dest} ({dest.stat().st_size} bytes)\n"
    assert check.output == "ok: 1 sessions, 0 exchanges, 2 calls, 5 messages, 0 tool_results, 0 outcomes, 5 contents\n"
    assert prune.output.startswith("removed 1 sessions, 2 calls, 5 messages, 5 contents (")
    assert ([r.exit_code for r in (backup, check, prune)], sessions) == ([0, 0, 0], 0)


def test_a_directory_or_a_file_that_is_no_database_is_refused_in_one_line(tmp_path):
    """SQLite only: a file or folder given for a database; a PostgreSQL URL names no file."""
    assert (_cli(tmp_path, "db", "check").exit_code, _cli(tmp_path, "db", "check").output) == (
        2, f"error: {tmp_path} is a directory, not a reasonlog database\n")
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    result = _cli(text, "db", "check")
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert result.output == f"error: {text}: not a SQLite file, not a reasonlog database\n"
