"""Vector search without reading every vector: a prefilter on sign codes held in memory, then an exact rescore.

Each stored vector has a code beside it (`unit_vectors.code`, vectors.sign_code: its 384 sign bits, 48 bytes). A
searching process (the server across requests, a CLI command once) keeps, per model and dimension, a `VectorIndex`:
the text ids and the codes of that model's vectors, as numpy arrays (the codes one uint64 row per 64 bits, so that
each word of every code is one contiguous array). A search

1. catches up: reads the rows added since it last looked (`unit_vectors.id` only grows and is never reused), and,
   every `RECOUNT_S` seconds, counts the model's vectors: a count that differs from the index's (vectors deleted, or
   on PostgreSQL a transaction that committed an id below one already read) reloads it all;
2. ranks every code by its Hamming distance to the query's sign bits and takes the nearest `candidates(limit)`;
3. keeps those with a unit in a session the filter selects, widening the candidates until as many pass; when fewer
   than 1 in `NARROW` pass, it lists the texts the filter selects instead and ranks only their codes;
4. reads those candidates' float vectors by id and ranks them by exact cosine similarity; the answer is always in
   exact cosine order, ties by text id. A candidate whose vector is gone (its session deleted) leaves the index.

A text found by the exact scan can be missed only when its code is not among the nearest candidates: the recall
measured on real embeddings is in docs/search.md. Memory: 8 bytes of text id and dim / 8 of code per vector, plus
11 bytes of scratch: 67 bytes a vector at 384 dimensions, 34 MB at 500,000.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from .terms import SessionFilter
from .vectors import sessions_sql, sign_code

if TYPE_CHECKING:
    import numpy as np

CANDIDATES = 400  # codes rescored at least
PER_HIT = 4  # ... and this many for each text asked for (more costs rescoring time: 1,200 took 20 ms, 400 2 ms)
WIDEST = 50_000  # a filter that needs more candidates than this to pass enough of them: the exact scan instead
NARROW = 4  # fewer than 1 in this many of the nearest candidates in the filter: rank only the texts it selects
RECOUNT_S = 30.0  # how often the index counts the stored vectors to see deletions and late commits
FETCH = 500  # ids an SQL statement names at most


def candidates(limit: int) -> int:
    """How many codes nearest the query are rescored for the `limit` best texts."""
    return max(CANDIDATES, PER_HIT * limit)


class VectorIndex:
    """The text ids and sign codes of one model's vectors of one dimension, caught up by `refresh`."""

    def __init__(self, model: str, dim: int):
        import numpy as np

        self.model, self.dim = model, dim
        self.words = (dim + 63) // 64
        self.size = 0
        self.last_id = 0  # the highest unit_vectors.id read
        self.counted = -math.inf  # time.monotonic() of the last count
        self.text_ids = np.empty(0, dtype=np.int64)
        self.codes = np.empty((self.words, 0), dtype=np.uint64)
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------ catching up

    def refresh(self, cur) -> None:
        """Read the vectors of the model stored since the last refresh; reload all when some went away."""
        top = cur.execute("SELECT MAX(id) FROM unit_vectors").fetchone()[0] or 0
        if top < self.last_id:
            self.clear()  # another database than the one read (a restored backup)
        self._read_since(cur)
        if time.monotonic() - self.counted >= RECOUNT_S:
            self.counted = time.monotonic()
            n = cur.execute("SELECT COUNT(*) FROM unit_vectors WHERE model = ? AND dim = ?",
                            (self.model, self.dim)).fetchone()[0]
            if n != self.size:
                self.clear()
                self._read_since(cur)

    def clear(self) -> None:
        import numpy as np

        self.size = self.last_id = 0
        self.text_ids = np.empty(0, dtype=np.int64)
        self.codes = np.empty((self.words, 0), dtype=np.uint64)
        self._scratch = None

    def _read_since(self, cur) -> None:
        import numpy as np

        rows = cur.execute("SELECT id, text_id, code FROM unit_vectors WHERE model = ? AND dim = ? AND id > ?"
                           " ORDER BY id", (self.model, self.dim, self.last_id)).fetchall()
        if not rows:
            return
        width = self.words * 8
        codes = b"".join(bytes(code) for _, _, code in rows)
        if len(codes) != width * len(rows):
            raise ValueError(f"a code of unit_vectors is not {width} bytes")
        self.append(np.fromiter((tid for _, tid, _ in rows), dtype=np.int64, count=len(rows)),
                    np.frombuffer(codes, dtype="<u8").reshape(len(rows), self.words))
        self.last_id = rows[-1][0]

    def append(self, text_ids: np.ndarray, codes: np.ndarray) -> None:
        """Add codes ([n, words] uint64) of these texts, growing the arrays by half again when full."""
        import numpy as np

        n = len(text_ids)
        if self.size + n > len(self.text_ids):
            room = max(self.size + n, len(self.text_ids) * 3 // 2, 1024)
            ids = np.empty(room, dtype=np.int64)
            ids[:self.size] = self.text_ids[:self.size]
            grown = np.empty((self.words, room), dtype=np.uint64)
            grown[:, :self.size] = self.codes[:, :self.size]
            self.text_ids, self.codes, self._scratch = ids, grown, None
        self.text_ids[self.size:self.size + n] = text_ids
        self.codes[:, self.size:self.size + n] = codes.T
        self.size += n

    def drop(self, text_ids: set[int]) -> None:
        """Forget the codes of these texts (their vectors are gone)."""
        import numpy as np

        keep = ~np.isin(self.text_ids[:self.size], np.fromiter(text_ids, dtype=np.int64, count=len(text_ids)))
        kept = int(keep.sum())
        self.text_ids[:kept] = self.text_ids[:self.size][keep]
        self.codes[:, :kept] = self.codes[:, :self.size][:, keep]
        self.size = kept

    # ------------------------------------------------------------ ranking

    def distances(self, query: bytes) -> np.ndarray:
        """The Hamming distance of every code to the query's sign bits (uint16, one per vector; a view)."""
        import numpy as np

        q = np.frombuffer(sign_code(query), dtype="<u8")
        if self._scratch is None or len(self._scratch[0]) != len(self.text_ids):
            room = len(self.text_ids)
            self._scratch = (np.empty(room, np.uint64), np.empty(room, np.uint8), np.empty(room, np.uint16))
        words, counts, total = (a[:self.size] for a in self._scratch)
        total[:] = 0
        for w in range(self.words):
            np.bitwise_xor(self.codes[w, :self.size], q[w], out=words)
            np.bitwise_count(words, out=counts)
            np.add(total, counts, out=total)
        return total

    def nearest(self, query: bytes, k: int) -> np.ndarray:
        """Positions of the `k` codes nearest the query (all of them when there are no more), in no order."""
        import numpy as np

        if k >= self.size:
            return np.arange(self.size)
        return nearest_of(self.distances(query), k)

    def rank(self, cur, query: bytes, flt: SessionFilter, limit: int) -> list[tuple[int | str, float]] | None:
        """The `limit` texts nearest `query` among the candidates whose units are in sessions `flt` selects:
        (text id, cosine similarity), best first; None when the filter passes too few (scan exactly instead)."""
        for _ in range(3):
            passed = self._passing(cur, query, flt, candidates(limit))
            if passed is None:
                return None
            ranked, gone = rescore(cur, self.model, query, passed, limit)
            if not gone:
                return ranked
            self.drop(gone)  # deleted since the index read them: look again without them
        return ranked

    def _passing(self, cur, query: bytes, flt: SessionFilter, want: int) -> list[int] | None:
        """About `want` text ids nearest by code whose units are in sessions `flt` selects: the nearest candidates
        checked against the filter, widened while at least 1 in `NARROW` passes; a narrower filter instead lists the
        texts it selects and ranks only their codes. None: more than WIDEST candidates would be needed."""
        import numpy as np

        where, args = sessions_sql(flt)
        if where == "1=1":
            return [int(t) for t in self.text_ids[self.nearest(query, want)]]
        seen = np.zeros(self.size, dtype=bool)
        passed: list[int] = []
        k = want
        dist = self.distances(query).copy()
        while True:
            top = np.arange(self.size) if k >= self.size else nearest_of(dist, k)
            fresh = top[~seen[top]]
            seen[fresh] = True
            passed += passing(cur, [int(t) for t in self.text_ids[fresh]], where, args)
            if len(passed) >= want or k >= self.size:
                return passed
            if len(passed) * NARROW < k:
                return self._selected(cur, dist, where, args, want)
            k = min(self.size, max(2 * k, math.ceil(k * want / max(len(passed), 1) * 1.25)))
            if k > WIDEST:
                return None

    def _selected(self, cur, dist: np.ndarray, where: str, args: list, want: int) -> list[int]:
        """The `want` texts nearest by code (`dist`) among all those with a unit in a session `where` selects."""
        import numpy as np

        chosen = np.fromiter((tid for (tid,) in cur.execute(
            f"SELECT DISTINCT u.text_id FROM search_units u JOIN sessions s ON s.id = u.session_id WHERE {where}",
            args).fetchall()), dtype=np.int64)
        at = np.flatnonzero(np.isin(self.text_ids[:self.size], chosen))
        if len(at) > want:
            at = at[nearest_of(dist[at], want)]
        return [int(t) for t in self.text_ids[at]]


def nearest_of(dist: np.ndarray, k: int) -> np.ndarray:
    """Positions of `k` of the smallest distances (0 < k < len(dist)), in position order: those below the k-th
    smallest distance and the first ones at it. Distances are small integers (at most the dimension), so counting
    them finds the k-th in two passes, where a partition took five times as long at 500,000 vectors."""
    import numpy as np

    cumulative = np.cumsum(np.bincount(dist))
    kth = int(np.searchsorted(cumulative, k))  # the smallest distance with k at or below it
    below = np.flatnonzero(dist < kth)
    return np.concatenate([below, np.flatnonzero(dist == kth)[:k - len(below)]])


def passing(cur, text_ids: list[int], where: str, args: list) -> list[int]:
    """Those of `text_ids` with a unit in a session `where` (a condition on sessions `s`) selects."""
    out: list[int] = []
    for start in range(0, len(text_ids), FETCH):
        chunk = text_ids[start:start + FETCH]
        out += [tid for (tid,) in cur.execute(
            f"SELECT DISTINCT u.text_id FROM search_units u JOIN sessions s ON s.id = u.session_id"
            f" WHERE u.text_id IN ({', '.join('?' * len(chunk))}) AND {where}", [*chunk, *args]).fetchall()]
    return out


def rescore(cur, model: str, query: bytes, text_ids: list[int], limit: int
            ) -> tuple[list[tuple[int | str, float]], set[int]]:
    """The `limit` of `text_ids` whose vectors of `model` are nearest `query` by exact cosine similarity, best
    first, ties by text id; and the ids whose vector is gone."""
    found: list[int] = []
    blobs: list[bytes] = []
    unique = list(dict.fromkeys(text_ids))
    for start in range(0, len(unique), FETCH):
        chunk = unique[start:start + FETCH]
        for tid, vector in cur.execute(f"SELECT text_id, vector FROM unit_vectors WHERE model = ? AND text_id IN"
                                       f" ({', '.join('?' * len(chunk))})", [model, *chunk]).fetchall():
            if len(vector) == len(query):
                found.append(tid)
                blobs.append(bytes(vector))
    return scored(query, found, blobs, limit), set(unique) - set(found)


def scored(query: bytes, text_ids: list[int], vectors: list[bytes], limit: int) -> list[tuple[int | str, float]]:
    """The `limit` of these texts whose float32 vectors are nearest `query` by exact cosine similarity, best first,
    ties by text id."""
    import numpy as np

    if not text_ids:
        return []
    q = np.frombuffer(query, dtype="<f4")
    scores = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(text_ids), len(q)) @ q
    order = sorted(range(len(text_ids)), key=lambda i: (-float(scores[i]), text_ids[i]))[:limit]
    return [(text_ids[i], float(scores[i])) for i in order]
