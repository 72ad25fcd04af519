"""SQLite's searched text written in bulk (migration 25, store/search_pending.py): rows wait in `search_pending` until
enough text waits, then one transaction writes them to blocks (store/text_blocks.py). A search finds exactly what a
scan of the stored texts finds whether a row waits or is in a block, after a prune, with two writers on one file, and
on files from before schemas 25 and 26."""
from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_cases import block_texts, drawn_query, found, scanned, session, sound, texts

from reasonlog.store import SessionFilter, keywords, open_store, search_pending
from reasonlog.store.maintenance import PruneCriteria
from reasonlog.store.terms import StoreError


def waiting(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM search_pending").fetchone()[0]


def test_rows_wait_until_enough_text_waits_and_are_found_all_along(tmp_path, monkeypatch):
    """Under the threshold a batch's texts wait (found by a search all the same); the batch that crosses it indexes
    every waiting row in its own transaction; closing the store indexes what is left."""
    monkeypatch.setattr(search_pending, "CHARS", 120)
    path = tmp_path / "w.db"
    store = open_store(path)
    store.write_batch(session("s1", 1, ["the checkout timed out at the gateway"]))
    assert waiting(path) == 2  # the user's text and the reply "ok"
    assert found(store, "eckout timed") == [("s1", 0)]
    store.write_batch(session("s2", 2, ["retry in five seconds, then give up on the gateway" * 2]))
    assert waiting(path) == 0  # 38 + 2 + 100 + 2 characters: over 120, all indexed together
    assert found(store, "gateway") == [("s2", 0), ("s1", 0)]
    store.write_batch(session("s3", 3, ["a gateway that waits"]))
    assert waiting(path) == 1  # "ok" is the same content as before: only the new text waits
    assert found(store, "gateway") == [("s3", 0), ("s2", 0), ("s1", 0)]
    store.close()
    assert waiting(path) == 0
    sound(path)
    reopened = open_store(path, read_only=True)
    assert found(reopened, "gateway") == [("s3", 0), ("s2", 0), ("s1", 0)]
    reopened.close()


def test_a_prune_of_waiting_and_indexed_rows_leaves_the_index_sound(tmp_path, monkeypatch):
    monkeypatch.setattr(search_pending, "CHARS", 60)
    path = tmp_path / "p.db"
    store = open_store(path)
    store.write_batch([*session("old", 1, ["the old checkout timed out, long enough to be indexed now"]),
                       *session("mid", 2, ["a middle checkout"])])
    store.write_batch(session("new", 3, ["a new checkout"]))  # waits
    store.write_batch(session("late", 4, ["a late checkout"]))  # waits
    assert waiting(path) == 2
    assert store.prune(PruneCriteria(before="2025-07-01T10:04:00Z", include_open=True))["sessions"] == 3
    assert waiting(path) == 1
    assert found(store, "checkout") == [("late", 0)]
    store.write_batch(session("after", 5, ["after the prune, a checkout again and long text"]))
    assert found(store, "checkout") == [("after", 0), ("late", 0)]
    store.close()
    sound(path)


def test_two_writers_on_one_file_index_each_text_once_and_find_everything(tmp_path, monkeypatch):
    """A writer's memory of waiting texts is dropped once another connection has written (it may have indexed them,
    or a prune may have given an id to another text): what waits is then read back from what is stored."""
    monkeypatch.setattr(search_pending, "CHARS", 90)
    path = tmp_path / "two.db"
    first, second = open_store(path), open_store(path)
    first.write_batch(session("a1", 1, ["first writer's text about the gateway"]))
    second.write_batch(session("b1", 2, ["second writer's gateway text, long enough to index all" * 2]))
    assert waiting(path) == 0  # the second indexed the first's waiting text, read back
    first.write_batch(session("a2", 3, ["the first writes again"]))
    assert waiting(path) == 1
    assert first.prune(PruneCriteria(before="2025-07-01T10:02:00Z", include_open=True))["sessions"] == 1
    second.write_batch(session("b2", 4, ["another gateway"]))
    for store in (first, second):
        assert found(store, "gateway") == [("b2", 0), ("b1", 0)]
        assert found(store, "writes again") == [("a2", 0)]
    first.close()
    second.close()
    assert waiting(path) == 0
    sound(path)


_TRIGRAMS = "USING fts5(text, content='', detail=none, columnsize=0, tokenize='trigram case_sensitive 1')"
_BACK_TO_25 = ["DROP TABLE search_blocks", "DELETE FROM _reasonlog_migrations WHERE number = 26",
               *(f"CREATE VIRTUAL TABLE {t} {_TRIGRAMS}" for t in ("contents_search", "tool_results_search",
                                                                   "outcomes_search", "reasoning_records_search"))]
_BACK_TO_24 = [*_BACK_TO_25, "DROP TABLE search_pending", "DELETE FROM _reasonlog_migrations WHERE number = 25"]


@pytest.mark.parametrize("back", [_BACK_TO_25, _BACK_TO_24], ids=["schema 25", "schema 24"])
def test_a_file_from_before_schema_26_is_upgraded_and_searches_the_same(tmp_path, back):
    """Migration 26 drops the trigram tables of older files (empty here: it never reads them) and writes the blocks
    from what is stored: the same answers, and each record's text in a block."""
    path = tmp_path / "old.db"
    store = open_store(path)
    store.write_batch([*session("s1", 1, ["the checkout timed\nout at the gateway", "Ünïcode ÄRGER 日本語"]),
                       *session("s2", 2, ["out the door the checkout timed"])])
    queries = ["checkout timed", "med\nout", "äRGer", "本語", '"door" OR gateway', "timed -door", "ok", "ü", "c"]
    before = {q: found(store, q) for q in queries}
    store.close()
    db = sqlite3.connect(path, isolation_level=None)
    for statement in back:
        db.execute(statement)
    db.close()
    with pytest.raises(StoreError, match="schema 2[45] is older"):
        open_store(path, read_only=True)
    upgraded = open_store(path)
    assert upgraded.schema_version() == 26
    assert {q: found(upgraded, q) for q in queries} == before
    assert before["checkout timed"] == [("s2", 0), ("s1", 0)]
    assert before["c"] == [("s2", 0), ("s1", 0), ("s1", 1)]  # one character: every block read, as for any query
    upgraded.close()
    sound(path)
    assert sorted(block_texts(path).values()) == sorted([
        "the checkout timed\nout at the gateway", "ünïcode ärger 日本語\n日本\ue000本語\ue000", "ok",
        "out the door the checkout timed"])


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """One SQLite store, written the batches of the property below, with a threshold low enough that some batches
    index what waits and some leave their texts waiting."""
    path = tmp_path_factory.mktemp("pending") / "p.db"
    store = open_store(path)
    yield store, path, []
    store.close()
    sound(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.lists(texts, min_size=1, max_size=4), min_size=1, max_size=3),
       threshold=st.integers(1, 200), data=st.data())
def test_search_finds_what_a_scan_finds_whether_texts_wait_or_are_indexed(lite, monkeypatch, batch, threshold, data):
    store, path, written = lite
    monkeypatch.setattr(search_pending, "CHARS", threshold)
    first = len(written)
    events = []
    for k, said in enumerate(batch):
        sid = f"s{first + k:04d}"
        events += session(sid, first + k, said)
        written.append((sid, said))
    store.write_batch(events)
    query, parsed = drawn_query(data, [t for _, said in written[first:] for t in said])
    assert sorted(found(store, query)) == scanned(written, parsed)


def ranked(store, text: str) -> list[tuple[str, int, str, float]]:
    return [(h["session_id"], h["message_idx"], h["kind"], h["score"])
            for h in store.keyword_search(text, SessionFilter(limit=None), limit=5)]


def test_keyword_ranking_is_the_same_whether_texts_wait_or_are_indexed(tmp_path, monkeypatch):
    """Keyword ranking reads a few hundred candidates at most; a waiting text is a candidate for a word only where the
    index would find it, so texts waiting ahead of the indexed ones do not crowd the ranking (they did: every waiting
    row was a candidate for every word, with the highest bound, and was read first)."""
    monkeypatch.setattr(keywords, "VERIFIED", 4)  # a small budget, as the waiting rows would have used it up
    monkeypatch.setattr(keywords, "VERIFIED_PER_HIT", 1)
    indexed_first = [f"the migration of table {k} failed" for k in range(3)] + ["the gateway migration timed out"]
    waiting_later = [f"unrelated note number {k}" for k in range(6)] + ["gateway gateway and the migration"]
    rankings = []
    for name, threshold in (("waits", 10 ** 9), ("indexed", 1)):
        monkeypatch.setattr(search_pending, "CHARS", 10 ** 9)
        store = open_store(tmp_path / f"{name}.db")
        store.write_batch(session("s1", 1, indexed_first))
        store.close()  # indexed
        store = open_store(tmp_path / f"{name}.db")
        monkeypatch.setattr(search_pending, "CHARS", threshold)
        store.write_batch(session("s2", 2, waiting_later))
        assert waiting(tmp_path / f"{name}.db") == (7 if name == "waits" else 0)
        rankings.append(ranked(store, "gateway migration"))
        store.close()
    assert rankings[0] == rankings[1]
    assert [(sid, idx) for sid, idx, _, _ in rankings[0][:2]] == [("s2", 6), ("s1", 3)]


def test_a_prune_rewrites_the_blocks_that_held_its_text_and_packs_what_is_left(tmp_path, monkeypatch):
    """Each batch its own block (a threshold of one character), then a prune of most sessions: the blocks left small
    are packed into one, which holds exactly the texts of the sessions kept, and search finds the same."""
    monkeypatch.setattr(search_pending, "CHARS", 1)
    path = tmp_path / "c.db"
    store = open_store(path)
    for k in range(12):
        store.write_batch(session(f"s{k:02d}", k, [f"entry {k} of the ledger"]))
    held = block_texts(path)
    assert sorted(held.values()) == sorted([f"entry {k} of the ledger" for k in range(12)] + ["ok"])
    monkeypatch.setattr(search_pending, "CHARS", 500_000)
    assert store.prune(PruneCriteria(before="2025-07-01T10:09:00Z", include_open=True))["sessions"] == 9
    assert found(store, "of the ledger") == [("s11", 0), ("s10", 0), ("s09", 0)]
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM search_blocks").fetchone() == (1,)
    assert sorted(block_texts(path).values()) == ["entry 10 of the ledger", "entry 11 of the ledger",
                                                  "entry 9 of the ledger", "ok"]
    sound(path)


def test_a_text_holding_nul_or_any_character_is_found_and_never_across_two_texts(tmp_path):
    """A block ends each text with a NUL, but its offsets decide where a text ends: a text holding NUL is found by
    it, and a query that would run from one text into the next finds neither."""
    path = tmp_path / "n.db"
    store = open_store(path)
    store.write_batch(session("s1", 1, ["left\x00right", "tail end", "head start 𝄞 ÿ"]))
    store.close()
    store = open_store(path)
    assert found(store, "t\x00r") == [("s1", 0)]
    assert found(store, "end\x00head") == found(store, "endhead") == []
    assert found(store, "𝄞 ÿ") == [("s1", 2)]
    store.close()
