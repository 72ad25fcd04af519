"""Errors that explain, and reads that change nothing (issue 8 §2), through the `reasonlog` command.

The cases run the command in this process with click's runner (an exception escaping the command fails the
test, as a traceback would); one test runs the real entry point in a subprocess to hold that a script sees no
traceback and the exit codes (2 for usage errors, 1 for failures) from a real process.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.cli.main import cli

READING = [["sessions"], ["show", "X"], ["stats", "--by", "day"], ["search", "hello"], ["replay", "X"],
           ["diff", "X", "Y"], ["export"], ["db", "status"]]


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def reasonlog_cli(*args: str, db: Path | str | None = None) -> Ran:
    """The command run in this process; an exception other than click's exit escapes and fails the test."""
    argv = [*(["--db", str(db)] if db is not None else []), *args]
    result = CliRunner().invoke(cli, argv, env={"REASONLOG_DB": None}, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def reasonlog_process(*args: str, db: Path | str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "reasonlog", "--db", str(db), *args]
    env = {k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def one_line_error(result: Ran | subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) <= 3, result.stderr  # click prints usage lines before its one error line
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def recorded(tmp_path) -> Path:
    db = tmp_path / "rec.db"
    with reasonlog.Recorder(db, writer="sync") as rec, rec.session(agent="a", run="r") as s:
        s.call(messages=[{"role": "user", "content": "hello there"}], response="hi",
               usage=reasonlog.Usage(input_tokens=5, output_tokens=2))
    reasonlog.open_store(db).checkpoint()
    return db


def test_the_real_command_exits_1_on_a_failure_and_2_on_a_usage_error_without_a_traceback(tmp_path):
    missing = tmp_path / "nowhere" / "x.db"
    one_line_error(reasonlog_process("sessions", db=missing), 1, str(missing))
    assert not (tmp_path / "nowhere").exists()
    one_line_error(reasonlog_process("sessions", "--date", "2026-13-45", db=missing), 2, "--date", "2026-13-45")


@pytest.mark.parametrize("args", READING, ids=lambda a: " ".join(a))
def test_a_reading_command_on_a_missing_path_creates_nothing(tmp_path, args):
    missing = tmp_path / "nowhere" / "x.db"
    one_line_error(reasonlog_cli(*args, db=missing), 1, str(missing))
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("args", READING, ids=lambda a: " ".join(a))
def test_a_directory_as_database_is_an_error(tmp_path, args):
    one_line_error(reasonlog_cli(*args, db=tmp_path), 1, str(tmp_path), "directory")


@pytest.mark.parametrize("content", [b"not a database\n", os.urandom(4096), b""], ids=["text", "random", "empty"])
def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path, content):
    path = tmp_path / "x.db"
    path.write_bytes(content)
    before = digest(path)
    for args in READING:
        one_line_error(reasonlog_cli(*args, db=path), 1, str(path))
    assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


def test_a_sqlite_file_of_another_program_is_refused_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    before = digest(path)
    one_line_error(reasonlog_cli("sessions", db=path), 1, str(path), "not a reasonlog database")
    assert digest(path) == before


def test_reading_commands_do_not_migrate_an_old_database(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "schema1.db", path)
    before = digest(path)
    one_line_error(reasonlog_cli("sessions", db=path), 1, "reasonlog db upgrade")
    assert digest(path) == before
    assert reasonlog_cli("db", "upgrade", db=path).returncode == 0
    assert reasonlog_cli("sessions", db=path).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("chattr") is None, reason="needs root and chattr")
def test_every_reading_command_works_on_a_read_only_file(recorded):
    with closing(reasonlog.open_store(recorded)) as store:  # closed before the digest: a store left open for the
        sid = store.list_sessions(reasonlog.SessionFilter())[0]["id"]  # garbage collector writes when it closes
        call = store.get_session(sid)["calls"][0]["id"]
    before = digest(recorded)
    subprocess.run(["chattr", "+i", str(recorded)], check=True)
    try:
        for args in (["sessions"], ["show", sid], ["stats", "--by", "model"], ["search", "hello"],
                     ["replay", call], ["diff", call, call], ["export"], ["db", "status"]):
            result = reasonlog_cli(*args, db=recorded)
            assert result.returncode == 0, (args, result.stderr)
    finally:
        subprocess.run(["chattr", "-i", str(recorded)], check=True)
    assert digest(recorded) == before


@pytest.mark.parametrize("option,value", [("--date", "2026-13-45"), ("--until", "2026-02-30"),
                                          ("--date", "yesterday"), ("--until", "garbage"), ("--since", "2026-1-1x")])
def test_a_bad_date_is_a_usage_error_naming_the_option(recorded, option, value):
    for command in (["sessions"], ["stats", "--by", "day"]):
        one_line_error(reasonlog_cli(*command, option, value, db=recorded), 2, option, value)


def test_a_good_date_still_filters(recorded):
    today = reasonlog.open_store(recorded).list_sessions(reasonlog.SessionFilter())[0]["started_at"][:10]
    found = json.loads(reasonlog_cli("sessions", "--date", today, "--json", db=recorded).stdout)
    assert [s["agent"] for s in found] == ["a"]
    assert json.loads(reasonlog_cli("sessions", "--date", "2000-01-01", "--json", db=recorded).stdout) == []
