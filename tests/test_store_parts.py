"""The store in parts (writer, reader, admin; search by meaning, the mirror's source, API keys) and its narrow reads,
on both dialects."""
from __future__ import annotations

import inspect

import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema

import reasonlog
from reasonlog.store import (
    KeyStore,
    MirrorSource,
    NotFound,
    SearchByMeaning,
    Store,
    StoreAdmin,
    StoreReader,
    StoreWriter,
    Unavailable,
)

PARTS = (StoreWriter, StoreReader, StoreAdmin, SearchByMeaning, MirrorSource, KeyStore)


def _methods(part: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(part, inspect.isfunction) if not name.startswith("_")}


@pytest.fixture
def store(db):
    opened = reasonlog.open_store(db)
    yield opened
    opened.close()


def test_every_method_of_the_store_belongs_to_a_part_and_every_backend_has_it(store):
    parts = set().union(*map(_methods, PARTS))
    assert _methods(Store) == parts
    missing = sorted(name for name in parts if not callable(getattr(store, name, None)))
    assert missing == []


def test_each_part_is_a_small_stated_contract_and_no_two_share_a_method_but_close():
    """Issue 33: a caller takes the part it needs, so a new backend, a mirror or a test double answers that part.
    StoreReader has 29: `call_details` (many calls, each session decoded once) joined `get_call` in session 12."""
    sizes = {part.__name__: len(_methods(part) - {"close"}) for part in PARTS}
    assert sizes == {"StoreWriter": 10, "StoreReader": 29, "StoreAdmin": 11, "SearchByMeaning": 10, "MirrorSource": 3,
                     "KeyStore": 5}
    assert sum(sizes.values()) == len(_methods(Store) - {"close"})


def test_session_row_is_the_list_row_and_reads_no_timeline(db, store):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a", external_id="ext-1") as s:
        s.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "hello"},
               model="m")
    rec.close()
    listed = store.list_sessions(reasonlog.SessionFilter(limit=None))
    row = store.session_row(listed[0]["id"])
    assert row == listed[0]
    assert row["external_id"] == "ext-1" and row["call_count"] == 1
    assert "messages" not in row and "calls" not in row
    with pytest.raises(NotFound, match="no session 'nope'"):
        store.session_row("nope")


def test_what_postgresql_leaves_to_its_own_tools_is_unavailable_naming_them(tmp_path):
    if not POSTGRES:
        pytest.skip(NO_POSTGRES)
    for url in postgres_schema():
        store = reasonlog.open_store(url)
        with pytest.raises(Unavailable, match="pg_dump"):
            store.backup(tmp_path / "b.db")
        with pytest.raises(Unavailable, match="amcheck"):
            store.check()
        store.close()


def _agent_runs(db) -> list[str]:
    """Two runs of one agent that part after the first call (a tool call against text, a failed call, a call
    without a reply, a longer run), and the demo's sessions."""
    from reasonlog.demo import run_demo

    run_demo(db, exchanges=2)
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    ids = []
    for variant in ("a", "b"):
        with rec.session(agent="twin", model="m") as s:
            s.call(messages=[{"role": "user", "content": "plan"}], response={"role": "assistant", "content": "ok"},
                   model="m", usage={"input_tokens": 5, "output_tokens": 1}, cost_usd=0.001, latency_ms=12.0)
            if variant == "a":
                s.call(messages=[{"role": "user", "content": "go"}], model="m", stop_reason="tool_use",
                       response={"role": "assistant", "content": [
                           {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "x"}}]})
                s.call(messages=[{"role": "user", "content": "again"}], model="m", error={"message": "overloaded"})
            else:
                s.call(messages=[{"role": "user", "content": "go"}], response="done", model="m2",
                       stop_reason="end_turn")
                s.call(messages=[{"role": "user", "content": "again"}], model="m")  # no reply recorded
                s.call(messages=[{"role": "user", "content": "more"}], response="last", model="m")
            ids.append(s.id)
    rec.close()
    return ids


def test_a_range_of_calls_is_the_whole_sessions_calls_with_their_replies(db, store):
    _agent_runs(db)
    sessions = store.list_sessions(reasonlog.SessionFilter(limit=None))
    assert len(sessions) == 4
    for row in sessions:
        whole = store.get_session(row["id"])
        replies = {m["idx"]: m["content"] for m in whole["messages"]}
        narrow = store.get_calls(row["id"], (0, 1 << 62))
        assert len(narrow) == len(whole["calls"]) == row["call_count"]
        for got, full in zip(narrow, whole["calls"], strict=True):
            # Everything of the whole read's call but what it works out from the calls before it and the timeline.
            assert set(full) - set(got) == {"context_facts", "window", "response_idx"}
            reply = None if full["response_idx"] is None else replies[full["response_idx"]]
            assert got == {**{k: full[k] for k in got if k != "response"}, "response": reply}
        assert store.get_calls(row["id"], (1, 3)) == narrow[1:3]
    with pytest.raises(NotFound, match="no session 'nope'"):
        store.get_calls("nope", (0, 10))


def _compare_from_whole_sessions(store, a: str, b: str, start: int = 0) -> dict:
    """The compare page as it was built before `get_calls`: from two whole sessions and their timelines."""
    from reasonlog.replay.compare import Answer
    from reasonlog.server.dashboard import compare

    def answers(session: dict) -> list:
        by_idx = {m["idx"]: m["content"] for m in session["messages"]}
        return [(c, Answer.of_call({**c, "response": by_idx.get(c["response_idx"])})) for c in session["calls"]]

    first, second = store.get_session(a), store.get_session(b)
    answers_a, answers_b = answers(first)[start:], answers(second)
    rows = [compare._row(n, answers_a, answers_b) for n in range(max(len(answers_a), len(answers_b)))]
    return {"a": first, "b": second, "rows": rows}


def test_the_compare_page_read_from_ranges_of_calls_equals_one_read_from_whole_sessions(db, store):
    from reasonlog.server.dashboard.compare import compare_sessions

    a, b = _agent_runs(db)
    for x, y, start in [(a, b, 0), (b, a, 0), (a, b, 1), (b, a, 2), (a, a, 0)]:
        narrow, whole = compare_sessions(store, x, y, start), _compare_from_whole_sessions(store, x, y, start)
        assert [(r["idx"], r["a"] and r["a"]["id"], r["b"] and r["b"]["id"], r["answer_a"], r["answer_b"],
                 r["comparison"], r["same"]) for r in narrow["rows"]] == [
            (r["idx"], r["a"] and r["a"]["id"], r["b"] and r["b"]["id"], r["answer_a"], r["answer_b"],
             r["comparison"], r["same"]) for r in whole["rows"]]
        for side in ("a", "b"):  # what the page shows of each session
            assert {k: narrow[side][k] for k in ("id", "agent", "model", "run", "call_count", "cost_usd")} == \
                {k: whole[side][k] for k in ("id", "agent", "model", "run", "call_count", "cost_usd")}
    page = compare_sessions(store, a, b)
    assert (page["diverged"], [r["same"] for r in page["rows"]]) == (1, [True, False, False, False])
