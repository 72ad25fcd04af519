"""SQLite's full-text index fed in bulk (schema 25): rows wait in `search_pending` and are indexed together.

FTS5 writes a segment of its index at every commit and merges the segments as they pile up; with the recorder's
batches (about 40 texts a commit on the medium workload) that commit work cost as much as tokenizing the text itself
(benchmarks/bench_fts.py). So the store's writer notes each new row in `search_pending` (kind, id) and keeps its index
text in memory; once `CHARS` characters or `ROWS` rows wait, one transaction indexes every waiting row (what this
object holds in memory; the rest, left by another process or forgotten, read back from what is stored) and empties
the table. `close` indexes what is left. A search takes every waiting row as a candidate beside what the index finds
(`search.Fts5Index.rows`), and the stored text decides: answers never depend on whether a row was indexed yet.

The memory of texts is only a shortcut, never trusted alone: a row counts only while it waits in the table, and the
store drops the memory when another connection has committed since its last write (it may have indexed, deleted or,
after a prune, reused an id) and when a transaction is abandoned.
"""
from __future__ import annotations

from ..parts import searchable_text
from . import reading, search
from .content import Dictionaries
from .terms import StoreError

CHARS = 500_000  # text waiting before it is indexed: a search reads at most about this much beside the index
ROWS = 500
KINDS = search.PENDING_KIND
_INDEX_OF = {kind: index for index, kind in KINDS.items()}
_TABLE_OF = {0: "contents", **{KINDS[index]: table for table, index in search.RECORD_TABLES.items()}}


class PendingFts5Index(search.Fts5Index):
    """The index of a writing `SQLiteStore`: `add` notes rows as waiting and indexes them in bulk."""

    def __init__(self) -> None:
        self.texts: dict[tuple[int, int], str] = {}  # (kind, id) -> the index form of a row this object noted
        self.chars = 0

    def add(self, cur, index: str, rows: list[tuple[int, str]]) -> None:  # type: ignore[override]
        kind = KINDS[index]
        fresh = {(kind, rid): text for rid, text in rows}
        if self.chars + sum(map(len, fresh.values())) >= CHARS or len(self.texts) + len(fresh) >= ROWS:
            self.catch_up(cur, fresh)
            return
        cur.executemany("INSERT OR IGNORE INTO search_pending (kind, id) VALUES (?, ?)", list(fresh))
        self.texts.update(fresh)
        self.chars += sum(map(len, fresh.values()))

    def remove(self, cur, index: str, rows: list[tuple[int, str]]) -> None:  # type: ignore[override]
        kind = KINDS[index]
        for rid, _ in rows:
            self.chars -= len(self.texts.pop((kind, rid), ""))
        search.Fts5Index.remove(cur, index, rows)

    def forget(self) -> None:
        """Drop the memory of texts (what waits is read back when it is indexed)."""
        self.texts.clear()
        self.chars = 0

    def catch_up(self, cur, fresh: dict[tuple[int, int], str] | None = None) -> int:
        """Index every waiting row and `fresh` (rows this transaction made, not noted as waiting); how many."""
        waiting = set(cur.execute("SELECT kind, id FROM search_pending").fetchall())
        todo = {key: text for key, text in self.texts.items() if key in waiting}
        todo.update(fresh or {})
        todo.update(read_back(cur, sorted(waiting - todo.keys())))
        for kind in sorted({k for k, _ in todo}):
            search.Fts5Index.add(cur, _INDEX_OF[kind], sorted((rid, t) for (k, rid), t in todo.items()
                                                              if k == kind and t))
        if waiting:
            cur.execute("DELETE FROM search_pending")
        self.forget()
        return len(todo)


def waiting(cur) -> dict[tuple[int, int], str]:
    """Every row waiting to be indexed, (kind, id) -> its index form read back from what is stored ("" for a content
    gone meanwhile): what keyword search ranks beside the index (store/keywords.py)."""
    return read_back(cur, sorted(cur.execute("SELECT kind, id FROM search_pending").fetchall()))


def read_back(cur, keys: list[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """The index form of these waiting rows ((kind, id)), from what is stored."""
    out: dict[tuple[int, int], str] = {}
    contents = [rid for kind, rid in keys if kind == 0]
    reader = reading.ContentReader(cur.connection.cursor(), Dictionaries())
    for start in range(0, len(contents), 500):
        chunk = contents[start:start + 500]
        reader.load(chunk)
        for cid in chunk:
            try:
                out[(0, cid)] = search.index_form(searchable_text(reader.get(cid)))
            except StoreError:  # gone without leaving the table (never by the store's own deletes): nothing to index
                out[(0, cid)] = ""
        reader.memo.clear()
    for kind, table in _TABLE_OF.items():
        rowids = [rid for k, rid in keys if k == kind]
        if kind and rowids:
            out.update(((kind, rid), text) for rid, text in search.stored_records(cur, table, rowids))
    return out
