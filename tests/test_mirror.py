"""The ClickHouse mirror (issue 36) on both real engines (a ClickHouse server over its native protocol, and chdb in
this process), pushed from SQLite and PostgreSQL: every list, count and statistic it answers is the record's,
exactly; a push stopped after any number of inserts, with the record written meanwhile, converges when run again;
a destroyed mirror is rebuilt by pushing again; several records share one mirror."""
from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mirroring import archive_st, assert_same, drop, in_process_target, record  # noqa: F401  (the `target` fixture)

import reasonlog
from reasonlog.mirror import engine, push, reader, schema
from reasonlog.store import SessionFilter

OPEN = {"exchanges": [{"calls": [(10, 2, "gpt-5", "ok")], "reported": None, "child": None}], "label": None,
        "end": None}  # a session of one call, left open
EXAMPLES = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])  # a shrink re-records whole archives


@pytest.fixture
def db_target(db):  # the recorder writes SQLite and PostgreSQL (conftest's `db`)
    return db


def mirrored(store, target: str, src: str = "a") -> reader.MirrorReader:
    push.push(store, engine.connect(target), src)
    return reader.MirrorReader(engine.connect(target), src)


def served_archive(db, target: str, sessions: int):
    """`sessions` open sessions recorded in `db`; its store, the mirror's reader of it (nothing pushed yet), and the
    reader store `serve --mirror` would give the routes, checking the cursor on every read."""
    record(db, [OPEN] * sessions)
    store = reasonlog.open_store(db, read_only=True)
    mirror = reader.MirrorReader(engine.connect(target), push.source_of(store))
    served = reader.Mirrored(store, mirror)
    served.CHECK_EVERY_S = 0
    return store, mirror, served


class Stop(Exception):
    pass


def stopping_after(k: int):
    seen = []

    def inserted(table: str) -> None:
        seen.append(table)
        if len(seen) >= k:
            raise Stop(f"stopped after {k} inserts")
    return inserted


@pytest.mark.slow
@EXAMPLES
@given(archive=archive_st)
def test_every_list_count_and_statistic_is_the_records(db, target, archive):
    record(db, archive)
    store = reasonlog.open_store(db)
    try:
        assert_same(store, mirrored(store, target))
    finally:
        store.close()


@pytest.mark.slow
@EXAMPLES
@given(first=archive_st, more=archive_st, k=st.integers(1, 12))
def test_a_push_stopped_anywhere_converges_with_the_record_written_meanwhile(db, target, first, more, k):
    record(db, first)
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        try:
            push.push(store, mirror, "a", batch=2, inserted=stopping_after(k))
        except Stop:
            pass  # stopped after its k-th insert (a k past its last insert stops nothing)
        record(db, more)  # the record goes on while the mirror is behind
        done = push.push(store, mirror, "a", batch=2)
        assert push.cursor(mirror, "a")["done"]
        assert_same(store, reader.MirrorReader(mirror, "a"))
        again = push.push(store, mirror, "a")
        assert (again.sessions, again.entries, again.messages) == (0, 0, 0), done
    finally:
        store.close()


@pytest.mark.slow
@EXAMPLES
@given(first=archive_st, more=archive_st)
def test_a_push_of_the_recent_sessions_after_a_whole_one_leaves_the_mirror_the_record(db, target, first, more):
    record(db, first)
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        whole = push.push(store, mirror, "a")
        record(db, more)  # new sessions, some open, some with sub-agents and reported costs
        recent = push.push(store, mirror, "a", since=push.recent_since(whole.pushed_through))
        assert recent.full is False
        assert_same(store, reader.MirrorReader(mirror, "a"))
        assert push.cursor(mirror, "a")["sessions"] == len(store.list_sessions(SessionFilter(limit=None)))
    finally:
        store.close()


def test_a_push_of_the_recent_sessions_takes_those_written_since_and_a_deletion_makes_it_whole(tmp_path, target):
    """What `--watch` pushes between whole pushes: the sessions open or written since the last push's copy (a new
    session; a call added to an open session, then its end), each once, the usage of their days summed again and
    the rest kept; a session deleted meanwhile leaves the record's count of sessions unlike the mirror's, so the
    push is a whole one, which writes it deleted."""
    db = tmp_path / "a.db"
    record(db, [{**OPEN, "end": "completed"}] * 3)
    recorder = reasonlog.Recorder(db, writer="sync", strict=True)
    live = recorder.session(agent="live", model="gpt-5")
    ask = {"request": {"model": "gpt-5", "messages": [{"role": "user", "content": "go"}]},
           "response": {"role": "assistant", "content": "ok"}, "model": "gpt-5", "provider": "openai",
           "usage": reasonlog.Usage(input_tokens=5, output_tokens=1)}
    live.call(**ask)
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        whole = push.push(store, mirror, "a")
        assert (whole.full, whole.sessions) == (True, 4)
        live.call(**ask)
        live.end("completed")
        record(db, [OPEN])
        recent = push.push(store, mirror, "a", since=push.recent_since(whole.pushed_through))
        assert (recent.full, recent.sessions, recent.entries, recent.deleted) == (False, 2, 3, 0)
        assert_same(store, reader.MirrorReader(mirror, "a"))
        nothing = push.push(store, mirror, "a", since=push.recent_since(recent.pushed_through))
        assert (nothing.full, nothing.sessions) == (False, 0)
        old = store.list_sessions(SessionFilter(agent="agent0", limit=1))[0]["id"]
        assert store.delete_sessions([old]) == 1
        again = push.push(store, mirror, "a", since=push.recent_since(nothing.pushed_through))
        assert (again.full, again.sessions, again.deleted) == (True, 0, 1)
        assert_same(store, reader.MirrorReader(mirror, "a"))
    finally:
        recorder.close()
        store.close()


def test_a_push_stopped_before_its_end_leaves_the_mirror_behind_until_run_again(tmp_path, target):
    store, mirror, served = served_archive(tmp_path / "a.db", target, 3)
    try:
        with pytest.raises(Stop):  # the cursor's start, then one batch of calls, messages and its sessions
            push.push(store, mirror.engine, mirror.src, batch=1, inserted=stopping_after(4))
        assert push.cursor(mirror.engine, mirror.src)["done"] is False
        assert len(mirror.list_sessions(SessionFilter(limit=None))) == 1
        assert not served.caught_up()  # so the record answers
        assert len(served.list_sessions(SessionFilter(limit=None))) == 3
        again = push.push(store, mirror.engine, mirror.src)
        assert again.sessions == 2 and served.caught_up()
        assert_same(store, served)
    finally:
        store.close()


def test_usage_summed_by_a_push_stopped_before_its_cursor_is_summed_again_by_the_next(tmp_path, target):
    """The usage a push sums after its rows is read only once its cursor says it finished: a push stopped right
    after summing leaves the statistics read from the calls (the record's), and the next push, though no session
    changed since, sums them again; a push that changes nothing keeps the usage it found."""
    db = tmp_path / "a.db"
    record(db, [OPEN])
    store = reasonlog.open_store(db)
    try:
        mirror = reader.MirrorReader(engine.connect(target), "a")
        push.push(store, mirror.engine, "a")
        record(db, [OPEN, OPEN])

        def stop_after_summing(table: str) -> None:
            if table == "mirror_usage":
                raise Stop("stopped after summing the usage")
        with pytest.raises(Stop):
            push.push(store, mirror.engine, "a", inserted=stop_after_summing)
        assert push.cursor(mirror.engine, "a")["done"] is False
        assert_same(store, mirror)
        again = push.push(store, mirror.engine, "a")
        assert again.sessions == 0 and push.cursor(mirror.engine, "a")["done"] is True
        assert_same(store, mirror)
        summed = push.cursor(mirror.engine, "a")["usage_version"]
        push.push(store, mirror.engine, "a")
        assert push.cursor(mirror.engine, "a")["usage_version"] == summed
        assert sum(t["calls"] for t in mirror.usage_groups("agent", SessionFilter(limit=None)).values()) == 3
    finally:
        store.close()


def test_a_page_lists_each_session_as_its_last_push_left_it_while_older_rows_wait_for_a_merge(tmp_path, target):
    """A page is read without FINAL: a session pushed again after it ended still has its row of before until the
    engine merges (merges stopped here), and the page by status lists it under its new status only."""
    from reasonlog.model import SessionEnded

    db = tmp_path / "a.db"
    record(db, [OPEN] * 3)
    store = reasonlog.open_store(db)
    try:
        mirror = reader.MirrorReader(engine.connect(target), "a")
        push.push(store, mirror.engine, "a")
        mirror.engine.command(f"SYSTEM STOP MERGES {mirror.db}.mirror_sessions")
        ended = store.list_sessions(SessionFilter(limit=1))[0]["id"]
        store.write_batch([SessionEnded(ended, "2099-01-01T00:00:00Z", "completed")])
        assert push.push(store, mirror.engine, "a").sessions == 1
        before = store.list_sessions(SessionFilter(limit=3))[1]["status"]  # the recorder closed them unended
        for flt in (SessionFilter(status=before, limit=2), SessionFilter(status="completed", limit=1),
                    SessionFilter(limit=2), SessionFilter(limit=3)):
            assert mirror.list_sessions(flt) == store.list_sessions(flt), flt
        assert [s["status"] for s in mirror.list_sessions(SessionFilter(limit=3))] == ["completed", before, before]
        assert [s["id"] for s in mirror.list_sessions(SessionFilter(status=before, limit=3))].count(ended) == 0
    finally:
        store.close()


def test_a_destroyed_mirror_is_rebuilt_by_pushing_again(db, target):
    record(db, [{"exchanges": [{"calls": [(10, 2, "gpt-5", "ok")], "reported": None, "child": None}],
                 "label": "team=a", "end": "completed"}])
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        first = push.push(store, mirror, "a")
        schema.drop(mirror)
        rebuilt = push.push(store, mirror, "a")
        assert (rebuilt.sessions, rebuilt.entries, rebuilt.messages) == (first.sessions, first.entries,
                                                                         first.messages) == (1, 1, 2)
        assert_same(store, reader.MirrorReader(mirror, "a"))
    finally:
        store.close()


def test_a_deleted_session_leaves_the_mirror(db, target):
    record(db, [OPEN] * 2)
    store = reasonlog.open_store(db)
    try:
        mirror = reader.MirrorReader(engine.connect(target), "a")
        push.push(store, mirror.engine, "a")
        gone = store.list_sessions(SessionFilter(limit=1))[0]["id"]
        assert store.delete_sessions([gone]) == 1
        pushed = push.push(store, mirror.engine, "a")
        assert (pushed.sessions, pushed.deleted) == (0, 1)
        assert [s["id"] for s in mirror.list_sessions(SessionFilter(limit=None))] == \
            [s["id"] for s in store.list_sessions(SessionFilter(limit=None))]
        assert_same(store, mirror)
    finally:
        store.close()


def test_two_records_push_into_one_mirror_each_with_its_own_rows_and_cursor(tmp_path, target):
    record(tmp_path / "a.db", [OPEN])
    record(tmp_path / "b.db", [OPEN] * 2)
    a, b = reasonlog.open_store(tmp_path / "a.db"), reasonlog.open_store(tmp_path / "b.db")
    try:
        mirror = engine.connect(target)
        for store in (a, b):
            push.push(store, mirror, push.source_of(store))
        for store in (a, b):
            assert_same(store, reader.MirrorReader(mirror, push.source_of(store)))
        assert push.cursor(mirror, push.source_of(a))["sessions"] == 1
        assert push.cursor(mirror, push.source_of(b))["sessions"] == 2
    finally:
        a.close()
        b.close()


def test_the_mirror_answers_only_while_caught_up(tmp_path, target):
    db = tmp_path / "a.db"
    store, mirror, served = served_archive(db, target, 1)
    try:
        assert not served.caught_up()  # never pushed
        push.push(store, mirror.engine, mirror.src)
        assert served.caught_up()
        record(db, [OPEN])  # a session the mirror has not seen: the record answers
        assert not served.caught_up()
        assert len(served.list_sessions(SessionFilter(limit=None))) == 2
        assert len(mirror.list_sessions(SessionFilter(limit=None))) == 1
        push.push(store, mirror.engine, mirror.src)
        assert served.caught_up()
        assert_same(store, served)
    finally:
        store.close()


def test_once_answered_the_check_runs_beside_the_reads_which_take_the_last_answer_meanwhile(tmp_path, target):
    """No read waits for the count of the record's mark (250 ms on PostgreSQL at 5,000,000 messages, whose change
    marker any write on the server moves): the first check is the asking read's, the next ones a thread's."""
    db = tmp_path / "a.db"
    store, mirror, served = served_archive(db, target, 1)
    try:
        push.push(store, mirror.engine, mirror.src)
        served.CHECK_EVERY_S = 0.05
        assert served.caught_up() is True  # the first check: the read asked it
        record(db, [OPEN])  # the mirror is behind now
        time.sleep(0.1)
        assert served.caught_up() is True  # the last answer, while the check runs beside
        deadline = time.monotonic() + 30
        while served.caught_up() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.caught_up() is False
        assert len(served.list_sessions(SessionFilter(limit=None))) == 2  # so the record answers
    finally:
        store.close()


class SlowToCount:
    """The record as PostgreSQL's is at 5,000,000 messages under another database's writes: its change marker moves
    on every look and its mark takes 0.2 s to count (a spy around the real store, counting its counts)."""

    def __init__(self, store):
        self.store, self.counted, self.looks = store, 0, 0

    def __getattr__(self, name):
        return getattr(self.store, name)

    def change_marker(self):
        self.looks += 1
        return self.looks

    def mirror_mark(self):
        self.counted += 1
        time.sleep(0.2)
        return self.store.mirror_mark()


def test_a_slow_check_is_asked_again_only_after_twenty_times_its_own_time(tmp_path, target):
    """The record's count takes no more than a twentieth of the server's time: after a 0.2 s count, the next is
    not asked for 4 s however often the marker moves and the reads come (each read takes the last answer)."""
    store, mirror, _ = served_archive(tmp_path / "a.db", target, 1)
    try:
        push.push(store, mirror.engine, mirror.src)
        slow = SlowToCount(store)
        served = reader.Mirrored(slow, mirror)
        served.CHECK_EVERY_S = 0.05
        assert served.caught_up() is True  # the first check: 0.2 s
        until = time.monotonic() + 2.0
        while time.monotonic() < until:
            assert served.caught_up() is True
            time.sleep(0.01)
        assert slow.counted == 1  # every 0.05 s before: ten counts, two of every three seconds spent counting
    finally:
        store.close()


@pytest.mark.slow  # half a minute a engine: each route meets the missing mirror
def test_a_mirror_that_cannot_be_read_leaves_the_answers_to_the_record(tmp_path, target):
    store, mirror, served = served_archive(tmp_path / "a.db", target, 2)
    try:
        served.CHECK_EVERY_S = 3600  # asked once: the failure is met by a read, not by the check
        push.push(store, mirror.engine, mirror.src)
        assert served.caught_up()
        drop(target)  # the mirror's database is gone (a server restored without it, a folder wiped)
        assert_same(store, served)
        assert not served.caught_up()
    finally:
        store.close()


def test_a_target_that_is_not_a_mirror_is_refused_with_what_is_expected():
    with pytest.raises(engine.MirrorError, match="expected clickhouse://HOST:PORT/DATABASE or chdb:///PATH"):
        engine.connect("http://127.0.0.1:8123/")
    with pytest.raises(engine.MirrorError, match="letters, digits and _ only"):
        engine.connect("clickhouse://127.0.0.1:1/bad-name;drop")
    with pytest.raises(engine.MirrorError, match="cannot reach ClickHouse"):
        engine.connect("clickhouse://127.0.0.1:1/x")


def test_served_with_a_mirror_every_growing_route_answers_as_the_record(tmp_path, target):
    from fastapi.testclient import TestClient

    from reasonlog.server.app import create_app, mirrored_reader

    db = tmp_path / "a.db"
    record(db, [{"exchanges": [{"calls": [(900, 20, "gpt-5", "ok"), (5, 1, "claude-haiku-4-5", "error")],
                                "reported": (0.125, 1000, 40), "child": [(30, 3, "gpt-5", "ok")]}],
                 "label": "team=a", "end": "completed"},
                {"exchanges": [{"calls": [(70, 7, "acme-llm-9000", "ok")], "reported": None, "child": None}],
                 "label": "source=claude-code", "end": None}])
    store = reasonlog.open_store(db)
    push.push(store, engine.connect(target), push.source_of(store))
    store.close()
    plain = TestClient(create_app(lambda: reasonlog.open_store(db)))
    served = create_app(lambda: reasonlog.open_store(db), open_reader=lambda: mirrored_reader(
        reasonlog.open_store(db, read_only=True), target))
    with_mirror = TestClient(served)
    routes = ["/v1/sessions", "/v1/sessions?limit=1", "/v1/sessions?label=team=a", "/v1/sessions?model=gpt-5",
              "/v1/runs", "/usage", "/usage?split=agent", "/usage.csv?by=model", "/"]
    routes += [f"/v1/stats?by={by}" for by in ("day", "model", "agent", "run", "source")]
    for route in routes:
        want, got = plain.get(route), with_mirror.get(route)
        assert (route, got.status_code) == (route, 200)
        assert (route, got.text) == (route, want.text)
    # the reported cost replaces its calls' and its sub-agent's; a model without a price costs nothing known
    got = {(s["agent"], s["cost_usd"], s["call_count"]) for s in with_mirror.get("/v1/sessions").json()["sessions"]}
    assert got == {("agent0", 0.125, 2), ("sub", 0.0, 1), ("agent1", None, 1)}
