"""PostgreSQL's bulk write path (issue 35) stores what the row-by-row one does.

A batch on PostgreSQL stores its new contents in one lookup and one pipelined insert, finds its sessions' twins
once, knows which of the sessions it starts are new to the store (their state is not read back), and queues its
exchanges (store/writing.py `Applier.prepare`); `open_store(url, bulk=False)` writes each event
with its own statements, as a batch rejected for one event's data always is. Generated sessions (contents resent
and shared between sessions, secrets, agent session ids and provider message ids shared between a live session
and an import, calls that cannot be stored) are written through both, batch for batch, and every reader must
say the same: the export, the sessions, usage by day and model, search, the counters.
"""
from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema
from helpers import query_db
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.model import (
    CallRecorded,
    ExchangeEnded,
    ExchangeStarted,
    OutcomeRecorded,
    SessionEnded,
    SessionStarted,
    ToolResultRecorded,
)
from reasonlog.store import SessionFilter

pytestmark = pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)

TEXTS = ["hello", "checkout timeout in the cart", "key sk-ant-api03-" + "x" * 40, "same again", "日本語のテキスト"]
SECRET_WORD = "checkout"


@pytest.fixture(scope="module")
def pair():
    """A store on the bulk path and one on the row-by-row path, each in its own schema."""
    with_bulk, without = postgres_schema(), postgres_schema()
    stores = (reasonlog.open_store(next(with_bulk)), reasonlog.open_store(next(without), bulk=False))
    yield stores
    for store in stores:
        store.close()
    for gen in (with_bulk, without):
        gen.close()


@st.composite
def sessions(draw) -> tuple[str, list[list]]:
    """A run's events, cut into batches: sessions that resend their history, share texts and ids."""
    run = "r" + uuid.uuid4().hex[:10]
    events: list = []
    for s in range(draw(st.integers(1, 4))):
        sid = f"{run}-s{s}"
        imported = draw(st.booleans())
        events.append(SessionStarted(session_id=sid, started_at=f"2026-01-0{s + 1}T10:00:00Z", run=run,
                                     agent="a", labels={"source": "claude-code"} if imported else {},
                                     model=draw(st.sampled_from([None, "gpt-5"])),
                                     external_id=draw(st.sampled_from([None, f"{run}-x0", f"{run}-x1"]))))
        history: list = [{"role": "user", "content": draw(st.sampled_from(TEXTS))}]
        for c in range(draw(st.integers(0, 5))):
            xid = f"{sid}-e{c}"
            events.append(ExchangeStarted(exchange_id=xid, session_id=sid, started_at="2026-01-01T10:00:01Z",
                                          input=history[-1]["content"]))
            text = draw(st.sampled_from(TEXTS))
            reply = {"role": "assistant", "content": [{"type": "text", "text": text}]}
            if draw(st.integers(0, 9)) == 0:
                reply = {"role": "assistant", "content": float("nan")}  # rejected alone
            events.append(CallRecorded(
                call_id=f"{sid}-c{c}", session_id=sid, exchange_id=xid, started_at=f"2026-01-0{s + 1}T10:0{c}:00Z",
                request={"model": "claude-haiku-4-5", "system": "be brief", "messages": list(history),
                         "tools": [{"name": "t", "input_schema": {}}] if c % 2 else None},
                response=reply, model=draw(st.sampled_from(["claude-haiku-4-5", "gpt-5"])), provider="anthropic",
                usage=reasonlog.Usage(input_tokens=10 * (c + 1), output_tokens=draw(st.sampled_from([5, 7]))),
                provider_message_id=draw(st.sampled_from([None, f"{run}-m{c}"])), latency_ms=100.0 + c))
            history = history + [reply, {"role": "user", "content": draw(st.sampled_from(TEXTS))}]
            if draw(st.integers(0, 5)) == 0:  # its recorder restarted: the session is started again, and goes on
                events.append(SessionStarted(session_id=sid, started_at=f"2026-01-0{s + 1}T10:30:00Z", run=run,
                                             agent="a"))
            if draw(st.booleans()):
                events.append(ToolResultRecorded(tool_result_id=f"{sid}-t{c}", session_id=sid,
                                                 at="2026-01-01T10:00:02Z", tool_use_id=None, name="grep",
                                                 content=draw(st.sampled_from(TEXTS))))
            events.append(ExchangeEnded(exchange_id=xid, session_id=sid, ended_at="2026-01-01T10:00:03Z",
                                        result="done"))
        if draw(st.booleans()):
            events.append(OutcomeRecorded(outcome_id=f"{sid}-o", session_id=sid, at="2026-01-01T10:00:04Z",
                                          outcome_kind="trade", payload={"why": draw(st.sampled_from(TEXTS))}))
        events.append(SessionEnded(session_id=sid, ended_at="2026-01-01T11:00:00Z", status="completed"))
    size = draw(st.integers(1, len(events)))
    return run, [events[i:i + size] for i in range(0, len(events), size)]


def readers(store, run: str) -> dict:
    flt = SessionFilter(run=run, limit=None)
    listed = store.list_sessions(flt)
    ids = sorted(s["id"] for s in listed)
    return {"export": list(store.export_records(ids)),
            "sessions": sorted(listed, key=lambda s: s["id"]),
            "calls": [store.get_session(sid) for sid in ids],
            "by_day": store.usage_groups("day", flt), "by_model": store.usage_groups("model", flt),
            "search": [sorted(str(sorted(hit.items())) for hit in store.search(word, flt, limit=None))
                       for word in (SECRET_WORD, "same", "テキスト", "sk-ant")]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(story=sessions())
@pytest.mark.slow
def test_the_bulk_path_stores_what_the_row_by_row_path_does(pair, story):
    run, batches = story
    bulk, rows = pair
    before = [store.status()["rejected_records"] for store in pair]
    for batch in batches:
        assert bulk.write_batch(batch) is True
        assert rows.write_batch(batch) is True
    assert readers(bulk, run) == readers(rows, run)
    after = [store.status()["rejected_records"] for store in pair]
    assert after[0] - before[0] == after[1] - before[1]


def test_a_batch_stores_its_new_contents_once_and_reads_them_back(pair):
    """Named case: two sessions of one batch sending the same new texts, one content each, on both paths."""
    run = "r" + uuid.uuid4().hex[:10]
    batch: list = []
    for s in range(2):
        sid = f"{run}-s{s}"
        batch.append(SessionStarted(session_id=sid, started_at="2026-02-01T10:00:00Z", run=run))
        batch.append(CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None,
                                  started_at="2026-02-01T10:00:00Z",
                                  request={"messages": [{"role": "user", "content": f"{run} shared question"}]},
                                  response={"role": "assistant", "content": f"{run} shared answer"}))
    counts = []
    for store in pair:
        first = store.status()["unique_content_bytes"]
        store.write_batch(batch)
        counts.append(store.status()["unique_content_bytes"] - first)
        hits = store.search(f"{run} shared", SessionFilter(run=run, limit=None), limit=None)
        assert len(hits) == 4  # each session's question and answer
    assert counts[0] == counts[1] == len(f'{{"content":"{run} shared question","role":"user"}}') + len(
        f'{{"content":"{run} shared answer","role":"assistant"}}')


def test_an_import_and_the_live_record_of_one_agent_session_in_one_batch_count_its_call_once(pair):
    """Named case (found by the property above): a live session and the import of the same agent session, both new
    to the store and written in one batch, whose call names no provider message id: the import's copy is paired by
    position with the live call the batch queued before it, and the usage counts the call once."""
    run = "r" + uuid.uuid4().hex[:10]
    batch: list = []
    for sid, labels in ((f"{run}-live", {}), (f"{run}-import", {"source": "claude-code"})):
        batch.append(SessionStarted(session_id=sid, started_at="2026-03-01T10:00:00Z", run=run, labels=labels,
                                    external_id=f"{run}-agent"))
        batch.append(CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None,
                                  started_at="2026-03-01T10:00:00Z", model="claude-haiku-4-5",
                                  request={"messages": [{"role": "user", "content": "one call"}]},
                                  response={"role": "assistant", "content": "one answer"},
                                  usage=reasonlog.Usage(input_tokens=120, output_tokens=30)))
    for store in pair:
        store.write_batch(batch)
        usage = store.usage_groups("model", SessionFilter(run=run, limit=None))["claude-haiku-4-5"]
        assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (1, 120, 30)


def test_a_session_started_again_in_its_batch_goes_on_where_it_was(pair):
    """Named case: a session new to the store, started, called, started again (its recorder restarted) and called
    in one batch, then called in the next: its calls and messages are numbered on, on both paths."""
    run = "r" + uuid.uuid4().hex[:10]
    sid = f"{run}-s"
    history: list = []

    def call(n: int) -> CallRecorded:
        history.append({"role": "user", "content": f"question {n}"})
        return CallRecorded(call_id=f"{sid}-c{n}", session_id=sid, exchange_id=None,
                            started_at=f"2026-03-02T10:0{n}:00Z", request={"messages": list(history)},
                            response={"role": "assistant", "content": f"answer {n}"})
    first = [SessionStarted(session_id=sid, started_at="2026-03-02T10:00:00Z", run=run), call(0),
             SessionStarted(session_id=sid, started_at="2026-03-02T10:01:00Z", run=run), call(1)]
    second = [call(2)]
    for store in pair:
        store.write_batch(first)
        store.write_batch(second)
        detail = store.get_session(sid)
        assert [c["id"] for c in detail["calls"]] == [f"{sid}-c0", f"{sid}-c1", f"{sid}-c2"]
        assert [c["idx"] for c in detail["calls"]] == [0, 1, 2]


def test_a_content_another_process_stores_while_the_batch_copies_is_read_back():
    """A batch copies its new contents in one COPY after looking their digests up; another process that stores one
    of them in between (its transaction still open at the lookup, committed while the COPY waits on the digest's
    key) makes the COPY fail: the batch goes back to its savepoint, stores the rest as INSERTs that leave that one to
    the other process, names the other's id, and commits whole (not written again event by event)."""
    schemas = postgres_schema(), postgres_schema()
    try:
        _race_a_content(next(schemas[0]), next(schemas[1]))
    finally:
        for gen in schemas:
            gen.close()


def _race_a_content(url: str, elsewhere: str) -> None:
    raced = {"role": "user", "content": "raced question"}

    def batch(sid: str) -> list:
        return [SessionStarted(session_id=sid, started_at="2026-04-01T10:00:00Z"),
                CallRecorded(call_id=f"{sid}-c", session_id=sid, exchange_id=None, started_at="2026-04-01T10:00:00Z",
                             request={"messages": [raced]}, response={"role": "assistant", "content": "own answer"})]
    other = reasonlog.open_store(elsewhere)  # the other process's row, made as a store makes it
    other.write_batch(batch("other"))
    other.close()
    row = query_db(elsewhere, "SELECT hash, kind, size, codec, dict_id, data FROM contents WHERE kind = 'message'"
                              " ORDER BY id LIMIT 1")[0]
    store = reasonlog.open_store(url)
    written: list = []
    with psycopg.connect(url) as conn:  # the other process: its row inserted, not yet committed
        theirs = conn.execute("INSERT INTO contents (hash, kind, size, codec, dict_id, data) VALUES"
                              " (%s, %s, %s, %s, %s, %s) RETURNING id", row).fetchone()[0]
        writer = threading.Thread(target=lambda: written.append(store.write_batch(batch("s"))))
        writer.start()
        mine = conn.execute("SELECT pg_current_xact_id()::text::xid").fetchone()[0]
        for _ in range(200):  # until the batch waits for this transaction (its COPY on the digest's key)
            if conn.execute("SELECT COUNT(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
                            " AND transactionid = %s", (mine,)).fetchone()[0]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the batch never waited for the other process's row")
        conn.commit()
        writer.join(30)
    try:
        assert written == [True]
        assert store.status()["isolated_batches"] == 0
        assert [cid for cid, in query_db(url, "SELECT id FROM contents WHERE kind = 'message' ORDER BY id")][:1] \
            == [theirs]
        assert query_db(url, "SELECT COUNT(*) FROM contents") == [(2,)]  # theirs and the answer
        call = store.get_session("s")["calls"][0]
        assert store.get_call(call["id"])["request"]["messages"] == [raced]
        hits = store.search("raced question", SessionFilter(limit=None), limit=None)
        assert [(h["session_id"], h["kind"]) for h in hits] == [("s", "message")]
    finally:
        store.close()
