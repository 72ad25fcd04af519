"""`?q=` over sessions from the ClickHouse mirror (issue 36) on both real engines: the sessions a search finds are
the record's, exactly, in the same order, counted the same, with words that are common, rare and absent, with case
that Python and ClickHouse fold differently, with the operators of a search, in tool results, outcomes and
reasoning records, and with secrets the record masked; and each call's row in the mirror carries its reply's text."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mirroring import in_process_target  # noqa: F401  (the `target` fixture)

import reasonlog
from reasonlog.mirror import engine, push, reader
from reasonlog.store import SessionFilter

SECRET = "sk-ant-api03-" + "Qx7_-z" * 8  # masked by the recorder before it is written: neither holds it
WORDS = ["price", "Zebra", "STRASSE", "Ärger", "İstanbul", "straße", "timed out", "ẞig", "买入股票", SECRET,
         "50%_off\\now"]  # a LIKE's own characters, as text
QUERIES = ["price", "PRICE", "zebra", "straße", "strasse", "ärger", "i̇stanbul", "istanbul", "timed out",
           '"timed out"', "timed OR zebra", "price -zebra", "zeb*", "nothing-here", "pr", "股票", "买入",
           SECRET, SECRET[:20], "[redacted:", "redacted:anthropic", "read_file", "trade", "approach", "tool said",
           "50%", "%_o", "0%_", "f\\n", "_", "%", "50_", "0%o"]
EXAMPLES = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])

text_st = st.lists(st.sampled_from(WORDS), min_size=0, max_size=3).map(" ".join)
session_st = st.fixed_dictionaries({
    "said": st.lists(text_st, min_size=1, max_size=3),  # one call per text: the prompt, and its reply
    "tool": st.none() | text_st, "outcome": st.none() | text_st, "reasoning": st.none() | text_st,
    "agent": st.sampled_from(["a", "b"])})


def write(db, sessions: list[dict]) -> None:
    recorder = reasonlog.Recorder(db, writer="sync", strict=True)
    try:
        for spec in sessions:
            s = recorder.session(agent=spec["agent"], model="gpt-5")
            for n, said in enumerate(spec["said"]):
                call = s.call(request={"model": "gpt-5", "messages": [{"role": "user", "content": f"ask {said}"}]},
                              response={"role": "assistant", "content": f"answer {n} {said}"}, model="gpt-5",
                              provider="openai", usage=reasonlog.Usage(input_tokens=3, output_tokens=2))
            if spec["tool"] is not None:
                s.tool_result("tu1", f"tool said {spec['tool']}", name="read_file", input={"path": spec["tool"]})
            if spec["outcome"] is not None:
                s.outcome("trade", {"note": spec["outcome"]}, call_id=call)
            if spec["reasoning"] is not None:
                s.reason("approach", {"summary": f"thought {spec['reasoning']}"})
            s.end("completed")
    finally:
        recorder.close()


def found(store, q: str, **more) -> tuple[list[str], int]:
    return ([s["id"] for s in store.list_sessions(SessionFilter(text=q, limit=None, **more))],
            store.count_sessions(SessionFilter(text=q, limit=None, **more)))


def assert_same_search(store, mirror) -> None:
    for q in QUERIES:
        assert found(mirror, q) == found(store, q), q
        assert found(mirror, q, agent="a") == found(store, q, agent="a"), q
        page = SessionFilter(text=q, limit=2)
        assert [s["id"] for s in mirror.list_sessions(page)] == [s["id"] for s in store.list_sessions(page)], q
        assert mirror.list_sessions(page) == store.list_sessions(page), q


@pytest.mark.slow
@EXAMPLES
@given(archive=st.lists(session_st, min_size=1, max_size=5))
def test_a_search_over_sessions_finds_in_the_mirror_what_it_finds_in_the_record(db, target, archive):
    write(db, archive)
    store = reasonlog.open_store(db)
    try:
        push.push(store, engine.connect(target), "a")
        assert_same_search(store, reader.MirrorReader(engine.connect(target), "a"))
    finally:
        store.close()


def test_named_searches_and_their_routes_answer_as_the_record(tmp_path, target):
    from fastapi.testclient import TestClient

    from reasonlog.server.app import create_app, mirrored_reader

    db = tmp_path / "a.db"
    every = {"tool": None, "outcome": None, "reasoning": None}
    write(db, [{"said": ["price Zebra", "STRASSE"], **every, "tool": "Ärger 50%_off\\now", "agent": "a"},
               {"said": ["price", SECRET], **every, "outcome": "İstanbul", "agent": "b"},
               {"said": ["price timed out"], **every, "reasoning": "ẞig 买入股票", "agent": "a"}])
    store = reasonlog.open_store(db)
    try:
        push.push(store, engine.connect(target), push.source_of(store))
        mirror = reader.MirrorReader(engine.connect(target), push.source_of(store))
        assert_same_search(store, mirror)
        # common, rare, absent; case folded as Python folds it; in a tool result, an outcome, a reasoning record
        assert [found(mirror, q)[1] for q in ("price", "zebra", "nothing-here", "strasse", "ärger", "i̇stanbul",
                                              "ßig", "trade")] == [3, 1, 0, 1, 1, 1, 1, 1]
        assert found(mirror, SECRET)[1] == 0 and found(mirror, "[redacted:anthropic")[1] == 1  # masked in both
    finally:
        store.close()
    plain = TestClient(create_app(lambda: reasonlog.open_store(db)))
    served = TestClient(create_app(lambda: reasonlog.open_store(db), open_reader=lambda: mirrored_reader(
        reasonlog.open_store(db, read_only=True), target)))
    for route in ("/v1/sessions?q=price", "/v1/sessions?q=price&limit=1", "/v1/sessions?q=zebra&agent=a",
                  "/v1/sessions?q=nothing-here", "/?q=price", "/?q=strasse", '/v1/sessions?q="unclosed'):
        want, got = plain.get(route), served.get(route)
        assert (route, got.status_code, got.text) == (route, want.status_code, want.text)


def test_each_call_row_carries_its_reply_text(tmp_path, target):
    db = tmp_path / "a.db"
    every = {"tool": None, "outcome": None, "reasoning": None, "agent": "a"}
    write(db, [{"said": ["price", "Zebra"], **every}, {"said": [SECRET], **every}])
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        push.push(store, mirror, "a")
        rows = mirror.query(f"SELECT reply FROM {mirror.database}.mirror_calls FINAL WHERE src = 'a'"
                            " AND deleted = 0")
        replies = sorted(r[0] for r in rows)
        assert replies[1:] == ["answer 0 price", "answer 1 Zebra"]
        assert replies[0].startswith("answer 0 [REDACTED:anthropic_key:") and SECRET not in replies[0]
        calls = [c["id"] for s in store.list_sessions(SessionFilter(limit=None))
                 for c in store.get_session(s["id"])["calls"]]
        assert replies == sorted(store.get_call(c)["response"]["content"] for c in calls)  # the record's, masked
    finally:
        store.close()


def test_a_mirror_of_the_older_layout_is_pushed_again_whole(tmp_path, target):
    db = tmp_path / "a.db"
    write(db, [{"said": ["price Zebra"], "tool": None, "outcome": None, "reasoning": None, "agent": "a"}])
    store = reasonlog.open_store(db)
    try:
        mirror = engine.connect(target)
        push.push(store, mirror, "a")
        # as the first layout had it: the messages' text as written, no reply on the calls, no mirror_texts
        mirror.command(f"DROP TABLE {mirror.database}.mirror_texts")
        mirror.command(f"ALTER TABLE {mirror.database}.mirror_messages RENAME COLUMN low TO text"
                       if mirror.dialect.version >= (20, 4) else f"DROP TABLE {mirror.database}.mirror_messages")
        if mirror.dialect.version < (20, 4):  # 18.16 renames no column: the old table made again by hand
            mirror.command(f"CREATE TABLE {mirror.database}.mirror_messages (src String, session_id String,"
                           " idx UInt64, version UInt64, deleted UInt8, role Nullable(String), at String,"
                           " call_id Nullable(String), text String) ENGINE = ReplacingMergeTree(version)"
                           " ORDER BY (src, session_id, idx)")
        again = push.push(store, mirror, "a")
        assert (again.sessions, again.entries, again.messages) == (1, 1, 2)  # the whole record, not nothing
        assert found(reader.MirrorReader(mirror, "a"), "zebra") == found(store, "zebra") == ([store.list_sessions(
            SessionFilter(limit=None))[0]["id"]], 1)
    finally:
        store.close()


@pytest.mark.slow
def test_a_page_of_a_search_over_many_sessions_is_the_records_however_far_back_its_sessions_are(tmp_path, target):
    """The mirror looks for a page among the newest sessions first, then among more, then in every session: a word
    in each session, one in the older half only, one in the oldest few only, and one whose newest session was
    deleted after a push, each page as the record gives it."""
    db = tmp_path / "a.db"
    every = {"tool": None, "outcome": None, "reasoning": None, "agent": "a"}
    write(db, [{"said": [" ".join(["price", *(["older"] if n < 120 else []), *(["oldest"] if n < 10 else []),
                                   *(["gone"] if n in (3, 229) else [])])], **every} for n in range(230)])
    store = reasonlog.open_store(db)
    try:
        mirror = reader.MirrorReader(engine.connect(target), "a")
        push.push(store, mirror.engine, "a")
        newest = store.list_sessions(SessionFilter(text="gone", limit=1))[0]["id"]
        assert store.delete_sessions([newest]) == 1
        push.push(store, mirror.engine, "a")
        for q in ("price", "older", "oldest", "gone"):
            for limit in (2, 51):
                page = SessionFilter(text=q, limit=limit)
                assert mirror.list_sessions(page) == store.list_sessions(page), (q, limit)
        assert [len(mirror.list_sessions(SessionFilter(text=q, limit=51))) for q in ("older", "oldest", "gone")] \
            == [51, 10, 1]
    finally:
        store.close()


def test_a_fresh_mirror_pushed_by_the_cli_carries_the_text_index_its_engine_allows_and_finds_as_the_record(
        tmp_path, target):
    """A mirror made by `reasonlog mirror push` into an empty database: its searched tables carry the n-gram skip
    index where the engine has skip indexes (chdb's ClickHouse 26.9; 21.1 and later) and none on ClickHouse 18.16,
    and a rare text, found through that index, finds what the record finds."""
    from click.testing import CliRunner

    from reasonlog.cli.main import cli

    db = tmp_path / "a.db"
    every = {"tool": None, "outcome": None, "reasoning": None, "agent": "a"}
    write(db, [{"said": ["price Zebra"], **every, "tool": "Ärger"}, *[{"said": ["price"], **every}] * 3])
    done = CliRunner().invoke(cli, ["--db", str(db), "mirror", "push", target, "--json"])
    assert done.exit_code == 0, done.output
    mirror = engine.connect(target)
    indexed = mirror.dialect.version >= (21, 1)
    assert indexed == target.startswith("chdb:")  # the two engines of the tests: chdb 26.9, the server 18.16
    created = {table: mirror.query(f"SHOW CREATE TABLE {mirror.database}.{table}")[0][0]
               for table in ("mirror_messages", "mirror_texts", "mirror_calls", "mirror_sessions")}
    shown = "INDEX low_grams low TYPE ngrambf_v1(3, 16384, 2, 0) GRANULARITY 1"
    assert [shown in created[t] for t in created] == [indexed, indexed, False, False]
    if indexed:
        assert sorted(mirror.query(f"SELECT table, name, type FROM system.data_skipping_indices"
                                   f" WHERE database = '{mirror.database}'")) == [
            ("mirror_messages", "low_grams", "ngrambf_v1"), ("mirror_texts", "low_grams", "ngrambf_v1")]
    store = reasonlog.open_store(db)
    try:
        served = reader.MirrorReader(mirror, push.source_of(store))
        for q in ("zebra", "price zebra", "ärger", "nothing-here", "price"):
            assert found(served, q) == found(store, q), q
        assert [found(served, q)[1] for q in ("zebra", "ärger", "nothing-here", "price")] == [1, 1, 0, 4]
    finally:
        store.close()
