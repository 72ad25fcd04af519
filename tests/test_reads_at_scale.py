"""Issue 20, "It must stay fast as the database grows": the read paths that were slow for a reason a test can see
(usage totals kept as calls are written, a session's calls paged, a position's `action_type`), on both dialects."""
from __future__ import annotations

import collections

import pytest
from fastapi.testclient import TestClient

from reasonlog.model import CallRecorded, OutcomeRecorded, SessionStarted, Usage
from reasonlog.server.app import create_app
from reasonlog.store import open_store


def _model_day(sid: str, day: str, payload: dict) -> list:
    return [SessionStarted(session_id=sid, started_at=f"{day}T09:00:00Z", agent="gpt-5", run="job", model="gpt-5",
                           labels={"date": day}),
            CallRecorded(call_id=sid + "-c", session_id=sid, exchange_id=None, started_at=f"{day}T09:01:00Z",
                         request={"model": "gpt-5", "messages": [{"role": "user", "content": "trade"}]},
                         response={"role": "assistant", "content": "bought"}, model="gpt-5",
                         usage=Usage(input_tokens=10, output_tokens=2)),
            OutcomeRecorded(outcome_id=sid + "-o", session_id=sid, at=f"{day}T09:02:00Z", outcome_kind="position",
                            payload=payload)]


def test_a_position_recorded_with_action_type_keeps_it(db):
    store = open_store(db)
    store.write_batch(_model_day("s1", "2025-10-02", {"action_id": 1, "action_type": "sell", "symbol": "NVDA",
                                                      "amount": 3, "price": 190.0}))
    store.write_batch(_model_day("s2", "2025-10-03", {"action_id": 2, "action": "buy", "symbol": "AMD",
                                                      "amount": 1, "price": 150.0}))
    store.close()
    client = TestClient(create_app(lambda: open_store(db, read_only=True), "test"))
    positions = {s["date"]: s["positions"] for s in client.get("/reasoning").json()["sessions"]}
    assert [(p["action_type"], p["symbol"]) for p in positions["2025-10-02"]] == [("sell", "NVDA")]
    assert [(p["action_type"], p["symbol"]) for p in positions["2025-10-03"]] == [("buy", "AMD")]


# ---------------------------------------------------------------------------- usage kept as calls are written

import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from reasonlog import accounting, query  # noqa: E402
from reasonlog.model import ExchangeEnded, ExchangeStarted, SessionEnded  # noqa: E402
from reasonlog.store import SessionFilter  # noqa: E402
from reasonlog.store.usage_sql import bucket_of, median_of  # noqa: E402


def _ledger_stats(store, by: str, flt: SessionFilter) -> list[dict]:
    """Statistics the way they were computed before migration 13: every call's ledger entry, grouped in Python."""
    groups: dict = {}
    for row in store.call_rows(flt):
        groups.setdefault(row["started_at"][:10] if by == "day" else row[by], []).append(row)
    out = []
    for key, rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        t = accounting.totals(rows)
        latencies = [r["latency_ms"] for r in rows if r["kind"] == "call" and r["latency_ms"] is not None]
        out.append({by: key, "calls": t["calls"], "errors": t["errors"], **{k: t[k] for k in accounting.TOKENS},
                    "cost_usd": t["cost_usd"], "calls_without_cost": t["calls_without_cost"],
                    # the median as documented since migration 18: the middle call's latency bucket
                    "latency_ms_p50": median_of(collections.Counter(map(bucket_of, latencies))),
                    "latency_ms_mean": round(statistics.fmean(latencies), 3) if latencies else None})
    return out


def _call(sid: str, n: int, at: str, model: str | None, tokens: int | None, cost: float | None = None,
          status: str = "ok", exchange: str | None = None, latency: float | None = 100.0) -> CallRecorded:
    return CallRecorded(call_id=f"{sid}-{n}", session_id=sid, exchange_id=exchange, started_at=at,
                        request={"model": model or "", "messages": [{"role": "user", "content": f"q{n}"}]},
                        response={"role": "assistant", "content": f"a{n}"}, model=model, status=status,
                        usage=None if tokens is None else Usage(input_tokens=tokens, output_tokens=tokens // 2 + 1,
                                                                cache_read_tokens=n),
                        cost_usd=cost, latency_ms=latency)


def _mixed_store_events() -> list[list]:
    """Sessions the accounting rule treats differently: plain ones over two days and models (a call without a
    model, one without usage, an error), one whose exchange reports its SDK's cost, and a sub-agent inside it."""
    plain = [SessionStarted(session_id="p1", started_at="2025-01-01T23:00:00Z", agent="a", run="r1",
                            labels={"source": "codex"}),
             _call("p1", 0, "2025-01-01T23:30:00Z", "gpt-5", 100, latency=250.0),
             _call("p1", 1, "2025-01-02T00:10:00Z", "gpt-5", 50, status="error", latency=None),
             _call("p1", 2, "2025-01-02T00:20:00Z", None, None),
             _call("p1", 3, "2025-01-02T00:30:00Z", "unpriced-model", 7, latency=40.0),
             SessionEnded(session_id="p1", ended_at="2025-01-02T01:00:00Z")]
    reported = [SessionStarted(session_id="sdk", started_at="2025-01-02T10:00:00Z", agent="b", run="r1"),
                ExchangeStarted(exchange_id="x1", session_id="sdk", started_at="2025-01-02T10:00:00Z", input="go"),
                _call("sdk", 0, "2025-01-02T10:00:01Z", "claude-sonnet-4-5", 300, exchange="x1"),
                SessionStarted(session_id="child", started_at="2025-01-02T10:00:02Z", agent="c", run="r1",
                               parent_session_id="sdk", parent_call_id="sdk-0"),
                _call("child", 0, "2025-01-02T10:00:03Z", "claude-haiku-4-5", 80, exchange=None),
                ExchangeEnded(exchange_id="x1", session_id="sdk", ended_at="2025-01-02T10:01:00Z", result="done",
                              stats={"cost_usd": 0.5, "input_tokens": 999, "output_tokens": 10})]
    return [plain, reported]


def _write_mixed(store) -> None:
    for batch in _mixed_store_events():
        store.write_batch(batch)


FILTERS = [SessionFilter(limit=None), SessionFilter(since="2025-01-02", limit=None),
           SessionFilter(until="2025-01-01", limit=None), SessionFilter(run="r1", agent="a", limit=None),
           SessionFilter(model="gpt-5", limit=None), SessionFilter(labels={"source": "codex"}, limit=None),
           SessionFilter(since="2025-01-02T00:15:00Z", limit=None)]


@pytest.mark.slow
def test_statistics_from_kept_usage_equal_the_ledger_of_every_call(db):
    store = open_store(db)
    _write_mixed(store)
    for flt in FILTERS:
        for by in query.STAT_KEYS:
            assert query.stats(store, by, flt) == _ledger_stats(store, by, flt), (by, flt)
    assert {s["id"]: (s["call_count"], s["input_tokens"], s["cost_usd"] is None, s["last_call_at"])
            for s in store.list_sessions(SessionFilter(limit=None))} == {
        "p1": (4, 157, False, "2025-01-02T00:30:00.000000Z"), "sdk": (1, 999, False, "2025-01-02T10:00:01.000000Z"),
        "child": (1, 0, False, "2025-01-02T10:00:03.000000Z")}
    store.close()


def _unbilled_events() -> list:
    """What Claude Code's transcripts import as: an exchange whose stats state a duration and no figures, a
    sub-agent spawned inside it (billed nowhere else), and a grandchild of the sub-agent a reporting exchange
    covers (billed in it, two levels up)."""
    return [SessionStarted(session_id="cc", started_at="2025-01-03T09:00:00Z", agent="a", run="r3"),
            ExchangeStarted(exchange_id="x2", session_id="cc", started_at="2025-01-03T09:00:00Z", input="go"),
            _call("cc", 0, "2025-01-03T09:00:01Z", "claude-sonnet-4-5", 200, exchange="x2"),
            SessionStarted(session_id="cc-sub", started_at="2025-01-03T09:00:02Z", agent="c", run="r3",
                           parent_session_id="cc", parent_call_id="cc-0"),
            _call("cc-sub", 0, "2025-01-03T09:00:03Z", "claude-haiku-4-5", 60),
            ExchangeEnded(exchange_id="x2", session_id="cc", ended_at="2025-01-03T09:01:00Z", result="done",
                          stats={"duration_ms": 60000}),
            SessionStarted(session_id="grandchild", started_at="2025-01-02T10:00:04Z", agent="c", run="r1",
                           parent_session_id="child", parent_call_id="child-0"),
            _call("grandchild", 0, "2025-01-02T10:00:05Z", "claude-haiku-4-5", 40)]


@pytest.mark.slow
def test_exchanges_that_report_no_cost_and_their_sub_agents_count_their_calls(db):
    """Only an exchange whose stats report a cost takes its calls' (and its sub-agents') figures over; the kept
    sums answer for the rest, and every statistic equals the ledger's."""
    store = open_store(db)
    _write_mixed(store)
    store.write_batch(_unbilled_events())
    for flt in [*FILTERS, SessionFilter(run="r3", limit=None)]:
        for by in query.STAT_KEYS:
            assert query.stats(store, by, flt) == _ledger_stats(store, by, flt), (by, flt)
    totals = {s["id"]: (s["call_count"], s["input_tokens"], s["output_tokens"])
              for s in store.list_sessions(SessionFilter(limit=None))}
    assert (totals["cc"], totals["cc-sub"], totals["grandchild"]) == ((1, 200, 101), (1, 60, 31), (1, 0, 0))
    store.close()


def _cli(db, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_usage_is_kept_as_calls_are_written_and_db_recount_rebuilds_it(db):
    """Statistics add up the totals kept in the write's transaction, not the calls: a call changed behind the
    store's back shows only once `reasonlog db recount` rebuilds them."""
    store = open_store(db)
    _write_mixed(store)
    before = query.stats(store, "model", SessionFilter(limit=None))
    store.close()
    _tamper(db, "UPDATE calls SET input_tokens = input_tokens + 1000 WHERE id = 'p1-0'")
    store = open_store(db)
    assert query.stats(store, "model", SessionFilter(limit=None)) == before
    store.close()
    if not str(db).startswith("postgresql"):  # `db check` reads SQLite files
        checked = _cli(db, "db", "check")
        assert (checked.returncode, checked.stdout.splitlines()[0]) == (
            1, "usage of session p1 on 2025-01-01 (gpt-5) kept as input_tokens 100 (its calls: 1100);"
               " `reasonlog db recount` rebuilds it")
    done = _cli(db, "db", "recount")
    assert (done.returncode, done.stderr) == (0, "")
    if not str(db).startswith("postgresql"):
        assert _cli(db, "db", "check").returncode == 0
    store = open_store(db)
    gpt5 = next(r for r in query.stats(store, "model", SessionFilter(limit=None)) if r["model"] == "gpt-5")
    assert gpt5["input_tokens"] == 1150
    store.close()


def _tamper(db, sql: str) -> None:
    if str(db).startswith("postgresql"):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as conn:
            conn.execute(sql)
    else:
        import sqlite3

        with sqlite3.connect(db) as conn:
            conn.execute(sql)


@pytest.mark.slow
def test_deleted_and_imported_sessions_count_once(db, tmp_path):
    store = open_store(db)
    _write_mixed(store)
    exported = list(store.export_records(["p1"]))
    assert store.delete_sessions(["p1"]) == 1
    assert [r["calls"] for r in query.stats(store, "run", SessionFilter(limit=None))] == [2]
    store.import_records(exported)
    assert query.stats(store, "day", SessionFilter(limit=None)) == _ledger_stats(store, "day",
                                                                                 SessionFilter(limit=None))
    assert [r["calls"] for r in query.stats(store, "run", SessionFilter(limit=None))] == [6]
    store.close()


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.sampled_from(["gpt-5", "m", None]),
                                st.one_of(st.none(), st.integers(0, 5000)),
                                st.one_of(st.none(), st.floats(0, 3, allow_nan=False)),
                                st.sampled_from(["ok", "error", "partial"]),
                                st.one_of(st.none(), st.floats(0, 9000, allow_nan=False))), max_size=30),
       batch=st.integers(1, 7))
def test_kept_usage_equals_the_ledger_for_any_calls(tmp_path_factory, calls, batch):
    """Whatever calls are written, in whatever batches, the kept totals say what the ledger says."""
    db = tmp_path_factory.mktemp("prop") / "store.db"
    store = open_store(db)
    events: list = [SessionStarted(session_id=f"s{k}", started_at="2025-03-01T00:00:00Z", agent=f"a{k % 2}")
                    for k in range(4)]
    for n, (k, hour, model, tokens, cost, status, latency) in enumerate(calls):
        events.append(_call(f"s{k}", n, f"2025-03-{1 + hour // 24:02d}T{hour % 24:02d}:00:00Z", model, tokens, cost,
                            status, latency=latency))
    for start in range(0, len(events), batch):
        store.write_batch(events[start:start + batch])
    for by in query.STAT_KEYS:
        assert _rounded(query.stats(store, by, SessionFilter(limit=None))) == \
            _rounded(_ledger_stats(store, by, SessionFilter(limit=None)))
    store.close()


def _rounded(rows: list[dict]) -> list[dict]:
    """Sums in another order differ in the last bits of a float: compare costs and means to a billionth."""
    return [{k: round(v, 9) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


# ---------------------------------------------------------------------------- a long session, page by page


@pytest.mark.slow
def test_a_session_page_carries_only_its_calls_and_a_cursor_walks_it_all(db):
    """`/v1/sessions/{id}?limit=` bounds the calls too (a 50,000-message session returned all 25,000 calls in
    every page); `next_offset` walks the timeline to its end, each message and call once."""
    store = open_store(db)
    events: list = [SessionStarted(session_id="long", started_at="2025-05-01T00:00:00Z", agent="a")]
    history: list = []
    for n in range(40):
        history.append({"role": "user", "content": f"question {n}"})
        events.append(CallRecorded(call_id=f"c{n:02d}", session_id="long", exchange_id=None,
                                   started_at=f"2025-05-01T00:{n:02d}:00Z",
                                   request={"model": "m", "system": "be brief", "messages": list(history)},
                                   response={"role": "assistant", "content": f"answer {n}"}, model="m",
                                   stable_history=True))
        history.append({"role": "assistant", "content": f"answer {n}"})
    store.write_batch(events)
    whole = store.get_session("long")
    store.close()
    client = TestClient(create_app(lambda: open_store(db, read_only=True), "test"))
    first = client.get("/v1/sessions/long", params={"limit": 10}).json()
    assert (first["message_count"], len(first["messages"]) + len(first["system_prompts"])) == (80, 10)
    assert [c["id"] for c in first["calls"]] == ["c00", "c01", "c02", "c03"]  # c04 replies at position 10
    seen, calls, offset = [], [], 0
    while offset is not None:
        page = client.get("/v1/sessions/long", params={"offset": offset, "limit": 7}).json()
        seen += [m["idx"] for m in page["messages"]]
        calls += [c["id"] for c in page["calls"]]
        offset = page["next_offset"]
    assert seen == [m["idx"] for m in whole["messages"]]
    assert calls == [c["id"] for c in whole["calls"]]


# ---------------------------------------------------------------------------- a common word stops at the page


@pytest.mark.slow
def test_a_common_word_pages_as_the_whole_list_does(db):
    """A word in most sessions (past `search.COMMON` contents) is looked for newest session first and stops at the
    page; the pages are the whole answer's, cut where the limit cuts, filters and cursors included."""
    from reasonlog.store import search

    store = open_store(db)
    per = search.COMMON // 100 + 1
    for k in range(120):  # every seventh session (17 of them) never says it
        sid, day, hour = f"s{k:03d}", f"2025-06-{1 + k // 24:02d}", f"{k % 24:02d}"
        word = "nothing here" if k % 7 == 3 else "the PRICE moved"
        messages = [{"role": "user", "content": f"{sid} line {n}: {word if n >= 2 else 'x'}"} for n in range(per)]
        store.write_batch([SessionStarted(session_id=sid, started_at=f"{day}T{hour}:00:00Z", agent=f"a{k % 3}"),
                           CallRecorded(call_id=sid + "-c", session_id=sid, exchange_id=None,
                                        started_at=f"{day}T{hour}:01:00Z", request={"model": "m", "messages": messages},
                                        response={"role": "assistant", "content": "ok"}, model="m")])
    everything = [s["id"] for s in store.list_sessions(SessionFilter(text="price", limit=None))]
    assert len(everything) == 120 - 17
    for limit in (1, 5, 51):
        assert [s["id"] for s in store.list_sessions(SessionFilter(text="price", limit=limit))] == everything[:limit]
    agent = [s["id"] for s in store.list_sessions(SessionFilter(text="price", agent="a1", limit=None))]
    assert [s["id"] for s in store.list_sessions(SessionFilter(text="price", agent="a1", limit=9))] == agent[:9]
    client = TestClient(create_app(lambda: open_store(db, read_only=True), "test"))
    seen, cursor = [], None
    while True:
        body = client.get("/v1/sessions", params={"q": "price", "limit": 20, **({"cursor": cursor} if cursor else {})})
        seen += [s["id"] for s in body.json()["sessions"]]
        cursor = body.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == everything
    store.close()


# ---------------------------------------------------------------------------- /reasoning for a whole day


@pytest.mark.slow
def test_a_day_of_every_model_says_what_each_model_day_says(db):
    """`/reasoning?date=D` reads the day's sessions at once (it read each whole session): every session's
    positions and message count are those its own model-day request gives."""
    from conftest import FIXTURES

    from reasonlog.io.importing import plan, run_import

    store = open_store(db)
    run_import(store, plan([FIXTURES / "ai-trader-agent-log" / "agent_data"]))
    store.write_batch(_model_day("extra", "2025-10-02", {"action_type": "sell", "symbol": "AMD", "amount": 2}))
    store.close()
    client = TestClient(create_app(lambda: open_store(db, read_only=True), "test"))
    day = client.get("/reasoning", params={"date": "2025-10-02"}).json()["sessions"]
    assert len(day) == 5 + 1  # five models that day in the simulator's logs, and one more
    for session in day:
        alone = client.get("/reasoning", params={"date": "2025-10-02", "model": session["model"],
                                                 "include_full_conversation": "true"}).json()["sessions"]
        mine = next(s for s in alone if s["session_id"] == session["session_id"])
        assert {**mine, "conversation": None} == session
        assert session["total_messages"] == len(mine["conversation"])
    assert [p["action_type"] for s in day for p in s["positions"]][:1] == ["buy"]


# ---------------------------------------------------------------------------- upgrading to schema 13


def _back_to_17(db) -> list[str]:
    """Migration 18 undone: its triggers (on PostgreSQL with their functions), tables and record."""
    from reasonlog.store import rollups

    pg = str(db).startswith("postgresql")
    return [*(sql for name, _, table, _, _ in rollups.triggers()
              for sql in ((f"DROP TRIGGER {name} ON {table}", f"DROP FUNCTION {name}()") if pg
                          else (f"DROP TRIGGER {name}",))),
            "DROP TABLE usage_daily", "DROP TABLE latency_daily", "DROP TABLE latency_buckets",
            "DELETE FROM _reasonlog_migrations WHERE number = 18"]


def _back_to_25(db) -> list[str]:
    """Migration 26 undone: SQLite's trigram tables again (empty: the migration that drops them never reads them)."""
    trigrams = "USING fts5(text, content='', detail=none, columnsize=0, tokenize='trigram case_sensitive 1')"
    tables = ("contents_search", "tool_results_search", "outcomes_search", "reasoning_records_search")
    return [*([] if str(db).startswith("postgresql") else
              ["DROP TABLE search_blocks", *(f"CREATE VIRTUAL TABLE {t} {trigrams}" for t in tables)]),
            "DELETE FROM _reasonlog_migrations WHERE number = 26"]


_BACK_TO_12 = ["DROP TABLE IF EXISTS search_pending", "DELETE FROM _reasonlog_migrations WHERE number = 25",
               "DELETE FROM _reasonlog_migrations WHERE number = 24",  # its trigger went with _back_to_17's
               "DELETE FROM _reasonlog_migrations WHERE number = 23",  # its whole texts go with contents_search below
               "DROP INDEX exchanges_reporting", "DELETE FROM _reasonlog_migrations WHERE number = 22",
               "DELETE FROM _reasonlog_migrations WHERE number = 21",  # its column and index go with unit_vectors
               "DELETE FROM _reasonlog_migrations WHERE number = 20",  # its blocks go with contents_search below
               "DROP INDEX IF EXISTS calls_named", "DROP INDEX IF EXISTS calls_system",
               "DROP INDEX IF EXISTS calls_response", "DELETE FROM _reasonlog_migrations WHERE number = 19",
               "DROP TABLE annotations", "DELETE FROM _reasonlog_migrations WHERE number = 17",
               "DROP INDEX calls_provider_message", "ALTER TABLE calls DROP COLUMN counted_in",
               "DELETE FROM _reasonlog_migrations WHERE number = 16", "DROP TABLE usage_rollup",
               "DROP INDEX sessions_parent_call", "DROP INDEX exchanges_reported",
               "DROP INDEX session_labels_session", "DELETE FROM _reasonlog_migrations WHERE number = 13",
               "DROP INDEX calls_replay_of", "ALTER TABLE calls DROP COLUMN replay_of",
               "DELETE FROM _reasonlog_migrations WHERE number = 14",
               *(f"DROP TABLE {t}" for t in ("unit_texts", "search_units", "unit_vectors", "session_vectors",
                                             "unit_marks")),
               "DELETE FROM _reasonlog_migrations WHERE number = 15"]
_PG_WORD_INDEX = [*(f"DROP TABLE {t}" for t in ("contents_search", "tool_results_search", "outcomes_search",
                                                "reasoning_records_search")),
                  *(f"CREATE TABLE {t} (rowid BIGINT PRIMARY KEY, words TSVECTOR)"
                    for t in ("contents_search", "tool_results_search", "outcomes_search", "reasoning_records_search")),
                  "CREATE TABLE search_words (word TEXT PRIMARY KEY)"]


@pytest.mark.slow
def test_a_database_upgraded_to_schema_13_counts_and_finds_what_it_held(db):
    """Migration 13 fills the kept usage from the calls (and, on PostgreSQL, the trigram index from the stored
    text, in place of the word index) in its own transaction."""
    store = open_store(db)
    _write_mixed(store)
    store.write_batch(_model_day("day", "2025-10-02", {"action_type": "buy", "symbol": "NVDA"}))
    expected = {by: query.stats(store, by, SessionFilter(limit=None)) for by in query.STAT_KEYS}
    store.close()
    pg_words = _PG_WORD_INDEX if str(db).startswith("postgresql") else []
    for sql in _back_to_25(db) + _back_to_17(db) + _BACK_TO_12 + pg_words:
        _tamper(db, sql)
    store = open_store(db)
    assert store.schema_version() == 26  # 13, then 14 (replay_of), 15 (search by meaning), 16 (counted_in), 17
    # (annotations), 18 (usage by day, model, agent, run and source), 19 (what names a content), 20 (search words
    # in blocks, PostgreSQL), 21 (vectors in pgvector where PostgreSQL has it), 22 (the exchanges that report a
    # cost), 23 (each content's text whole in its block, PostgreSQL), 24 (calls added to the latency histograms a
    # statement at a time, PostgreSQL), 25 (text waiting to be indexed, SQLite), 26 (text in blocks, SQLite) again
    assert {by: query.stats(store, by, SessionFilter(limit=None)) for by in query.STAT_KEYS} == expected
    assert [(h["session_id"], h["kind"]) for h in store.search("bought", SessionFilter(limit=None))] == \
        [("day", "message")]
    assert [(h["session_id"], h["kind"]) for h in store.search("nvda", SessionFilter(limit=None))] == \
        [("day", "outcome")]
    store.close()
