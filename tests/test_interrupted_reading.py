"""A killed recorder's session reads as interrupted everywhere, before anything writes to the store (issue 19 item 10).

Liveness is a lock the recording process holds: a reader can try it without writing, so reading
commands show the truth; and a recorder that opens the database and closes without recording marks it.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

import reasonlog

CLI = [sys.executable, "-m", "reasonlog"]


def _killed_session(db) -> str:
    """Start a recording process, let it record a session, SIGKILL it; the session's id."""
    code = textwrap.dedent("""
        import sys, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="killed")
        s.call(messages=[{"role": "user", "content": "q"}], response="a")
        print(s.id, flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "REASONLOG_DB": str(db)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sid = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return sid


def _in_file(db, sid: str) -> str:
    """The status the database file holds (not what any reasonlog reader shows)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT status FROM sessions WHERE id = ?", (sid,)).fetchone()[0]


def test_reading_commands_show_a_killed_recorders_session_interrupted_without_writing(db_path):
    sid = _killed_session(db_path)
    listed = subprocess.run([*CLI, "--db", str(db_path), "sessions", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [s["status"] for s in json.loads(listed.stdout)] == ["interrupted"]
    only = subprocess.run([*CLI, "--db", str(db_path), "sessions", "--status", "interrupted", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert [s["id"] for s in json.loads(only.stdout)] == [sid]
    reader = reasonlog.open_store(db_path, read_only=True)
    assert reader.get_session(sid)["status"] == "interrupted"
    assert _in_file(db_path, sid) == "open"  # the readers wrote nothing


@pytest.mark.slow
def test_a_recorder_that_opens_and_closes_without_recording_marks_it_interrupted(db_path):
    sid = _killed_session(db_path)
    reasonlog.Recorder(db_path).close()
    assert _in_file(db_path, sid) == "interrupted"


@pytest.mark.slow
def test_a_recorder_that_records_nothing_creates_no_database(tmp_path):
    reasonlog.Recorder(tmp_path / "never.db").close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_live_recorders_session_reads_as_open(db_path):
    code = textwrap.dedent("""
        import sys, reasonlog
        rec = reasonlog.Recorder(writer="sync")
        s = rec.session(agent="alive")
        print(s.id, flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "REASONLOG_DB": str(db_path)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        sid = proc.stdout.readline().strip()
        assert reasonlog.open_store(db_path, read_only=True).get_session(sid)["status"] == "open"
    finally:
        proc.kill()
        proc.wait()
    assert reasonlog.open_store(db_path, read_only=True).get_session(sid)["status"] == "interrupted"
