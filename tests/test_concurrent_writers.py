"""Concurrent writers do not step on each other (issue 30 item 4).

Four writer processes record into one database, on sessions of their own and on sessions they all share,
with a tool result and an outcome after every call. On PostgreSQL (READ COMMITTED) a batch used to index
every record past the largest rowid it saw at its start, which took in other transactions' records: the
search tables' primary key refused them and the whole batch was written again event by event. Every record
must be stored and found once, nothing rejected, and no batch retried event by event (`db status`). On SQLite
a writer's memory of a shared session (its next call number) went stale when another process wrote to it, and
its next batch collided with that process's rows and was retried event by event: with a transaction per record
(`--sync`) that happened 14 times in one run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonlog.cli.main import cli
from reasonlog.model import SessionStarted, ToolResultRecorded
from reasonlog.store import SessionFilter, open_store

HERE = Path(__file__).parent
PROCESSES, SESSIONS, CALLS = 4, 8, 20
pytestmark = pytest.mark.xdist_group("processes")  # four writers' lock waits: one after another with the fault matrix


def run_writers(db, shared: bool, sync: bool = False) -> list[dict]:
    """Start the writers together and wait for them all; each one's stats."""
    args = ["--sessions", str(SESSIONS), "--calls", str(CALLS)] + (["--shared"] if shared else []) \
        + (["--sync"] if sync else [])
    procs = [subprocess.Popen([sys.executable, str(HERE / "writing_child.py"), "--db", str(db), "--tag", f"w{k}",
                               *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(PROCESSES)]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-2000:]
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return outputs


@pytest.mark.parametrize(("shared", "sync"), [(False, False), (True, False), (True, True)],
                         ids=["disjoint-sessions", "shared-sessions", "shared-sessions-a-transaction-per-record"])
def test_four_writers_store_every_record_once_without_retrying_batches(db, shared, sync):
    outputs = run_writers(db, shared, sync)
    records = PROCESSES * SESSIONS * CALLS
    assert [o["closed"] for o in outputs] == [True] * PROCESSES
    assert [o["stats"]["rejected"] for o in outputs] == [0] * PROCESSES
    assert [o["stats"]["spilled_events"] for o in outputs] == [0] * PROCESSES
    store = open_store(db)
    try:
        counts = store.record_counts()
        status = store.status()
        found = store.search("zebrafish", SessionFilter(limit=None), limit=None)
    finally:
        store.close()
    assert counts == {"sessions": SESSIONS if shared else PROCESSES * SESSIONS, "calls": records,
                      "messages": 2 * records, "tool_results": records, "outcomes": records}
    assert sorted(h["kind"] for h in found).count("tool_result") == records
    assert sorted(h["kind"] for h in found).count("outcome") == records
    assert (status["rejected_records"], status["dropped_records"], status["isolated_batches"]) == (0, 0, 0)
    shown = CliRunner().invoke(cli, ["--db", str(db), "db", "status"])
    assert shown.exit_code == 0 and "isolated_batches" in shown.output, shown.output


@pytest.mark.slow
def test_a_batch_with_a_bad_event_is_counted_as_retried_event_by_event(db):
    """The counter the test above reads is not always 0: a duplicate id takes its batch down that path, and the
    tool results of the batch that were stored are found once."""
    at = "2026-01-01T00:00:00.000000Z"
    events = [SessionStarted(session_id="s1", started_at=at),
              *(ToolResultRecorded(tool_result_id=rid, session_id="s1", at=at, tool_use_id=None,
                                   content=f"zebrafish {n}") for n, rid in enumerate(["a", "b", "a", "c"]))]
    store = open_store(db)
    try:
        rejections: list = []
        store.write_batch(events, rejections=rejections)
        store.write_batch(events[:1] + [ToolResultRecorded(tool_result_id="d", session_id="s1", at=at,
                                                           tool_use_id=None, content="zebrafish 4")])
        status = store.status()
        found = store.search("zebrafish", SessionFilter(limit=None), limit=None)
    finally:
        store.close()
    assert [index for index, _ in rejections] == [3]
    assert (status["rejected_records"], status["isolated_batches"]) == (1, 1)
    assert sorted(h["kind"] for h in found) == ["tool_result"] * 4
