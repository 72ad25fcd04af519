"""A database that cannot be written is said once, with its cause and where the records wait (issue 19 item 11).

Every call spills, which loses nothing, but a user whose agent writes nothing to stderr believes the
database holds them. The recorder warns once on stderr; `last_error` names the real cause; `db status`
counts what waits and where, even when the database cannot be opened at all.

The read-only folder is a read-only bind mount (as root: chmod does not stop root); the directory and
the foreign SQLite file need no privilege.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import reasonlog

CLI = [sys.executable, "-m", "reasonlog"]
RECORD = textwrap.dedent("""
    import json, sys, reasonlog
    rec = reasonlog.Recorder(sys.argv[1])
    with rec.session(agent="unwritable") as s:
        for i in range(200):
            s.call(messages=[{"role": "user", "content": f"q{i}"}], response="a")
    rec.close()
    print(json.dumps(rec.stats()))
""")


def _record(db: Path, data_home: Path) -> tuple[dict, str]:
    """200 calls from a child process; its stats and its stderr."""
    env = {**os.environ, "XDG_DATA_HOME": str(data_home)}
    env.pop("REASONLOG_RAISE_INTERNAL_ERRORS", None)  # the user's mode: capture logs, never raises
    done = subprocess.run([sys.executable, "-c", RECORD, str(db)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _status(db: Path, data_home: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_DATA_HOME": str(data_home)}
    return subprocess.run([*CLI, "--db", str(db), "db", "status", *options], capture_output=True, text=True,
                          env=env, timeout=60)


def _foreign(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    return path


@pytest.mark.parametrize("make", [lambda p: (p.mkdir(), p)[1], _foreign], ids=["a directory", "a foreign file"])
def test_a_database_that_cannot_be_opened_is_said_once_and_db_status_counts_what_waits(tmp_path, make):
    db = make(tmp_path / "agent.db")
    stats, stderr = _record(db, tmp_path / "data")
    assert (stats["spilled_events"], stats["written"]) == (202, 0)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"reasonlog cannot write {db} (StoreError: {db}: ")
    assert f"recorded events wait in spill files in {db}.spill" in lines[0]
    status = _status(db, tmp_path / "data")
    assert status.returncode == 1
    files = len(list(Path(f"{db}.spill").glob("*.spill")))
    assert status.stderr.splitlines()[1] == (
        f"202 recorded events wait in {files} spill file(s) in {db}.spill; they are written once the database can"
        " be written (`reasonlog db upgrade`)")


def _mounted_read_only(folder: Path):
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a read-only bind mount (chmod does not stop root)")
def test_a_reasonlog_database_in_a_read_only_folder_is_named_for_what_it_is(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "agent.db"
    reasonlog.open_store(db).close()
    _mounted_read_only(folder)
    try:
        stats, stderr = _record(db, tmp_path / "data")
        status = _status(db, tmp_path / "data", "--json")
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    assert stats["last_error"] == (f"ReadOnlyDatabase: {db}: read-only (the file or its folder cannot be written),"
                                   " so nothing can be written to it; reading commands and `reasonlog serve` read"
                                   " it as it is")
    assert "not a reasonlog database" not in stderr
    assert len(stderr.splitlines()) == 1 and f"spill files in {tmp_path / 'data'}" in stderr
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["pending_spill_records"] == 202
    assert [Path(f).parent for f in shown["spill_folders"]] == [tmp_path / "data" / "reasonlog" / "spill"]


@pytest.mark.slow
def test_db_status_counts_the_records_waiting_in_spill_files_of_a_healthy_database(tmp_path):
    db = tmp_path / "agent.db"
    reasonlog.open_store(db).close()
    with sqlite3.connect(db) as holder:  # another process holds the write lock past the busy timeout
        holder.execute("BEGIN IMMEDIATE")
        env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
        code = RECORD.replace("reasonlog.Recorder(sys.argv[1])",
                              "reasonlog.Recorder(sys.argv[1], store_options={'busy_timeout_ms': 50})")
        done = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=env,
                              timeout=120)
        status = subprocess.run([*CLI, "--db", str(db), "db", "status", "--json"], capture_output=True, text=True,
                                env=env, timeout=60)
        holder.execute("ROLLBACK")
    assert done.returncode == 0 and "database is locked" in done.stderr
    shown = json.loads(status.stdout)
    assert (shown["pending_spill_records"], shown["spill_folders"]) == (202, [f"{db}.spill"])
