"""The store's side of "every billed call counted once" (issue 31, item 4), on SQLite and PostgreSQL: a call with
a provider message id that a call of another source's session holds is one call with it, whichever was written
first; the live record bills it; every reader (sessions, a session's calls, stats by every key) says the same."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import query
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
IMPORTED = {"source": "claude-code"}


def write(db, calls: list[tuple[str, str, int]]) -> None:
    """`calls` as (path, provider message id, output tokens), in order: `live` ones in a session the proxy would
    make, `log` ones in a session an importer would make (label source), each path's session by itself."""
    for path, message_id, output in calls:
        recorder = reasonlog.Recorder(db)  # each write its own process's, as the proxy's and an import's are
        session = recorder.session(agent="claude", run="r", external_id="cc-1", labels=None if path == "live"
                                   else IMPORTED, on_close="completed")
        session.call(request={"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": message_id}]},
                     response={"role": "assistant", "content": "ok"}, model="claude-haiku-4-5",
                     provider="anthropic", provider_message_id=message_id,
                     usage=reasonlog.Usage(input_tokens=100, output_tokens=output))
        session.end("completed")
        recorder.close()


def readers(db) -> dict[str, tuple]:
    """(calls, output tokens, cost) as each reader tells them."""
    store = reasonlog.open_store(db)
    sessions = store.list_sessions(ALL)
    calls = [c for s in sessions for c in store.get_session(s["id"])["calls"] if "counted_in" not in c]
    out = {"sessions": (sum(s["call_count"] for s in sessions), sum(s["output_tokens"] for s in sessions),
                        round(sum(s["cost_usd"] or 0 for s in sessions), 9)),
           "calls": (len(calls), sum(c["output_tokens"] for c in calls), round(sum(c["cost_usd"] for c in calls), 9))}
    for by in query.STAT_KEYS:
        rows = query.stats(store, by, ALL)
        out[by] = (sum(r["calls"] for r in rows), sum(r["output_tokens"] for r in rows),
                   round(sum(r["cost_usd"] or 0 for r in rows), 9))
    store.close()
    return out


def billed(db) -> list[tuple[str, str, int]]:
    """(provider message id, where it was billed, output tokens) of every call that bills itself."""
    store = reasonlog.open_store(db)
    out = sorted((c["provider_message_id"], "live" if not s["labels"] else "log", c["output_tokens"])
                 for s in store.list_sessions(ALL) for c in store.get_session(s["id"])["calls"]
                 if "counted_in" not in c)
    store.close()
    return out


def cost(*outputs: int) -> float:
    return round(sum(100 * 1e-06 + n * 5e-06 for n in outputs), 9)  # claude-haiku-4-5's list prices


def test_an_import_after_the_recording_adds_nothing(db):
    write(db, [("live", "msg_1", 10), ("live", "msg_2", 20), ("log", "msg_1", 10), ("log", "msg_2", 20)])
    assert set(readers(db).values()) == {(2, 30, cost(10, 20))}
    assert billed(db) == [("msg_1", "live", 10), ("msg_2", "live", 20)]


def test_a_recording_written_after_the_import_is_the_one_billed(db):
    write(db, [("log", "msg_1", 9), ("log", "msg_2", 20), ("live", "msg_1", 10), ("live", "msg_2", 20)])
    assert set(readers(db).values()) == {(2, 30, cost(10, 20))}
    assert billed(db) == [("msg_1", "live", 10), ("msg_2", "live", 20)]
    if not str(db).startswith("postgresql"):  # `db check` reads SQLite files
        store = reasonlog.open_store(db)
        assert store.check()["problems"] == []  # the kept usage equals the sums of the calls that bill
        store.close()


def test_calls_of_one_source_with_the_same_id_stay_two(db):
    """A recorded payload replayed twice (a test upstream) repeats its id: one path never records a call twice."""
    write(db, [("live", "msg_1", 10), ("live", "msg_1", 10)])
    assert set(readers(db).values()) == {(2, 20, cost(10, 10))}


paths = st.lists(st.tuples(st.sampled_from(["live", "log"]), st.integers(0, 4), st.integers(1, 50)), max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=paths)
def test_whatever_the_order_each_call_is_billed_once_by_its_richest_record(dialect, tmp_path_factory, calls):
    from conftest import fresh_database

    seen, written = set(), []
    for path, n, output in calls:  # each path holds a call once
        if (path, n) not in seen:
            seen.add((path, n))
            written.append((path, f"msg_{n}", output))
    with fresh_database(dialect, tmp_path_factory.mktemp("twins")) as db:
        write(db, written)
        live = {m: o for p, m, o in written if p == "live"}
        expected = {**{m: ("log", o) for p, m, o in written if p == "log"}, **{m: ("live", o) for m, o in live.items()}}
        outputs = [o for _, o in expected.values()]
        assert set(readers(db).values()) == {(len(expected), sum(outputs), cost(*outputs))}
        assert billed(db) == sorted((m, p, o) for m, (p, o) in expected.items())


def write_thread(db, path: str, thread: str, outputs: list[int], ids: bool) -> None:
    """One agent session's calls by one path: with response ids (the proxy) or without (a Codex rollout)."""
    recorder = reasonlog.Recorder(db)
    labels = None if path == "live" else {"source": "codex"}
    session = recorder.session(agent="codex", external_id=thread, labels=labels, on_close="completed")
    for n, output in enumerate(outputs):
        session.call(request={"model": "claude-haiku-4-5", "input": [{"role": "user", "content": f"turn {n}"}]},
                     response={"role": "assistant", "content": "ok"}, model="claude-haiku-4-5", provider="openai",
                     provider_message_id=f"resp_{thread}_{n}" if ids else None,
                     usage=reasonlog.Usage(input_tokens=100, output_tokens=output))
    session.end("completed")
    recorder.close()


def test_calls_without_ids_are_one_by_the_agents_session_id_position_and_tokens(db):
    write_thread(db, "log", "th-1", [10, 20, 30], ids=False)
    write_thread(db, "live", "th-1", [10, 21, 30], ids=True)  # the second turn's figures differ: not the same
    write_thread(db, "log", "th-2", [10], ids=False)  # another thread: never the same as th-1's
    store = reasonlog.open_store(db)
    rows = sorted((s["external_id"], s["labels"].get("source", "recorded"), c["idx"], "counted_in" in c)
                  for s in store.list_sessions(ALL) for c in store.get_session(s["id"])["calls"])
    store.close()
    assert rows == [("th-1", "codex", 0, True), ("th-1", "codex", 1, False), ("th-1", "codex", 2, True),
                    ("th-1", "recorded", 0, False), ("th-1", "recorded", 1, False), ("th-1", "recorded", 2, False),
                    ("th-2", "codex", 0, False)]
    assert set(readers(db).values()) == {(5, 10 + 20 + 10 + 21 + 30, cost(10, 20, 10, 21, 30))}


def test_two_agents_imports_sharing_an_id_stay_two_and_two_logs_of_one_session_are_one(db):
    """Fixtures answered by one recorded payload share its id: two agents' imports are not one call by id alone;
    two formats of one agent session (one `external_id`) are."""
    for source, thread in (("copilot-cli", "a"), ("kimi-cli", "b"), ("claude-code-otel", "a")):
        recorder = reasonlog.Recorder(db)
        session = recorder.session(agent=source, external_id=thread, labels={"source": source}, on_close="completed")
        session.call(request={"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]},
                     response={"role": "assistant", "content": "ok"}, model="claude-haiku-4-5", provider="anthropic",
                     provider_message_id="chatcmpl-recorded", usage=reasonlog.Usage(input_tokens=100, output_tokens=7))
        session.end("completed")
        recorder.close()
    assert set(readers(db).values()) == {(2, 14, cost(7, 7))}


def test_the_api_names_the_call_a_copy_is_counted_in(tmp_path):
    from fastapi.testclient import TestClient

    from reasonlog.server.app import create_app

    db = tmp_path / "r.db"
    write(db, [("live", "msg_1", 10), ("log", "msg_1", 10)])
    store = reasonlog.open_store(db)
    live, log = sorted(store.list_sessions(ALL), key=lambda s: bool(s["labels"]))
    (billed,), (copy,) = store.get_session(live["id"])["calls"], store.get_session(log["id"])["calls"]
    store.close()
    api = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True)))
    assert api.get(f"/v1/calls/{copy['id']}").json()["counted_in"] == billed["id"]
    assert [c.get("counted_in") for c in api.get(f"/v1/sessions/{log['id']}").json()["calls"]] == [billed["id"]]
    assert "counted_in" not in api.get(f"/v1/calls/{billed['id']}").json()


def test_deleting_the_billed_record_bills_its_copy_again(db):
    """A session deleted (pruned, or an imported file rewritten and imported again) takes its calls out of the
    totals, but not a call another path recorded too: the copy bills again, with the same call's figures."""
    write(db, [("log", "msg_1", 9), ("live", "msg_1", 10), ("live", "msg_2", 20)])
    store = reasonlog.open_store(db)
    (live,) = [s for s in store.list_sessions(ALL) if not s["labels"]
               and store.get_session(s["id"])["calls"][0]["provider_message_id"] == "msg_1"]
    assert store.delete_sessions([live["id"]]) == 1
    store.close()
    assert set(readers(db).values()) == {(2, 30, cost(10, 20))}
    assert billed(db) == [("msg_1", "log", 10), ("msg_2", "live", 20)]
