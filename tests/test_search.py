"""`reasonlog search` finds any part of any recorded text: messages, tool results and outcomes."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.store import SessionFilter

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def db_path(db):
    """Every test here runs on SQLite and on PostgreSQL: the recorder and the CLI take the dialect's database."""
    return db


def _say(rec, *texts: str) -> str:
    """One session whose user says each text in turn; returns its id."""
    with rec.session(agent="a") as s:
        for text in texts:
            s.call(messages=[{"role": "user", "content": text}], response="noted")
    return s.id


def _found(store, text: str) -> list[str]:
    return [h["snippet"] for h in store.search(text, SessionFilter(limit=None), limit=None)]


def test_a_word_longer_than_an_index_entry_and_text_in_any_word_are_found(recorder, store_of):
    blob = "QmFzZTY0" * 200  # a 1,600-character word, as base64 images and minified code carry
    _say(recorder, f"image {blob} ends", "subword: reconnecting", "plain text")
    store = store_of()
    (hit,) = _found(store, "ZTY0QmFz")
    assert hit == f"image {blob[:72]}…"  # it occurs at 10: the snippet runs 60 characters past its end
    assert _found(store, "connect") == ["subword: reconnecting"]
    assert _found(store, "word: reco") == ["subword: reconnecting"]
    assert _found(store, "nowhere at all") == []


def test_the_middle_of_a_word_is_found(recorder, store_of):
    _say(recorder, "the transaction failed", "ransack the act")
    assert _found(store_of(), "ransact") == ["the transaction failed"]  # the other has every trigram, not the text


def test_chinese_words_inside_a_run_are_found(recorder, store_of):
    _say(recorder, "今天天气很好", "明天下雨")
    store = store_of()
    assert _found(store, "天气") == ["今天天气很好"]
    assert _found(store, "天气很") == ["今天天气很好"]
    assert _found(store, "气") == ["今天天气很好"]


def test_case_folding_covers_non_ascii(recorder, store_of):
    _say(recorder, "großer Ärger", "STRASSE")
    store = store_of()
    assert _found(store, "ÄRGER") == ["großer Ärger"]
    assert _found(store, "GROẞER") == ["großer Ärger"]  # capital sharp s folds to ß
    assert _found(store, "strasse") == ["STRASSE"]  # ß is not expanded to ss: "strasse" misses "straße"


def test_punctuation_and_short_queries_are_searched_as_text(recorder, store_of):
    _say(recorder, "wait...", "a -- b", "tokens")
    store = store_of()
    assert _found(store, "...") == ["wait..."]
    assert _found(store, "--") == ["a -- b"]
    assert _found(store, "ok") == ["tokens"]


def test_tool_results_and_outcomes_are_found_with_where_they_are(recorder, store_of):
    with recorder.session(agent="a") as s:
        call = s.call(messages=[{"role": "user", "content": "price?"}],
                      response={"role": "assistant", "content": [
                          {"type": "tool_use", "id": "tu1", "name": "get_price", "input": {"symbol": "MSFT"}}]})
        s.tool_result("tu1", "quote service unreachable", name="get_price")
        with s.tool("fetch_news", {"q": "MSFT"}) as t:
            t.result = {"headline": "Redmond quarterly figures"}
        s.outcome("trade", {"action": "hold", "reason": "no reliable quote"}, call_id=call)
    store = store_of()
    (tool,) = store.search("service unreach", SessionFilter())
    assert {k: tool[k] for k in ("kind", "session_id", "message_idx", "call_id", "tool_use_id", "name")} == {
        "kind": "tool_result", "session_id": s.id, "message_idx": 2, "call_id": call, "tool_use_id": "tu1",
        "name": "get_price"}
    assert [h["kind"] for h in store.search("quarterly fig", SessionFilter())] == ["tool_result"]
    (outcome,) = store.search("reliable quote", SessionFilter())
    assert (outcome["kind"], outcome["name"], outcome["call_id"]) == ("outcome", "trade", call)


def test_cli_prints_the_number_of_matches_not_the_limit(db_path, recorder):
    _say(recorder, *[f"checkpoint {i} reached" for i in range(60)])
    result = CliRunner().invoke(cli, ["--db", str(db_path), "search", "checkpoint"])
    assert result.exit_code == 0
    assert "60 matches; showing the first 50 (--limit 0 shows all)" in result.output
    shown = orjson.loads(CliRunner().invoke(cli, ["--db", str(db_path), "search", "point", "--json",
                                                  "--limit", "7"]).output)
    assert len(shown) == 7


def test_cli_gives_a_clear_message_for_an_empty_query(db_path, recorder):
    _say(recorder, "anything")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "search", "   "])
    assert result.exit_code == 2 and "nothing to search for" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "no message, tool result or outcome contains '--'" in CliRunner().invoke(
        cli, ["--db", str(db_path), "search", "--", "--"]).output


def test_a_schema1_database_upgrades_into_the_new_index(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema1.db", path)
    store = reasonlog.open_store(path)
    hits = store.search("eed timed ou", SessionFilter(limit=None), limit=None)
    assert sorted(h["kind"] for h in hits) == ["message", "message", "tool_result", "tool_result"]
    assert [h["kind"] for h in store.search("cash_after\": 5311", SessionFilter())] == []  # keys are not text
    assert [h["name"] for h in store.search("5311.79", SessionFilter())] == ["trade"]
    store.close()


def test_unindexed_contents_are_no_longer_found_nor_kept_in_the_searched_text(tmp_path):
    """Taking a content out (what `reasonlog prune` does before deleting it) rewrites the block that held its text."""
    from search_cases import block_texts

    from reasonlog.store.search import unindex_contents  # the seam `reasonlog prune` uses

    db_path = tmp_path / "t.db"
    recorder = reasonlog.Recorder(db_path, writer="sync", strict=True)
    _say(recorder, "keep this sentence", "prune this sentence")
    recorder.close()
    assert "prune this sentence" in block_texts(db_path).values()
    db = sqlite3.connect(db_path, isolation_level=None)
    (cid,) = db.execute("SELECT content_id FROM messages WHERE role = 'user' AND idx = 2").fetchone()
    db.execute("BEGIN")
    unindex_contents(db, [cid])
    db.execute("COMMIT")
    db.close()
    assert (0, cid) not in block_texts(db_path) and "prune this sentence" not in block_texts(db_path).values()
    store = reasonlog.open_store(db_path)
    assert _found(store, "this sentence") == ["keep this sentence"]
    store.close()


@pytest.mark.parametrize("query", ["keep this", "KEEP THIS", "p this s"])
def test_answers_are_exact_phrases(recorder, store_of, query):
    _say(recorder, "keep this sentence", "this keep sentence")
    assert _found(store_of(), query) == ["keep this sentence"]


def test_quoted_phrases_or_exclusion_and_a_trailing_star(recorder, store_of):
    _say(recorder, "the price feed timed out", "timed out waiting for NVDA", "feed the cat", "transaction done")
    store = store_of()
    assert _found(store, "feed timed") == ["the price feed timed out"]  # no operator: one phrase
    assert sorted(_found(store, '"timed out" -nvda')) == ["the price feed timed out"]
    assert sorted(_found(store, "cat OR transaction")) == ["feed the cat", "transaction done"]
    # feed AND (timed OR cat)
    assert sorted(_found(store, "feed timed OR cat")) == ["feed the cat", "the price feed timed out"]
    assert _found(store, "transac*") == ["transaction done"]
    assert _found(store, "-> --") == []  # punctuation is text, not an exclusion


@pytest.mark.parametrize("query,says", [("a OR", "OR needs a term on each side"), ("-nvda", "only excluded terms"),
                                        ('"open', "quote is not closed"), ("tr*ns*", "only a trailing *")])
def test_a_query_it_cannot_read_says_what_is_supported(recorder, db_path, query, says):
    _say(recorder, "anything")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "search", "--", query])  # `--`: -nvda is no option
    assert result.exit_code == 2 and says in result.output and '"exact phrase", a OR b, -excluded' in result.output
