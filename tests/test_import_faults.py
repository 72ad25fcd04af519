"""Imports under faults: a killed import resumes where its last batch ended, two imports at once do the work
once, a full disk stops the import with a clear reason and the next one finishes it; nothing twice, nothing
lost, the database intact."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"
MAIN = SPOTTER / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
ALL = SessionFilter(limit=None)


def long_transcript(target: Path, rounds: int) -> Path:
    """One session that goes on for `rounds` times the main sample (new message and request ids each round)."""
    data = MAIN.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        for k in range(rounds):
            suffix = b"r%d" % k
            out.write(re.sub(rb"\b(msg_|req_)([0-9A-Za-z]+)", lambda m, s=suffix: m.group(1) + m.group(2) + s, data))
    return target


def totals(store) -> tuple:
    rows = list(store.call_rows(ALL))
    return (len(rows), sum(r["output_tokens"] or 0 for r in rows), sum(r["cache_read_tokens"] or 0 for r in rows),
            store.status()["counts"]["messages"])


def reasonlog(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def consumed(db: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1)) as conn:
            row = conn.execute("SELECT MAX(consumed) FROM import_files").fetchone()
            return row[0] or 0
    except sqlite3.Error:
        return 0


def test_a_killed_import_resumes_where_its_last_batch_ended(tmp_path):
    source = long_transcript(tmp_path / "p" / MAIN.name, 12)
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    db = tmp_path / "t.db"
    child = reasonlog(db, "import", str(source))
    deadline = time.monotonic() + 60
    while consumed(db) == 0 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    part = consumed(db)
    assert 0 < part < source.stat().st_size  # killed after some batches, before the end
    again = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "import", str(source)],
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "(1 grown)" in again.stdout
    store = open_store(db)
    assert totals(store) == totals(whole)
    check = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "db", "check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_two_imports_at_once_do_the_work_once(tmp_path):
    db = tmp_path / "t.db"
    open_store(db).close()
    first, second = reasonlog(db, "import", str(SPOTTER)), reasonlog(db, "import", str(SPOTTER))
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0]
    reports = sorted(out for out, _ in outs)
    assert reports == ["Imported 6 file(s) (6 unchanged): 0 sessions, 0 calls, 0 messages, 0 tool results, "
                       "0 outcomes added.\n",
                       "Imported 6 file(s): 7 sessions, 243 calls, 503 messages, 0 tool results, 8 outcomes added.\n"]
    assert open_store(db).status()["rejected_records"] == 0


@pytest.mark.slow
def test_a_full_disk_stops_the_import_and_the_next_one_finishes_it(tmp_path):
    folder = tmp_path / "p"
    long_transcript(folder / "a-long-session.jsonl", 4)
    for f in ("short.jsonl", "tool_heavy.jsonl"):
        (folder / f).write_bytes((SPOTTER / f).read_bytes())
    db = tmp_path / "t.db"
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([folder]))
    whole.checkpoint()
    with sqlite3.connect(tmp_path / "whole.db") as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    open_store(db).close()
    full = open_store(db, max_page_count=pages // 2)  # room for half: the disk fills during the long session
    report = run_import(full, plan([folder]))
    full.close()
    # Small files' batches share a transaction, so the refusal is reported at the file whose write it was.
    assert [why.split(")")[0] for _, why in report.failed] == [
        "the database refused the write (database or disk is full"]
    store = open_store(db)
    again = run_import(store, plan([folder]))
    assert again.failed == []
    assert totals(store) == totals(whole)
    assert store.check()["ok"] is True
    assert os.path.exists(f"{db}.import.lock")
