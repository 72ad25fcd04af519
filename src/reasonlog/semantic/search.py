"""Search in four modes, one function for the CLI, the API and the dashboard (docs/search.md).

- `text`: the exact substring search of store/search.py (what `reasonlog search` always did), in timeline order.
- `keywords`: records ranked by the query's words they hold, rarer words weighing more (store/keywords.py).
- `semantic`: units ranked by the cosine similarity of their vectors to the query's (store/vectors.py).
- `hybrid`: reciprocal rank fusion (k = 60) of the keyword and the semantic rankings.

Every hit has the fields of a text hit plus `score` (None in text mode) and `mode`. Without the extra, or before
anything is embedded, the default mode is `text`; asking for `semantic` or `hybrid` then is an error that says
what to install or run.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..store import SearchByMeaning, SearchStore, SessionFilter, StoreError, StoreReader
from ..store.search import Query
from ..wire.api import SearchHitJSON, SearchMode, SimilarSessionJSON
from .embedders import EXTRA, Embedder, SemanticUnavailable, choose_embedder, missing_packages

_MODE: dict[str, SearchMode] = {"text": "text", "keywords": "keywords", "semantic": "semantic", "hybrid": "hybrid"}
MODES = tuple(_MODE)
RRF_K = 60


def search(store: SearchStore, text: str, mode: str, flt: SessionFilter, limit: int | None,
           embedder: Embedder | None = None) -> list[SearchHitJSON]:
    """The hits for `text` in `mode`, at most `limit` (None: every text hit; the ranked modes need a limit)."""
    chosen = mode_of(mode)
    flt = replace(flt, limit=None, text=None)
    if chosen == "text":
        return [hit_of(h, None, chosen) for h in store.search(text, flt, limit)]
    shown = 50 if limit is None else limit
    if mode == "keywords":
        hits = store.keyword_search(text, flt, shown)
    else:
        from concurrent.futures import ThreadPoolExecutor  # here: a text search never loads it

        embedder = embedder or ready_embedder(store)
        with ThreadPoolExecutor(1, thread_name_prefix="reasonlog-embed") as pool:
            query = pool.submit(_embedded, embedder, text)  # the model runs outside the GIL meanwhile
            keyword = store.keyword_search(text, flt, depth_of(shown)) if mode == "hybrid" else []
            if embedder.dim:
                store.warm_vectors(embedder.model, embedder.dim)  # a process's first search reads the codes
            semantic = _semantic(store, embedder, query.result(), flt, shown if mode == "semantic" else
                                 depth_of(shown))
        hits = semantic if mode == "semantic" else phrase_first(fuse([keyword, semantic]), _phrase_hits(
            store, text, flt, depth_of(shown)), shown)
    return [hit_of(h, h["score"], chosen) for h in hits]


def mode_of(mode: str) -> SearchMode:
    """The search mode named `mode`; SemanticUnavailable for a name that is none."""
    if mode not in _MODE:
        raise SemanticUnavailable(f"{mode!r} is not a search mode; expected one of {', '.join(MODES)}")
    return _MODE[mode]


def hit_of(h: Mapping[str, Any], score: float | None, mode: SearchMode) -> SearchHitJSON:
    """A hit as every reader gets it, from a ranking's (store/search.py, keywords.py, units.py)."""
    return SearchHitJSON(kind=h["kind"], session_id=h["session_id"], message_idx=h["message_idx"], role=h["role"],
                         call_id=h["call_id"], at=h["at"], tool_use_id=h["tool_use_id"], name=h["name"],
                         snippet=h["snippet"], score=score, mode=mode)


def depth_of(limit: int) -> int:
    """How deep each ranking is read for a fused page of `limit` hits."""
    return max(3 * limit, 60)


def _embedded(embedder: Embedder, text: str) -> bytes | None:
    """The query's vector; None for a blank query."""
    return embedder.embed_query(text) if text.strip() else None


def _semantic(store: SearchByMeaning, embedder: Embedder, query: bytes | None, flt: SessionFilter, limit: int
              ) -> list[dict]:
    return [] if query is None else store.vector_search(query, embedder.model, flt, limit)


def _phrase_hits(store: StoreReader, text: str, flt: SessionFilter, depth: int) -> list[dict]:
    """The first `depth` hits holding `text` as written (the text mode's answer, newest first) when `text` is a phrase
    of two words or more without operators; else none (a one-word query's keyword hits all hold it)."""
    if len(text.split()) < 2:
        return []
    try:
        if Query.parse(text).groups != ((text.lower().strip(),),):
            return []  # quotes, OR, -excluded: the text mode's syntax, not a phrase
        return store.search(text, flt, depth)
    except StoreError:
        return []


def phrase_first(fused: list[dict], phrase: list[dict], limit: int) -> list[dict]:
    """The first `limit` of the fused ranking with every hit in `phrase` (those holding the query as written) moved
    before every hit that is not, in fused order, then the phrase hits the fusion did not find, in their own order
    (score 0.0). A text not embedded yet has a keyword rank only, and without this it fell below every text holding
    the query's words that is embedded. When `phrase` is as long as the depth read (more may exist), the page is
    made of phrase hits only, so no hit without the phrase ever comes before one with it."""
    exact = {hit_key(h) for h in phrase}
    found = [h for h in fused if hit_key(h) in exact]
    known = {hit_key(h) for h in found}
    found += [{**h, "score": 0.0} for h in phrase if hit_key(h) not in known]
    return (found + [h for h in fused if hit_key(h) not in exact])[:limit]


def fuse(rankings: list[list[dict]], k: int = RRF_K) -> list[dict]:
    """Reciprocal rank fusion: each hit scores the sum over the rankings that hold it of 1 / (k + its rank), ranks
    counted from 1. Equal scores keep the order of their best rank, then of the first ranking. A hit found by
    several rankings is shown as the first ranking has it (the keyword ranking's snippet holds a word asked)."""
    scores: dict[tuple, float] = {}
    best: dict[tuple, tuple[int, int]] = {}
    shown: dict[tuple, dict] = {}
    for which, ranking in enumerate(rankings):
        seen: set[tuple] = set()
        for rank, hit in enumerate(ranking, start=1):
            key = hit_key(hit)
            if key in seen:
                continue  # a ranking counts each hit once, at its best rank
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            best[key] = min(best.get(key, (rank, which)), (rank, which))
            shown.setdefault(key, hit)
    order = sorted(scores, key=lambda key: (-scores[key], best[key]))
    return [{**shown[key], "score": round(scores[key], 6)} for key in order]


def hit_key(hit: dict) -> tuple:
    """What makes two hits the same place: the session, the position, the kind of record and its tool call."""
    return (hit["session_id"], hit["message_idx"], hit["kind"], hit.get("tool_use_id"))


def embedder_for(store: SearchByMeaning) -> Embedder:
    """The embedder the environment names, once the packages it and `store` need are there; else
    SemanticUnavailable saying what to install."""
    embedder = choose_embedder()
    missing = missing_packages(local=not hasattr(embedder, "url"), sqlite=_is_sqlite(store))
    if missing:
        raise SemanticUnavailable(f"search by meaning needs {', '.join(missing)}: {EXTRA}")
    return embedder


def ready_embedder(store: SearchByMeaning) -> Embedder:
    """The embedder for searching `store` by meaning; SemanticUnavailable saying what to install or run when
    this cannot be done."""
    embedder = embedder_for(store)
    if not store.has_vectors(embedder.model):
        raise SemanticUnavailable(f"nothing is embedded for search by meaning with {embedder.model} yet: run"
                                  " `reasonlog embed` (or `reasonlog serve`, which embeds in the background)")
    return embedder


def default_mode(store: SearchByMeaning) -> str:
    """`hybrid` when search by meaning can be done here and something is embedded, else `text`."""
    try:
        ready_embedder(store)
    except SemanticUnavailable:
        return "text"
    return "hybrid"


def _is_sqlite(store: SearchByMeaning) -> bool:
    return store.url.startswith("sqlite")


def similar_sessions(store: SearchByMeaning, session_id: str, limit: int = 10
                     ) -> tuple[str | None, list[SimilarSessionJSON]]:
    """The sessions nearest this one by the mean of their unit vectors, with the model compared; (None, []) when
    search by meaning is not available here. Nothing is embedded to answer (the vectors are stored)."""
    try:
        embedder = embedder_for(store)
    except SemanticUnavailable:
        return None, []
    return embedder.model, store.similar_sessions(session_id, embedder.model, limit)
