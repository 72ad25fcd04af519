"""SQLite's searchable text written in bulk (schema 25): rows wait in `search_pending` and go to a block together.

Each block of text (store/text_blocks.py) is compressed once, so the store's writer does not write one a batch: it
notes each new row in `search_pending` (kind, id) and keeps its text in memory; once `CHARS` characters or `ROWS` rows
wait, one transaction writes every waiting row (what this object holds in memory; the rest, left by another process or
forgotten, read back from what is stored) to a block of each kind and empties the table. `close` writes what is left.
A search takes every waiting row as a candidate beside what the blocks give (`text_blocks.Blocks.rows`), and the stored
text decides: answers never depend on whether a row was written to a block yet. (Until schema 26 the rows waited for
FTS5's trigram index, whose work at each commit cost as much as tokenizing the text itself.)

The memory of texts is only a shortcut, never trusted alone: a row counts only while it waits in the table, and the
store drops the memory when another connection has committed since its last write (it may have written, deleted or,
after a prune, reused an id) and when a transaction is abandoned.
"""
from __future__ import annotations

from ..parts import searchable_text
from . import reading, search, text_blocks
from .content import Dictionaries
from .terms import StoreError

CHARS = 500_000  # text waiting before it goes to a block (about a block's size): a search reads this much beside them
ROWS = 500
KINDS = text_blocks.KINDS
_TABLE_OF = {0: "contents", **{KINDS[index]: table for table, index in search.RECORD_TABLES.items()}}


class PendingBlocks(text_blocks.Blocks):
    """The index of a writing `SQLiteStore`: `add` notes rows as waiting and writes them to blocks in bulk."""

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

    def remove(self, cur, index: str, ids: list[int]) -> None:  # type: ignore[override]
        kind = KINDS[index]
        for rid in ids:
            self.chars -= len(self.texts.pop((kind, rid), ""))
        text_blocks.Blocks.remove(cur, index, ids)

    def forget(self) -> None:
        """Drop the memory of texts (what waits is read back when it is indexed)."""
        self.texts.clear()
        self.chars = 0

    def catch_up(self, cur, fresh: dict[tuple[int, int], str] | None = None) -> int:
        """Write every waiting row and `fresh` (rows this transaction made, not noted as waiting) to blocks; how
        many."""
        waiting = set(cur.execute("SELECT kind, id FROM search_pending").fetchall())
        todo = {key: text for key, text in self.texts.items() if key in waiting}
        todo.update(fresh or {})
        todo.update(read_back(cur, sorted(waiting - todo.keys())))
        for kind in sorted({k for k, _ in todo}):
            text_blocks.write_block(cur, kind, sorted((rid, t) for (k, rid), t in todo.items() if k == kind and t))
        if waiting:
            cur.execute("DELETE FROM search_pending")
        self.forget()
        return len(todo)


def waiting(cur) -> dict[tuple[int, int], str]:
    """Every row waiting for a block, (kind, id) -> its index form read back from what is stored ("" for a content
    gone meanwhile): what keyword search ranks beside the blocks (store/keywords.py)."""
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
