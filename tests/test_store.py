"""Contexts stored once, exact replay, search, filters and diffs, on a real SQLite file and on PostgreSQL."""
from __future__ import annotations

import sqlite3

import pytest
from conftest import fresh_database
from helpers import query_db, record_workload

import reasonlog
from reasonlog.store import SessionFilter, StoreError
from reasonlog.wire.codec import canonical


@pytest.fixture(scope="module")
def small(workload, tmp_path_factory, dialect):
    calls = list(workload.generate("small"))
    with fresh_database(dialect, tmp_path_factory.mktemp("small")) as path:
        rec = reasonlog.Recorder(path)  # the background writer, as agents use it
        ids = record_workload(rec, calls)
        assert rec.flush(30)
        rec.close()
        store = reasonlog.open_store(path)
        yield calls, ids, store, path
        store.close()


def test_replay_rebuilds_every_request_byte_identical(small):
    calls, _, store, _ = small
    for c in calls:
        assert canonical(store.replay_call(c["call_id"])) == canonical(c["request"]), c["call_id"]


def test_each_distinct_content_is_stored_once(small, workload):
    calls, _, _, path = small
    truth = workload.truths(calls)
    [(messages,)] = query_db(path, "SELECT COUNT(*) FROM contents WHERE kind = 'message'")
    [(tools,)] = query_db(path, "SELECT COUNT(*) FROM contents WHERE kind = 'tool'")
    [(stored,)] = query_db(path, "SELECT SUM(LENGTH(data)) FROM contents")
    assert messages == truth["unique_messages"]
    assert tools == len(workload.TOOLS)
    # resent history is not stored again: stored content is far below what the calls sent
    assert stored < truth["unique_content_bytes"] < truth["logical_bytes"] / 4


def test_storage_grows_linearly_with_the_session(tmp_path):
    """Doubling a session's calls roughly doubles its bytes, where naive logs quadruple."""
    def size_after(n_calls: int) -> int:
        path = tmp_path / f"s{n_calls}.db"
        rec = reasonlog.Recorder(path, writer="sync")
        history = []
        with rec.session(agent="a") as s:
            for i in range(n_calls):
                history.append({"role": "user", "content": f"question {i} " + "lorem ipsum dolor " * 40})
                reply = {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " + "sit amet " * 60}]}
                s.call(system="sys", messages=history, response=reply)
                history.append(reply)
        rec.close()
        with sqlite3.connect(path) as db:
            return db.execute("SELECT SUM(LENGTH(data)) + (SELECT SUM(LENGTH(context_json)) FROM calls)"
                              " FROM contents").fetchone()[0]

    small, large = size_after(50), size_after(100)
    assert large / small < 2.3


def test_session_reads_back_in_order(small, workload):
    calls, ids, store, _ = small
    truth = workload.truths(calls)
    for wid, last in list(truth["last_call"].items())[:5]:
        session = store.get_session(ids[wid])
        conv = workload.conversation_of(last)
        assert [(p["idx"], p["content"]) for p in session["system_prompts"]] == [(0, conv["system"])]
        assert [m["content"] for m in session["messages"]] == conv["messages"]
        assert [m["idx"] for m in session["messages"]] == list(range(1, len(session["messages"]) + 1))


def test_search_matches_ground_truth(small, workload):
    calls, ids, store, _ = small
    external = {v: k for k, v in ids.items()}
    for term, expected in workload.search_terms(calls, n=6):
        hits = store.search(term, SessionFilter(limit=None), limit=10_000)
        assert {external[h["session_id"]] for h in hits} == expected, term
        assert all(term in h["snippet"] for h in hits)


def test_search_of_an_absent_phrase_finds_nothing(small):
    _, _, store, _ = small
    assert store.search("zebra quantum teapot", SessionFilter()) == []


def test_filters_select_the_right_sessions(small, workload):
    calls, ids, store, _ = small
    truth = workload.truths(calls)
    external = {v: k for k, v in ids.items()}
    for (model, day), expected in list(truth["by_model_date"].items())[:6]:
        rows = store.list_sessions(SessionFilter(model=model, since=day, until=day, limit=None))
        assert {external[r["id"]] for r in rows} == expected
    user = calls[0]["user_id"]
    rows = store.list_sessions(SessionFilter(labels={"user": user}, limit=None))
    assert rows and {external[r["id"]] for r in rows} == {c["session_id"] for c in calls if c["user_id"] == user}
    starts = [r["started_at"] for r in store.list_sessions(SessionFilter(limit=None))]
    assert starts == sorted(starts, reverse=True)


def test_unknown_ids_give_clear_errors(small):
    _, _, store, _ = small
    with pytest.raises(StoreError, match="no session"):
        store.get_session("nope")
    with pytest.raises(StoreError, match="no call matches"):
        store.resolve_id("call", "zzz")


def test_a_page_of_a_session_says_of_its_calls_what_the_whole_session_says(tmp_path):
    """A page reads a range of the timeline and lean rows for the other calls; its calls' window facts,
    context changes and reply positions must be the ones reading the whole session gives."""
    path = tmp_path / "window.db"
    rec = reasonlog.Recorder(path, writer="sync")
    history: list = []
    with rec.session(agent="sliding") as s:
        for i in range(120):
            history.append({"role": "user", "content": f"turn {i}"})
            s.call(system="sys" if i < 60 else "sys v2", messages=history[-30:], response=f"reply {i}", model="m",
                   usage=reasonlog.Usage(input_tokens=10, cache_read_tokens=i))
            history.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {i}"}]})
    rec.close()
    store = reasonlog.open_store(path)
    whole = store.get_session(s.id)
    page = store.get_session(s.id, page=(100, 160))
    by_id = {c["id"]: c for c in whole["calls"]}
    assert [m["idx"] for m in page["messages"]] == [m["idx"] for m in whole["messages"] if 100 <= m["idx"] < 160]
    assert page["message_count"] == whole["message_count"] == len(whole["messages"])
    assert len(page["calls"]) == 30
    assert [(c["context_facts"], c["window"], c["response_idx"]) for c in page["calls"]] == \
        [(by_id[c["id"]]["context_facts"], by_id[c["id"]]["window"], by_id[c["id"]]["response_idx"])
         for c in page["calls"]]
    assert any(c["window"]["trimmed"] for c in page["calls"])  # the window slid inside this page


def test_a_page_of_a_session_has_the_totals_of_the_whole_session(tmp_path):
    """Pages add up a plain session's calls directly; the totals must be the accounting rule's, exchanges too."""
    path = tmp_path / "totals.db"
    rec = reasonlog.Recorder(path, writer="sync")
    with rec.session(agent="t") as s:
        for n in range(3):
            with s.exchange(input=f"task {n}"):
                for i in range(4):
                    s.call(messages=[{"role": "user", "content": f"{n}.{i}"}], response="ok", model="gpt-5",
                           usage=reasonlog.Usage(input_tokens=100 + i, output_tokens=7, cache_read_tokens=3 * i))
        s.call(messages=[{"role": "user", "content": "unpriced"}], response="ok", model="no-such-model",
               usage=reasonlog.Usage(input_tokens=5))
    rec.close()
    store = reasonlog.open_store(path)
    whole, page = store.get_session(s.id), store.get_session(s.id, page=(0, 4))
    keys = ("call_count", "error_count", "input_tokens", "output_tokens", "cache_read_tokens", "cost_usd",
            "calls_without_cost", "last_call_at")
    assert [page[k] for k in keys] == [whole[k] for k in keys]
    assert whole["call_count"] == 13 and whole["calls_without_cost"] == 1
    assert [e["totals"] for e in page["exchanges"]] == [e["totals"] for e in whole["exchanges"]]


def test_a_whole_id_names_its_session_even_when_it_begins_other_ids(tmp_path, dialect):
    """Sessions named `run1` and `run10`: `show run1` is run1, not "ambiguous"; a prefix of both still asks for more
    characters, and each of their calls is named by its whole id the same way."""
    from reasonlog.store import Ambiguous

    with fresh_database(dialect, tmp_path) as path:
        rec = reasonlog.Recorder(path)
        for name in ("run1", "run10", "run11"):
            with rec.session(id=name, agent="a") as s:
                s.call(messages=[{"role": "user", "content": name}],
                              response={"role": "assistant", "content": "ok"}, model="m", provider="anthropic")
        assert rec.flush(30)
        rec.close()
        store = reasonlog.open_store(path)
        try:
            assert store.resolve_id("session", "run1") == "run1"
            assert store.resolve_id("session", "run10") == "run10"
            with pytest.raises(Ambiguous, match="'run' matches 3 sessions"):
                store.resolve_id("session", "run")
            assert store.get_session("run1")["id"] == "run1"
            call = store.get_session("run1")["calls"][0]["id"]
            assert store.resolve_id("call", call) == call
        finally:
            store.close()
