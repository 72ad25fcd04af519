"""Retention on PostgreSQL while recorders write (issue 35): `reasonlog prune` and `serve --keep-days` remove old
sessions in short transactions beside a live `reasonlog serve`, whose recorders (other processes, over HTTP) reuse
the very contents being deleted. Nothing newer than the cut is lost (every record counted), nothing older stays,
no row names a content that is gone, and the trigram index holds exactly the texts that remain.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import POSTGRES, postgres_schema
from helpers import query_db
from pruning_child import CALLS, SYSTEM, carried, marker, request, reused
from serving import serving

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.store.maintenance import PruneCriteria
from reasonlog.wire.codec import canonical

pytestmark = pytest.mark.skipif(not POSTGRES, reason="needs PostgreSQL (REASONLOG_TEST_POSTGRES)")

CUT = "2025-06-01"
OLD, RECENT = 240, 30  # sessions last active before the cut, and after it (but long ago)
CHILD = Path(__file__).with_name("pruning_child.py")
# What a call names, as the store's migration 19 indexes it.
NAMED = "(context_json::jsonb || COALESCE(tools_json::jsonb, '[]'::jsonb))"


@pytest.fixture
def url():
    yield from postgres_schema()


def old_marker(i: int) -> str:
    return f"oldq{i:04d}zx"


def _archive(url: str) -> dict[str, list[str]]:
    """OLD sessions of 2025-01..05 and RECENT of 2025-07, through a recorder on the database: each sends a note it
    shares with one other archived session (and the live recorders send the old ones' notes too), its own marker
    with a searchable text live sessions send too, and their system prompt. Returns the ids of each kind."""
    rec = reasonlog.Recorder(url, writer="sync", strict=True)
    ids: dict[str, list[str]] = {"old": [], "recent": []}
    for kind, count, month in (("old", OLD, 1), ("recent", RECENT, 7)):
        for i in range(count):
            n = i if kind == "old" else OLD + i
            at = f"2025-{month + i % 5:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00.000Z"
            s = rec.session(agent="archive", run=kind, started_at=at)
            sent = [{"role": "user", "content": reused(n // 2)},
                    {"role": "user", "content": f"{old_marker(n)} {carried(n)}"}]
            s.call(system=SYSTEM, messages=sent, started_at=at,
                   response={"role": "assistant", "content": f"answer to {old_marker(n)}"})
            s.end(at=at)
            ids[kind].append(s.id)
    rec.close()
    return ids


def _start_writers(base: str, tmp_path: Path, n: int) -> tuple[list[subprocess.Popen], Path]:
    stop = tmp_path / "stop"
    children = [subprocess.Popen([sys.executable, str(CHILD), "--url", base, "--tag", str(k), "--stop", str(stop)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(n)]
    return children, stop


def _wait_for_sessions(url: str, run: str, n: int, children: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 120
    while query_db(url, f"SELECT COUNT(*) FROM sessions WHERE run = '{run}'")[0][0] < n:
        assert all(c.poll() is None for c in children), [c.communicate() for c in children]
        assert time.monotonic() < deadline, "the recorders wrote too little"
        time.sleep(0.2)


def _finish(children: list[subprocess.Popen], stop: Path) -> list[list[str]]:
    assert all(c.poll() is None for c in children)  # still writing when the prune ended: it ran under ingestion
    stop.touch()
    reports = []
    for child in children:
        out, err = child.communicate(timeout=180)
        assert child.returncode == 0, err
        report = json.loads(out.splitlines()[-1])
        stats = report["stats"]
        assert (report["closed"], stats["dropped"], stats["rejected"], stats["spilled_events"]) == (True, 0, 0, 0)
        assert stats["written"] == stats["submitted"] == len(report["ids"]) * (CALLS + 2), stats
        reports.append(report["ids"])
    return reports


def _check_consistent(url: str) -> None:
    """No row names a missing content, no content is left that nothing names, and the trigram index holds a row
    for exactly the contents that have text (every one here but tool schemas, of which there are none)."""
    named = (f"SELECT content_id AS id FROM messages UNION SELECT system_id FROM calls WHERE system_id IS NOT NULL"
             f" UNION SELECT response_id FROM calls WHERE response_id IS NOT NULL"
             f" UNION SELECT (j #>> '{{}}')::bigint FROM calls, jsonb_array_elements({NAMED}) j"
             f" WHERE jsonb_typeof(j) = 'number'")
    assert query_db(url, f"SELECT COUNT(*) FROM ({named}) n WHERE id NOT IN (SELECT id FROM contents)") == [(0,)]
    assert query_db(url, f"SELECT COUNT(*) FROM contents WHERE id NOT IN ({named})") == [(0,)]
    indexed = "SELECT unnest(ids) AS id FROM contents_search"  # a row of contents_search: a block of contents
    assert query_db(url, f"SELECT COUNT(*) FROM ({indexed}) i WHERE id NOT IN (SELECT id FROM contents)") == [(0,)]
    assert query_db(url, "SELECT COUNT(*) FROM contents_search WHERE ids = '{}'") == [(0,)]
    assert query_db(url, "SELECT COUNT(*) FROM contents WHERE kind != 'tool'"
                         f" AND id NOT IN ({indexed})") == [(0,)]


def _check_kept(store, url: str, archive: dict[str, list[str]], live: list[list[str]]) -> None:
    """Every recent and live session whole (each record counted), none of the old, and search agrees."""
    everything = reasonlog.SessionFilter(limit=None)
    kept = archive["recent"] + [sid for ids in live for sid in ids]
    assert sorted(s["id"] for s in store.list_sessions(everything)) == sorted(kept)
    per_session = query_db(url, "SELECT s.run, COUNT(DISTINCT c.id), COUNT(DISTINCT m.idx) FROM sessions s"
                                " JOIN calls c ON c.session_id = s.id JOIN messages m ON m.session_id = s.id"
                                " GROUP BY s.id, s.run ORDER BY s.run")
    assert sorted(set(per_session)) == [("live", CALLS, 2 * CALLS + 2), ("recent", 1, 4)]
    assert len(per_session) == len(kept)
    for n in range(OLD + RECENT):
        hits = {h["session_id"] for h in store.search(old_marker(n), everything)}
        assert hits == (set() if n < OLD else {archive["recent"][n - OLD]}), n
    for tag, ids in enumerate(live):
        for i, sid in enumerate(ids):
            assert {h["session_id"] for h in store.search(marker(str(tag), i), everything)} == {sid}
        last = store.get_session(ids[-1])["calls"][-1]["id"]  # its context resolves to what was sent
        replayed = store.replay_call(last)
        assert canonical(replayed["messages"]) == canonical(request(str(tag), len(ids) - 1, CALLS - 1))
    carriers = {sid for i, sid in enumerate(archive["recent"]) if (OLD + i) % 20 == 3}
    carriers |= {sid for ids in live for i, sid in enumerate(ids) if i % 20 == 3}
    assert {h["session_id"] for h in store.search(carried(3), everything)} == carriers


@pytest.mark.slow
def test_prune_under_ingestion_keeps_every_newer_record_and_a_consistent_index(url, tmp_path):
    archive = _archive(url)
    store = reasonlog.open_store(url)
    with serving("serve", "--db", url) as base:
        children, stop = _start_writers(base, tmp_path, 2)
        try:
            _wait_for_sessions(url, "live", 6, children)
            plan = store.plan_prune(PruneCriteria(before=CUT))
            before = {r[0] for r in query_db(url, "SELECT id FROM contents")}
            done = store.prune(PruneCriteria(before=CUT), batch=10)  # 24 transactions among the live writes
        finally:
            live = _finish(children, stop)
    try:
        assert (plan["sessions"], plan["calls"], plan["messages"]) == (OLD, OLD, 4 * OLD)
        # Each old session's marker and answer are its own, and the note it shares with one other old session
        # unless a live session sent that note before the prune's batch looked (the writers race it on purpose).
        assert plan["contents"] <= OLD * 2 + OLD // 2
        removed = before - {r[0] for r in query_db(url, "SELECT id FROM contents")}
        assert (done["sessions"], done["calls"], done["messages"], done["contents"]) == (OLD, OLD, 4 * OLD,
                                                                                          len(removed))
        assert OLD * 2 <= len(removed) <= OLD * 2 + OLD // 2
        assert len(live[0]) + len(live[1]) >= 6
        _check_kept(store, url, archive, live)
        _check_consistent(url)
    finally:
        store.close()


def test_a_bad_date_or_age_is_one_line_naming_what_was_expected(url):
    reasonlog.open_store(url).close()
    bad = CliRunner().invoke(cli, ["--db", url, "prune", "--before", "2025-13-01", "--yes"])
    assert (bad.exit_code, bad.output) == (2, "error: --before: expected a date like 2025-01-31, got '2025-13-01'\n")
    served = subprocess.run([sys.executable, "-m", "reasonlog", "--db", url, "serve", "--keep-days", "0"],
                            capture_output=True, text=True, timeout=60)
    assert served.returncode == 2
    assert "Invalid value for '--keep-days': 0 is not in the range x>=1." in served.stderr
    assert "Traceback" not in served.stderr


@pytest.mark.slow
def test_serve_keep_days_prunes_the_old_sessions_while_recorders_write(url, tmp_path):
    archive = _archive(url)
    with serving("serve", "--db", url, "--keep-days", "30", "--keep-every", "1", "--workers", "2") as base:
        children, stop = _start_writers(base, tmp_path, 2)
        try:
            _wait_for_sessions(url, "live", 6, children)
            deadline = time.monotonic() + 120
            while query_db(url, "SELECT COUNT(*) FROM sessions WHERE run != 'live'") != [(0,)]:
                assert time.monotonic() < deadline, "retention did not prune"
                time.sleep(0.5)
            _wait_for_sessions(url, "live", 12, children)  # and the writers went on
        finally:
            live = _finish(children, stop)
    store = reasonlog.open_store(url)
    try:  # every archived session is older than 30 days: all go, and every live one stays
        assert sorted(s["id"] for s in store.list_sessions(reasonlog.SessionFilter(limit=None))) == sorted(
            sid for ids in live for sid in ids)
        assert store.search(old_marker(OLD), reasonlog.SessionFilter()) == []
        assert len(archive["old"]) == OLD
        _check_consistent(url)
    finally:
        store.close()


def _waiting_on_a_lock(url: str, table: str) -> bool:
    """Whether a connection to our schema waits for a lock while writing `table`."""
    return query_db(url, "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                         f" AND query ILIKE '%{table}%' AND datname = current_database()")[0][0] > 0


def test_a_content_a_writer_reuses_while_a_prune_deletes_it_is_kept(url):
    """The race dedup opens, made to happen: a writer has found an old session's note (by hash) and is held, by a
    row another transaction is inserting, before it commits the message naming it; meanwhile a prune takes the old
    session. The prune waits for the writer's commit, then keeps the note: no message names a missing content."""
    import threading

    import psycopg

    old = reasonlog.Recorder(url, writer="sync", strict=True)
    s = old.session(run="old", started_at="2025-01-02T00:00:00.000Z")
    s.call(messages=[{"role": "user", "content": "a note only the old session holds"}], response="ok",
           started_at="2025-01-02T00:00:00.000Z")
    s.end(at="2025-01-02T00:00:00.000Z")
    old.close()
    live = reasonlog.Recorder(url, writer="sync", strict=True)
    session = live.session(run="live", id="live-session")  # its row is written now
    blocker = psycopg.connect(url)  # holds the writer inside its transaction, as a slow batch would be
    blocker.execute("INSERT INTO messages (session_id, idx, content_id, at) VALUES ('live-session', 0, 0, 'x')")
    writing = threading.Thread(target=session.call, kwargs={
        "messages": [{"role": "user", "content": "a note only the old session holds"}], "response": "again"})
    writing.start()
    pruned: dict = {}
    try:
        deadline = time.monotonic() + 30
        while not _waiting_on_a_lock(url, "messages"):
            assert time.monotonic() < deadline, "the writer never reached the message it writes"
            time.sleep(0.05)
        store = reasonlog.open_store(url)
        pruning = threading.Thread(target=lambda: pruned.update(store.prune(PruneCriteria(before=CUT))))
        pruning.start()
        pruning.join(2)  # the prune either waits for the writer (right) or deletes the note under it (wrong)
    finally:
        blocker.rollback()
        blocker.close()
    writing.join(30)
    pruning.join(30)
    live.close()
    try:
        assert (pruned["sessions"], pruned["contents"]) == (1, 1)  # the old session and its answer; not the note
        call = store.get_session("live-session")["calls"][0]["id"]
        assert store.replay_call(call)["messages"] == [{"role": "user", "content": "a note only the old session holds"}]
        assert [h["session_id"] for h in store.search("only the old session", reasonlog.SessionFilter())] == [
            "live-session"]
        _check_consistent(url)
    finally:
        store.close()
