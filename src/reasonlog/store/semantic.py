"""The store's part of search by meaning (docs/search.md): cutting sessions into units, the embedding backlog,
vectors, and the rankings over them. `SQLStore` takes these methods; the dialect ranks (`_rank`).

The embedding itself (a model, or an HTTP endpoint) lives in reasonlog.semantic and never holds SQL; it asks here
for the texts to embed and hands their vectors back, one transaction a batch, so a killed worker loses a batch at
most and the next one goes on where it stopped.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..wire.api import SessionJSON, SimilarSessionJSON
from . import reading
from .terms import SessionFilter

if TYPE_CHECKING:
    from . import vector_index

# keywords, units, vectors and vector_index are imported by the methods that use them: a store opened for a text
# search (a CLI search is one process) never needs them, and they were 25 ms of its CPU (docs/performance.md).

CUT_SESSIONS = 25  # sessions a transaction cuts into units
CUT_UNITS = 2000  # ... or fewer, once this many units are added
MEANS = 50  # session means written a transaction


class SemanticStore:
    """Search by meaning and by keywords, for `SQLStore` (which provides `_read`, `_write`, `_dicts`, `index`)."""

    _read: Callable[..., Any]
    _write: Callable[..., Any]
    _dicts: Any
    index: Any
    exact_vectors = False  # True: rank by the exact scan alone, never the index of codes (benchmarks, tests)
    _vector_indexes: dict[tuple[str, int], vector_index.VectorIndex] | None = None
    _records: tuple[float, int] | None = None  # (time.monotonic(), keywords.records) of the last count

    def _rank(self, table: str, model: str, query: bytes, flt: SessionFilter, limit: int,
              exclude: str | None = None) -> list[tuple[Any, float]]:
        raise NotImplementedError

    # ------------------------------------------------------------ writing: units and vectors

    def cut_units(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Cut every session with text not cut yet into units (store/units.py), in transactions of a few sessions;
        `progress(done, total)` after each. Returns how many units were added."""
        from . import units

        stale = self._read(units.stale_sessions)
        added = done = 0
        while done < len(stale):
            n, done = self._write(self._cut, stale, done)
            added += n
            if progress is not None:
                progress(done, len(stale))
        return added

    def _cut(self, cur, stale: list[tuple], first: int) -> tuple[int, int]:
        """Cut sessions of `stale` from `first` on, until a transaction's worth; (units added, next session)."""
        from . import units

        n, at = 0, first
        while at < len(stale) and at - first < CUT_SESSIONS and n < CUT_UNITS:
            self._lock_units(cur, stale[at][0])
            n += units.cut_session(cur, self._dicts, stale[at])
            at += 1
        return n, at

    def _lock_units(self, cur, session_id: str) -> None:
        """Two workers never cut one session at once (SQLite's write transactions take turns already)."""

    def unit_backlog(self, model: str, limit: int, after: int = 0) -> list[tuple[int, str]]:
        """Up to `limit` unit texts (id, text) without a vector of `model`, ids above `after`, oldest first."""
        from . import vectors

        return self._read(vectors.backlog, model, limit, after)

    def save_vectors(self, model: str, rows: list[tuple[int, bytes]]) -> int:
        """Store a batch of vectors (text id, float32 bytes, L2-normalised) of `model` in one transaction."""
        from . import vectors

        return self._write(vectors.save, model, rows)

    def fill_vector_index(self, stop: threading.Event | None = None) -> int:
        """Give the vectors stored before the database could index them their indexed form (PostgreSQL with
        pgvector: store/pg_vectors.py; nothing elsewhere); how many."""
        return 0

    def refresh_session_vectors(self, model: str) -> int:
        """Recompute the sessions' mean vectors of `model` that units were embedded for since; how many. Read in
        read transactions, written a few sessions a transaction: a writer waits for a moment at most."""
        from . import vectors

        stale = self._read(vectors.stale_means, model)
        for start in range(0, len(stale), MEANS):
            rows = self._read(vectors.means, model, stale[start:start + MEANS])
            self._write(vectors.save_means, model, rows)
        return len(stale)

    # ------------------------------------------------------------ reading

    def semantic_counts(self, model: str | None = None, sessions: bool = False) -> dict[str, int]:
        """Units, distinct texts, texts embedded by `model` and the backlog (texts without one); with `sessions`,
        also `sessions_to_cut`: sessions with text not cut into units yet (that reads every session's marks)."""
        from . import units, vectors

        def read(cur) -> dict[str, int]:
            found = vectors.counts(cur, model)
            return {**found, "sessions_to_cut": len(units.stale_sessions(cur))} if sessions else found
        return self._read(read)

    def has_vectors(self, model: str) -> bool:
        """Whether any text has a vector of `model` (one indexed row read: what a search asks before each query)."""
        return self._read(lambda cur: cur.execute("SELECT 1 FROM unit_vectors WHERE model = ? LIMIT 1",
                                                  (model,)).fetchone() is not None)

    def keyword_search(self, text: str, flt: SessionFilter, limit: int = 50) -> list[dict]:
        """Messages, tool results and outcomes ranked by the query's words they hold (store/keywords.py)."""
        return self._read(self._keyword_search, text, flt, limit)

    def _keyword_search(self, cur, text: str, flt: SessionFilter, limit: int) -> list[dict]:
        from . import keywords

        now = time.monotonic()
        if self._records is None or now - self._records[0] >= keywords.RECOUNT_S:
            self._records = (now, keywords.records(cur))  # the idf's N, counted again every RECOUNT_S seconds
        return keywords.keyword_search(cur, self._dicts, text, flt, limit, self.index, self._records[1])

    def vector_search(self, query: bytes, model: str, flt: SessionFilter, limit: int = 50) -> list[dict]:
        """The units nearest `query` (float32, L2-normalised) among the vectors of `model`, one hit per message,
        tool result or summary, best first, each with its cosine `score`."""
        from . import units

        where, args = reading.filter_sql(replace(flt, limit=None, text=None, after=None))
        depth = max(2 * limit, 20)
        while True:
            ranked = self._rank_units(model, query, flt, depth)
            hits = self._read(units.unit_hits, ranked, where, args)
            if len(hits) >= limit or len(ranked) < depth:
                return hits[:limit]
            depth *= 4  # the texts ranked were shared by units of the same messages: look deeper

    def _rank_units(self, model: str, query: bytes, flt: SessionFilter, limit: int) -> list[tuple[Any, float]]:
        """The `limit` texts nearest `query`: by the codes in memory and an exact rescore (store/vector_index.py),
        or by the exact scan when asked to, or when the filter leaves too few candidates."""
        if not self.exact_vectors:
            ranked = self._rank_by_index(model, query, flt, limit)
            if ranked is not None:
                return ranked
        return self._rank("unit_vectors", model, query, flt, limit)

    def _rank_by_index(self, model: str, query: bytes, flt: SessionFilter, limit: int
                       ) -> list[tuple[Any, float]] | None:
        """The `limit` texts nearest `query` by an index (here the codes in memory; pgvector's on PostgreSQL where the
        server has it: store/pg_vectors.py); None when the filter leaves too few candidates."""
        return self._read(self._rank_by_codes, model, query, flt, limit)

    def vector_ranking(self, model: str, dim: int) -> str:
        """What ranks `model`'s vectors of `dim` before the exact rescore: "codes" (in this process's memory) or
        "pgvector" (PostgreSQL's HNSW index, store/pg_vectors.py)."""
        return "codes"

    def _rank_by_codes(self, cur, model: str, query: bytes, flt: SessionFilter, limit: int
                       ) -> list[tuple[Any, float]] | None:
        index = self._vector_index(model, len(query) // 4)
        index.refresh(cur)
        return index.rank(cur, query, flt, limit)

    def _vector_index(self, model: str, dim: int) -> vector_index.VectorIndex:
        from . import vector_index

        if self._vector_indexes is None:
            self._vector_indexes = {}
        index = self._vector_indexes.get((model, dim))
        if index is None:
            index = self._vector_indexes[(model, dim)] = vector_index.VectorIndex(model, dim)
        return index

    def warm_vectors(self, model: str, dim: int) -> None:
        """Read the codes of `model`'s vectors of `dim` into memory now if this process never has, as its first
        vector search would (0.74 s at 500,000 units): a CLI search does it while the model loads to embed the query.
        Once read, each search catches up itself."""
        if not self.exact_vectors and (model, dim) not in (self._vector_indexes or {}):
            self._read(lambda cur: self._vector_index(model, dim).refresh(cur))

    def similar_sessions(self, session_id: str, model: str, limit: int = 10) -> list[SimilarSessionJSON]:
        """The sessions whose mean unit vector is nearest this session's, best first, as `list_sessions` rows with a
        `score`; empty when this session has no vector of `model` yet."""
        from . import vectors

        query = self._read(vectors.session_vector, model, session_id)
        if query is None:
            return []
        ranked = self._rank("session_vectors", model, query, SessionFilter(limit=None), limit, exclude=session_id)
        if not ranked:
            return []
        found = self._read(reading.list_sessions, SessionFilter(limit=None), [sid for sid, _ in ranked])
        rows: dict[str, SessionJSON] = {r["id"]: r for r in found}
        return [SimilarSessionJSON(**rows[sid], score=round(score, 6)) for sid, score in ranked if sid in rows]
