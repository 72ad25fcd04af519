"""Issue 34: the default hybrid search never ranks a text holding the query as written below texts that merely share
its words, whether or not that text is embedded yet (before, an unembedded exact match came 10th to 12th: it had a
keyword rank only, and every text with both a keyword and a semantic rank scored above it).

Vectors come from a local OpenAI-shaped server (tests/embeddings_server.py: bags of words)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from embeddings_server import EmbeddingsServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.semantic import HttpEmbedder
from reasonlog.semantic.backlog import embed_backlog
from reasonlog.semantic.search import search
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
PHRASE = "rollback of the billing migration"


def record_texts(db, texts: list[str]) -> str:
    """One session, one call a text, each sent as the only user message (a text's message_idx is its index)."""
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        for text in texts:
            s.call(messages=[{"role": "user", "content": text}], response=None)
    rec.close()
    return s.id


def _hybrid(db, texts: list[str], embedded: int, query: str, limit: int) -> list[dict]:
    """Record `texts` (one user message each, in order), embed the first `embedded` of them, search `query`."""
    record_texts(db, texts)
    store = reasonlog.open_store(db)
    try:
        with EmbeddingsServer() as server:
            embedder = HttpEmbedder(server.url, "bow")
            if embedded:
                embed_backlog(store, embedder, limit=embedded)
            return search(store, query, "hybrid", ALL, limit, embedder=embedder)
    finally:
        store.close()


def test_an_exact_phrase_in_a_text_not_embedded_yet_ranks_first(db):
    """Twenty texts share the phrase's words and are embedded; the only text holding the phrase as written came in
    after the embedding pass. `--mode text` finds it first, and so does the default hybrid search."""
    sharing = [f"the billing {w} migration needs a rollback plan, step {n}" for n, w in
               enumerate(["service", "database", "queue", "report", "ledger"] * 4)]
    texts = sharing + [f"we did the {PHRASE} at noon"]
    hits = _hybrid(db, texts, embedded=len(sharing), query=PHRASE, limit=10)
    assert len(hits) == 10
    assert hits[0]["message_idx"] == len(sharing)
    assert PHRASE in hits[0]["snippet"]
    assert all(h["mode"] == "hybrid" for h in hits)


def test_several_exact_phrase_hits_come_before_every_text_that_only_shares_words(db):
    sharing = [f"migration of billing with rollback {n}" for n in range(8)]
    texts = [f"first {PHRASE}", *sharing, f"second {PHRASE} done", "unrelated words about lunch"]
    hits = _hybrid(db, texts, embedded=3, query=PHRASE, limit=6)
    assert {h["message_idx"] for h in hits[:2]} == {0, 9}
    assert all(h["message_idx"] in range(1, 9) for h in hits[2:])


VOCABULARY = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6), min_size=1, max_size=16,
                      unique_by=" ".join),
       phrase=st.lists(st.sampled_from(VOCABULARY), min_size=2, max_size=3, unique=True),
       embedded=st.integers(0, 16), limit=st.integers(1, 8))
def test_an_exact_phrase_hit_always_ranks_above_every_hit_without_the_phrase(texts, phrase, embedded, limit):
    """Generated corpora, the first `embedded` texts embedded (the texts are generated in any order, so that is any
    subset): every hit holding the phrase as written ranks above every hit that does not, and no text holding it is
    left off a page that shows a text without it."""
    query = " ".join(phrase)
    written = [" ".join(words) for words in texts]
    with tempfile.TemporaryDirectory() as folder:
        hits = _hybrid(Path(folder) / "h.db", written, min(embedded, len(written)), query, limit)
    holds = [query in written[h["message_idx"]] for h in hits]
    assert holds == sorted(holds, reverse=True), (query, [written[h["message_idx"]] for h in hits])
    exact = sum(query in t for t in written)
    if not all(holds):
        assert sum(holds) == exact  # a page that shows a text without the phrase shows every text with it
    assert sum(holds) == min(exact, limit)
