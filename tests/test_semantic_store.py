"""Search by meaning, the store's side and the backlog (issue 24), on SQLite and PostgreSQL: which units are cut from a
session, that each distinct text is embedded once, that a model change embeds again, that a pass stopped at any batch
is finished by the next without embedding anything twice, keyword ranking, vector ranking and sessions like one.

Vectors come from a local OpenAI-shaped server (tests/embeddings_server.py): bags of words, so rankings are known."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from embeddings_server import EmbeddingsServer, bag_of_words
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.semantic import EmbeddingFailed, HttpEmbedder
from reasonlog.semantic.backlog import embed_backlog
from reasonlog.store import SessionFilter
from reasonlog.store.units import TOOL_RESULT_MIN_CHARS

ALL = SessionFilter(limit=None)
LONG_RESULT = "line of output from the test runner " * 8  # 288 characters: a unit
SHORT_RESULT = "ok"  # under TOOL_RESULT_MIN_CHARS: no unit


@pytest.fixture
def store(db):
    opened = reasonlog.open_store(db)
    yield opened
    opened.close()


@pytest.fixture
def server():
    with EmbeddingsServer() as s:
        yield s


def _vector(text: str) -> bytes:
    v = np.asarray(bag_of_words(text), dtype="<f4")
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


def _record_all_kinds(db) -> str:
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="coder") as s:
        h = [{"role": "user", "content": "please deploy the billing service"}]
        reply = {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "the deploy needs a migration first", "signature": "sig"},
            {"type": "text", "text": "I will run the migration, then deploy."},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "make migrate"}}]}
        s.call(messages=list(h), system="You are a careful release engineer.", response=reply)
        h += [reply, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": LONG_RESULT},
            {"type": "tool_result", "tool_use_id": "t2", "content": SHORT_RESULT}]}]
        s.call(messages=list(h), system="You are a careful release engineer.",
               response={"role": "assistant", "content": "Deployed."})
        s.tool_result("t3", "x" * TOOL_RESULT_MIN_CHARS, name="read_file")
    rec.close()
    return s.id


def test_a_session_is_cut_into_user_assistant_tool_result_and_summary_units(db, store):
    sid = _record_all_kinds(db)
    assert store.cut_units() == 5
    texts = {text for _, text in store.unit_backlog("m", 100)}
    assert texts == {"please deploy the billing service",
                     "the deploy needs a migration first\nI will run the migration, then deploy.",
                     LONG_RESULT.strip(), "Deployed.", "x" * TOOL_RESULT_MIN_CHARS}  # no system prompt, no "ok"
    store.save_summaries([{"target_kind": "session", "target_id": sid, "session_id": sid, "status": "ok",
                           "text": "Deployed billing after a migration.", "error": None, "source_hash": "h",
                           "summarizer": "offline", "model": None, "prompt_hash": None, "version": "1",
                           "created_at": "2026-01-01T00:00:00Z", "attempted_at": "2026-01-01T00:00:00Z"}])
    assert store.cut_units() == 1  # only the summary is new
    assert store.cut_units() == 0
    ids = dict((text, tid) for tid, text in store.unit_backlog("m", 100))
    store.save_vectors("m", [(tid, _vector(text)) for text, tid in ids.items()])
    hits = store.vector_search(_vector("Deployed billing after a migration."), "m", ALL, 10)
    where = {(h["kind"], h["message_idx"], h["role"], h["name"]) for h in hits}
    assert where == {("message", 1, "user", None), ("message", 2, "assistant", None), ("message", 3, "user", None),
                     ("message", 4, "assistant", None), ("tool_result", 5, "tool", "read_file"),
                     ("summary", None, None, None)}  # the system prompt is timeline entry 0
    assert hits[0]["kind"] == "summary" and hits[0]["score"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_a_text_said_again_and_again_is_stored_and_embedded_once(db, store, server):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    for agent in ("a", "b"):
        with rec.session(agent=agent) as s:
            h: list = []
            for n in range(3):
                h += [{"role": "user", "content": "continue with the next step"}]
                s.call(messages=list(h), response={"role": "assistant", "content": f"step {agent}{n} done"})
                h += [{"role": "assistant", "content": f"step {agent}{n} done"}]
    rec.close()
    done = embed_backlog(store, HttpEmbedder(server.url, "bow"))
    assert (done.units_cut, done.embedded) == (12, 7)  # 6 "continue" units share one text
    assert sorted(server.texts()).count("continue with the next step") == 1
    counts = store.semantic_counts("bow@" + server.url, sessions=True)
    assert counts == {"units": 12, "texts": 7, "embedded": 7, "backlog": 0, "sessions_to_cut": 0}
    hits = store.vector_search(_vector("continue with the next step"), "bow@" + server.url, ALL, 50)
    assert sorted((h["session_id"][-4:], h["message_idx"]) for h in hits if h["score"] > 0.99) == sorted(
        (sid[-4:], idx) for sid in {h["session_id"] for h in hits} for idx in (0, 2, 4))


@pytest.mark.slow
def test_a_new_model_embeds_everything_again_and_searches_only_its_own_vectors(db, store, server):
    _record_all_kinds(db)
    first, second = HttpEmbedder(server.url, "small"), HttpEmbedder(server.url, "large")
    assert embed_backlog(store, first).embedded == 5
    assert embed_backlog(store, first).embedded == 0
    assert store.semantic_counts(second.model)["backlog"] == 5
    assert embed_backlog(store, second).embedded == 5
    assert len(server.requests) == 2  # one batch each
    assert store.vector_search(_vector("Deployed."), "never-used", ALL, 5) == []
    assert store.vector_search(_vector("Deployed."), second.model, ALL, 1)[0]["snippet"] == "Deployed."


@pytest.mark.slow
def test_deleting_a_session_takes_its_units_and_only_its_texts_and_vectors(db, store, server):
    keep = _record_all_kinds(db)
    gone = _record_all_kinds(db)  # the same texts: shared
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="other") as s:
        s.call(messages=[{"role": "user", "content": "a text only this session has"}], response="fine")
    rec.close()
    embedder = HttpEmbedder(server.url, "bow")
    embed_backlog(store, embedder)
    assert store.semantic_counts(embedder.model) == {"units": 12, "texts": 7, "embedded": 7, "backlog": 0}
    store.delete_sessions([s.id, gone])
    assert store.semantic_counts(embedder.model) == {"units": 5, "texts": 5, "embedded": 5, "backlog": 0}
    assert {h["session_id"] for h in store.vector_search(_vector("Deployed."), embedder.model, ALL, 10)} == {keep}


@pytest.mark.slow
def test_an_embeddings_server_error_is_one_line_naming_the_url(server):
    with EmbeddingsServer(key="right") as keyed:
        with pytest.raises(EmbeddingFailed) as refused:
            HttpEmbedder(keyed.url, "m", key="wrong").embed(["hello"])
        assert str(refused.value) == f"{keyed.url}/embeddings: HTTP 401: Incorrect API key provided"
        assert len(HttpEmbedder(keyed.url, "m", key="right").embed(["hello"])[0]) == 64 * 4
    with EmbeddingsServer(fail_from=0) as failing:
        with pytest.raises(EmbeddingFailed) as failed:
            HttpEmbedder(failing.url, "m").embed(["hello"])
        assert str(failed.value) == f"{failing.url}/embeddings: HTTP 500: the model server fell over"
    gone = server.url.replace(server.url.rsplit(":", 1)[1].split("/")[0], "9")  # port 9: nothing listens
    with pytest.raises(EmbeddingFailed, match=r"^http://127\.0\.0\.1:9/v1/embeddings: cannot reach the embeddings"
                                              r" server \(.*\)$"):
        HttpEmbedder(gone, "m").embed(["hello"])


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.integers(1, 12), batch=st.integers(1, 5), stop_after=st.integers(0, 12))
def test_a_pass_stopped_at_any_batch_is_finished_by_the_next_embedding_each_text_once(dialect, texts, batch,
                                                                                      stop_after):
    from conftest import fresh_database

    with tempfile.TemporaryDirectory() as folder, fresh_database(dialect, Path(folder)) as db:
        rec = reasonlog.Recorder(db, writer="sync", strict=True)
        with rec.session(agent="a") as s:
            for n in range(texts):
                s.call(messages=[{"role": "user", "content": f"question number {n}"}], response=None)
        rec.close()
        store = reasonlog.open_store(db)
        try:
            with EmbeddingsServer(fail_from=stop_after) as failing:
                if stop_after * batch < texts:
                    with pytest.raises(EmbeddingFailed):
                        embed_backlog(store, HttpEmbedder(failing.url, "bow"), batch=batch)
                committed = {t for request in failing.requests[:stop_after] for t in request}
            with EmbeddingsServer() as server:
                embedder = HttpEmbedder(server.url, "bow")
                embedder.model = HttpEmbedder(failing.url, "bow").model  # the same model, served again
                embed_backlog(store, embedder, batch=batch)
                again = server.texts()
            assert sorted(again + list(committed)) == sorted(f"question number {n}" for n in range(texts))
            assert store.semantic_counts(embedder.model) == {"units": texts, "texts": texts, "embedded": texts,
                                                             "backlog": 0}
        finally:
            store.close()


@pytest.mark.slow
def test_keywords_rank_rarer_words_higher_and_drop_stopwords(db, store):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        for text in ("the server restarted", "the server is slow", "server logs rotated", "deploy the server now",
                     "nothing to see", "migrations ran"):
            s.call(messages=[{"role": "user", "content": text}], response=None)
    rec.close()
    hits = store.keyword_search("the server deploy", ALL, 10)
    assert [h["snippet"] for h in hits] == ["deploy the server now", "the server restarted", "the server is slow",
                                            "server logs rotated"]  # equal scores: in the timeline's order
    server, deploy = np.log(1 + 6 / 4), np.log(1 + 6 / 1)  # "server" is in 4 of the 6 records, "deploy" in 1
    assert [h["score"] for h in hits] == [pytest.approx(server + deploy)] + [pytest.approx(server)] * 3
    assert [h["message_idx"] for h in hits] == [3, 0, 1, 2]
    assert store.keyword_search("the of and", ALL, 10) == []  # stopwords only
    assert [h["snippet"] for h in store.keyword_search("migrat", ALL, 10)] == ["migrations ran"]


@pytest.mark.slow
def test_a_word_in_most_records_lists_no_candidates_of_its_own_and_the_answer_stays_bounded(db, store, monkeypatch):
    """At 500,000 messages a word like "price" is in most records: listing them made a hybrid search take 30 s.
    Past CAP records a word is common: a rarer word's records are the candidates, and each still scores it."""
    from reasonlog.store import keywords

    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        for n in range(8):
            s.call(messages=[{"role": "user", "content": f"price check {n}"}], response=None)
        s.call(messages=[{"role": "user", "content": "price of the rollback"}], response=None)
        s.call(messages=[{"role": "user", "content": "rollback done"}], response=None)
    rec.close()
    uncapped = store.keyword_search("price rollback", ALL, 3)
    assert [h["snippet"] for h in uncapped] == ["price of the rollback", "rollback done", "price check 0"]
    monkeypatch.setattr(keywords, "CAP", 4)  # "price" (9 records) is now common, "rollback" (2) is not
    capped = store.keyword_search("price rollback", ALL, 3)
    assert [h["snippet"] for h in capped] == ["price of the rollback", "rollback done"]  # only rollback's records
    assert capped[0]["score"] == pytest.approx(np.log(1 + 10 / 2) + np.log(1 + 10 / 8))  # price weighs as if in 4+4
    # a word found nowhere lists nothing: the common word's first records are the candidates, not none
    assert [h["snippet"] for h in store.keyword_search("price zebra", ALL, 2)] == ["price check 0", "price check 1"]
    monkeypatch.setattr(keywords, "VERIFIED", 2)
    monkeypatch.setattr(keywords, "VERIFIED_PER_HIT", 0)  # two candidates read at most: among equal bounds the newest
    assert [h["snippet"] for h in store.keyword_search("price", ALL, 10)] == ["price check 2", "price check 3"]


@pytest.mark.slow
def test_keyword_reading_stops_once_no_candidate_left_can_score_above_the_last_hit(db, store, monkeypatch):
    """At 500,000 messages a query of common words read 2,000 candidates that could at best tie the hits kept: the
    hybrid search's p95 was 242-403 ms. Candidates are read newest first among equal bounds, and reading stops once
    the next page can only tie: the newest records holding every word are the answer."""
    from reasonlog.store import keywords

    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        for n in range(8):
            s.call(messages=[{"role": "user", "content": f"price check {n}" + (" urgent" if n == 3 else "")}],
                   response=None)
        s.call(messages=[{"role": "user", "content": "the rollback price"}], response=None)
    rec.close()
    assert [h["snippet"] for h in store.keyword_search("price", ALL, 2)] == ["price check 0", "price check 1"]
    monkeypatch.setattr(keywords, "PAGE", 2)  # the first page (the two newest) fills the answer with the best score
    assert [h["snippet"] for h in store.keyword_search("price", ALL, 2)] == ["price check 7", "the rollback price"]
    # a rarer word raises its records' bound above the rest: read first, whatever their age
    assert [h["snippet"] for h in store.keyword_search("urgent price", ALL, 2)] == ["price check 3 urgent",
                                                                                   "the rollback price"]


VOCABULARY = ["price", "rollback", "server", "deploy", "migration", "cash", "tests", "failed"]


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4), min_size=1, max_size=14,
                unique_by=" ".join),  # a message sent again unchanged is a resend, not a new one
       st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3, unique=True), st.integers(1, 5),
       st.integers(1, 4))
def test_keyword_ranking_never_drops_a_better_hit_for_any_texts(texts, query, limit, page):
    """Over generated messages and queries, read in pages of any size: every hit's score is the idf of the words its
    text holds, and the scores returned are the best `limit` of scoring every message (stopping early loses ties at
    most, never a better hit)."""
    from reasonlog.store import keywords

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "k.db"
        rec = reasonlog.Recorder(db, writer="sync", strict=True)
        with rec.session(agent="a") as s:
            for words in texts:
                s.call(messages=[{"role": "user", "content": " ".join(words)}], response=None)
        rec.close()
        distinct = [" ".join(words) for words in texts]
        weight = {w: np.log(1 + len(distinct) / sum(w in t for t in distinct)) for w in query if any(
            w in t for t in distinct)}
        exact = sorted((round(sum(weight[w] for w in weight if w in " ".join(words)), 6) for words in texts),
                       reverse=True)
        exact = [score for score in exact if score > 0][:limit]
        store = reasonlog.open_store(db)
        saved = keywords.PAGE
        keywords.PAGE = page
        try:
            hits = store.keyword_search(" ".join(query), ALL, limit)
        finally:
            keywords.PAGE = saved
            store.close()
    assert [h["score"] for h in hits] == pytest.approx(exact)
    for h in hits:
        held = [w for w in weight if w in distinct[h["message_idx"]]]
        assert h["score"] == pytest.approx(sum(weight[w] for w in held))


@pytest.mark.slow
def test_vector_search_follows_the_session_filter_and_similar_sessions_rank_by_mean(db, store, server):
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    ids = {}
    for agent, texts in (("ops", ["restart the database server", "database backups failed"]),
                         ("ops2", ["the database server is down", "restore database backups"]),
                         ("poet", ["write a sonnet about rain", "rhyme rain with pain"])):
        with rec.session(agent=agent) as s:
            for text in texts:
                s.call(messages=[{"role": "user", "content": text}], response=None)
        ids[agent] = s.id
    rec.close()
    embedder = HttpEmbedder(server.url, "bow")
    assert embed_backlog(store, embedder).sessions == 3
    hits = store.vector_search(_vector("database server"), embedder.model, SessionFilter(agent="poet"), 10)
    assert {h["session_id"] for h in hits} == {ids["poet"]} and len(hits) == 2
    similar = store.similar_sessions(ids["ops"], embedder.model, 5)
    assert [s["id"] for s in similar] == [ids["ops2"], ids["poet"]]
    assert similar[0]["score"] > 0.5 > similar[1]["score"]
    assert store.similar_sessions(ids["ops"], "another model", 5) == []


@pytest.mark.slow
def test_a_file_with_vectors_opens_in_the_stdlib_sqlite3_checks_backs_up_and_exports_without_them(tmp_path, server):
    import sqlite3

    from click.testing import CliRunner

    from reasonlog.cli.main import cli

    db = tmp_path / "v.db"
    _record_all_kinds(db)
    store = reasonlog.open_store(db)
    assert embed_backlog(store, HttpEmbedder(server.url, "bow")).embedded == 5
    store.close()
    with sqlite3.connect(db) as plain:  # no extension loaded: the tables are plain ones
        assert plain.execute("SELECT COUNT(*), MIN(dim), MAX(dim) FROM unit_vectors").fetchone() == (5, 64, 64)
    runner = CliRunner()
    checked = runner.invoke(cli, ["--db", str(db), "db", "check", "--json"])
    assert checked.exit_code == 0 and orjson_loads(checked.stdout)["ok"] is True
    assert runner.invoke(cli, ["--db", str(db), "db", "backup", str(tmp_path / "b.db")]).exit_code == 0
    backup = reasonlog.open_store(tmp_path / "b.db", read_only=True)
    assert backup.semantic_counts("bow@" + server.url)["embedded"] == 5
    backup.close()
    assert runner.invoke(cli, ["--db", str(db), "export", "-o", str(tmp_path / "all.jsonl")]).exit_code == 0
    assert runner.invoke(cli, ["--db", str(tmp_path / "n.db"), "import", str(tmp_path / "all.jsonl")]).exit_code == 0
    fresh = reasonlog.open_store(tmp_path / "n.db")
    assert fresh.semantic_counts("bow@" + server.url) == {"units": 0, "texts": 0, "embedded": 0, "backlog": 0}
    assert embed_backlog(fresh, HttpEmbedder(server.url, "bow")).units_cut == 5  # derived again from the import
    fresh.close()


def orjson_loads(text: str):
    import orjson

    return orjson.loads(text)
