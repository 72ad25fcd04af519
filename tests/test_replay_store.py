"""The link a replayed call keeps to the call it re-sent (issue 23, migration 14), on SQLite and PostgreSQL: written
with the call, read back, found from both sessions, and carried through export and import."""
from __future__ import annotations

from conftest import fresh_database

import reasonlog
from reasonlog.model import CallRecorded, SessionEnded, SessionStarted

REQUEST = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
REPLY = {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}


def _session(session_id: str, call_ids: list[str], replay_of: list[str | None], run: str | None = None) -> list:
    calls = [CallRecorded(call_id=c, session_id=session_id, exchange_id=None, started_at=f"2026-01-0{n + 1}T00:00:00Z",
                          request=REQUEST, response=REPLY, model="claude-sonnet-4-5", replay_of=r)
             for n, (c, r) in enumerate(zip(call_ids, replay_of, strict=True))]
    return [SessionStarted(session_id=session_id, started_at="2026-01-01T00:00:00Z", run=run), *calls,
            SessionEnded(session_id=session_id, ended_at="2026-01-02T00:00:00Z")]


def test_a_replay_is_linked_to_its_original_and_back(db, tmp_path, dialect):
    store = reasonlog.open_store(db)
    store.write_batch(_session("orig", ["o0", "o1"], [None, None]))
    store.write_batch(_session("rep1", ["r0", "r1"], ["o0", "o1"], run="replays"))
    store.write_batch(_session("rep2", ["s1"], ["o1"], run="replays"))
    assert [store.get_call(c)["replay_of"] for c in ("o0", "r0", "r1", "s1")] == [None, "o0", "o1", "o1"]
    assert store.replay_links("orig") == {"replay_of": None, "replays": ["rep1", "rep2"]}
    assert store.replay_links("rep2") == {"replay_of": "orig", "replays": []}
    records = list(store.export_records())
    calls = {r["id"]: r for r in records if r["type"] == "call"}
    assert "replay_of" not in calls["o0"] and calls["r1"]["replay_of"] == "o1"  # written only where set
    store.close()
    with fresh_database(dialect, tmp_path / "copy") as other:
        copy = reasonlog.open_store(other)
        copy.import_records(records)
        assert copy.get_call("r1")["replay_of"] == "o1" and copy.replay_links("orig")["replays"] == ["rep1", "rep2"]
        copy.close()
