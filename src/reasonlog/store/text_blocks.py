"""SQLite's text search without an index (schema 26): the searchable text of every record, in compressed blocks that
each search reads whole.

A block (`search_blocks`) holds the index form (store/search.py: lowercased) of a run of records of one kind, UTF-8,
each text ended by a NUL, compressed by zstd, with the records' ids and the offsets where their texts end. A search
reads every block, looks for its query's first group of terms with `bytes.find` (in UTF-8 a character's bytes never
occur inside another's, so a match starts on a character), and checks the whole query on each text found: the
candidates it gives are the records whose kept text satisfies the query (for PostgreSQL's sake that text ends with
its CJK runs' bigrams, so a query may rarely match there too; the stored text decides, store/search.py).

Why no index: FTS5's trigram index, the only SQLite index that finds any substring, cost about twice the CPU of the
whole durable write of a minimal recorder (benchmarks/bench_fts.py: 1.13 s against 0.061 s for these blocks on the
medium workload's 15.5 M characters, where the sketch's write took 0.58 s; 27 % of a first import) and took 1.8 x the
blocks' bytes. A search pays instead: about 1.2 ms a million characters of stored text (decompressing is most of it),
about 18 ms for the medium workload's store (benchmarks/bench_search_latency.py). Blocks are written once a
batch's waiting text reaches `search_pending.CHARS` (store/search_pending.py); deleting a record rewrites the blocks
that hold it, so a pruned text is gone from the file.
"""
from __future__ import annotations

import contextlib
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

import orjson
import zstandard

# The kind of record a block (and a row of `search_pending`) holds, by the name search.py gives its text.
KINDS = {"contents_search": 0, "tool_results_search": 1, "outcomes_search": 2, "reasoning_records_search": 3}
LEVEL = 1  # zstd's fastest level: 0.066 s for the medium workload's 15.5 M characters, 3.4 to 1
_END = "\x00"  # after each text of a block


assert array("I").itemsize == 4 and array("q").itemsize == 8  # the sizes the blocks' columns are written in


def _packed(numbers: array) -> bytes:
    """The numbers' bytes, little-endian whatever the machine (a file moves between machines)."""
    if sys.byteorder == "big":
        numbers = array(numbers.typecode, numbers)
        numbers.byteswap()
    return numbers.tobytes()


def _unpacked(typecode: str, blob: bytes) -> array:
    numbers = array(typecode, blob)
    if sys.byteorder == "big":
        numbers.byteswap()
    return numbers


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate (JSON allows "\ud800") is stored as given


def write_block(cur, kind: int, rows: list[tuple[int, str]]) -> None:
    """Store the texts of `rows` ((id, index form)) as one block of `kind`."""
    rows = [(rid, text) for rid, text in rows if text]
    if not rows:
        return
    ids = array("q", [rid for rid, _ in rows])
    texts = [text for _, text in rows]
    # Encoded once, joined (the last "" ends the last text): UTF-8 encodes each character alone, so this is each
    # text's bytes and its NUL in turn. A text's length in bytes is its length when it is ASCII (known to the string
    # without a scan): only the others are encoded alone as well (tests/test_search_text_rules.py holds the offsets to
    # a text-by-text encoding).
    data = encode(_END.join([*texts, ""]))
    ends = array("I", accumulate(len(t) + 1 if t.isascii() else len(encode(t)) + 1 for t in texts))
    cur.execute("INSERT INTO search_blocks (kind, lo, hi, ids, ends, data) VALUES (?, ?, ?, ?, ?, ?)",
                (kind, min(ids), max(ids), _packed(ids), _packed(ends),
                 zstandard.ZstdCompressor(level=LEVEL).compress(data)))


def _texts(ids_blob: bytes, ends_blob: bytes, data: bytes) -> Iterator[tuple[int, bytes]]:
    """(id, UTF-8 text) of each record of a stored block."""
    ids, ends = _unpacked("q", ids_blob), _unpacked("I", ends_blob)
    start = 0
    for rid, end in zip(ids, ends, strict=True):
        yield rid, data[start:end - 1]
        start = end


def drop(cur, kind: int, gone: Iterable[int]) -> int:
    """Take these records out of the blocks of `kind` (a block left empty goes); returns how many were held."""
    wanted = set(gone)
    if not wanted:
        return 0
    lo, hi = min(wanted), max(wanted)
    unpack = zstandard.ZstdDecompressor()
    dropped = 0
    for block, ids_blob, ends_blob, data in cur.execute(
            "SELECT id, ids, ends, data FROM search_blocks WHERE kind = ? AND lo <= ? AND hi >= ?",
            (kind, hi, lo)).fetchall():
        if wanted.isdisjoint(_unpacked("q", ids_blob)):
            continue
        texts = list(_texts(ids_blob, ends_blob, unpack.decompress(data)))
        kept = [(rid, text.decode("utf-8", "surrogatepass")) for rid, text in texts if rid not in wanted]
        dropped += len(texts) - len(kept)
        cur.execute("DELETE FROM search_blocks WHERE id = ?", (block,))
        write_block(cur, kind, kept)
    return dropped


def compact(cur, target: int) -> None:
    """Pack a kind's blocks into blocks of about `target` bytes of text where deletes left more than twice as many
    as that needs."""
    unpack = zstandard.ZstdDecompressor()
    for kind in KINDS.values():
        sizes = [_unpacked("I", ends)[-1] for (ends,) in cur.execute("SELECT ends FROM search_blocks WHERE kind = ?",
                                                                  (kind,))]
        if len(sizes) <= 2 * (sum(sizes) // target + 1):
            continue
        blocks = cur.execute("SELECT ids, ends, data FROM search_blocks WHERE kind = ? ORDER BY id",
                             (kind,)).fetchall()
        cur.execute("DELETE FROM search_blocks WHERE kind = ?", (kind,))
        run: list[tuple[int, str]] = []
        size = 0
        for ids_blob, ends_blob, data in blocks:
            for rid, text in _texts(ids_blob, ends_blob, unpack.decompress(data)):
                run.append((rid, text.decode("utf-8", "surrogatepass")))
                size += len(text)
                if size >= target:
                    write_block(cur, kind, run)
                    run, size = [], 0
        write_block(cur, kind, run)


def problems(cur) -> list[str]:
    """What `reasonlog db check` finds wrong with the blocks: one that does not read back whole, a record held twice,
    a record held that is not stored."""
    out: list[str] = []
    held: set[tuple[int, int]] = set()
    unpack = zstandard.ZstdDecompressor()
    for block, kind, ids_blob, ends_blob, data in cur.execute("SELECT id, kind, ids, ends, data FROM search_blocks"):
        try:
            ids, ends, size = _unpacked("q", ids_blob), _unpacked("I", ends_blob), len(unpack.decompress(data))
        except (ValueError, zstandard.ZstdError) as exc:
            out.append(f"search block {block}: cannot be read: {exc}")
            continue
        if len(ids) != len(ends) or list(ends) != sorted(ends) or (ends and ends[-1] != size):
            out.append(f"search block {block}: its {len(ids)} ids and {len(ends)} ends do not cut its {size} bytes")
        twice = sorted(rid for rid in ids if (kind, rid) in held)
        if twice:
            out.append(f"search block {block}: holds records another block holds too: {twice[:5]}")
        held.update((kind, rid) for rid in ids)
    for kind, (key, table) in _STORED.items():
        stored = {rid for (rid,) in cur.execute(f"SELECT {key} FROM {table}")}
        gone = sorted(rid for k, rid in held if k == kind and rid not in stored)
        if gone:
            out.append(f"search blocks: hold the text of {len(gone)} {table} no longer stored: {gone[:5]}")
    return out


_STORED = {0: ("id", "contents"), 1: ("rowid", "tool_results"), 2: ("rowid", "outcomes"),
           3: ("rowid", "reasoning_records")}


class Found:
    """The records a query's text was found in, by kind (`Blocks.argument`)."""

    def __init__(self, ids: dict[int, list[int]]):
        self.ids = ids

    def json(self, index: str) -> str:
        return orjson.dumps(self.ids.get(KINDS[index], [])).decode()

    def count(self, index: str) -> int:
        return len(self.ids.get(KINDS[index], []))


def find(cur, query: Any) -> Found:
    """Every record whose stored index form satisfies `query` (store/search.py's `Query`), by kind."""
    return find_each(cur, [query])[0]


def find_each(cur, queries: list[Any]) -> list[Found]:
    """`find` for each of `queries`, every block read and decompressed once for all of them (keyword ranking asks
    for each word of a question)."""
    found: list[dict[int, list[int]]] = [{kind: [] for kind in KINDS.values()} for _ in queries]
    terms = [[encode(term) for term in query.groups[0]] for query in queries]
    # A query of one group and nothing excluded holds wherever a term of it is found: no text need be decoded.
    settled = [len(query.groups) == 1 and not query.excluded for query in queries]
    unpack = zstandard.ZstdDecompressor()
    for kind, ids_blob, ends_blob, data in cur.execute("SELECT kind, ids, ends, data FROM search_blocks ORDER BY id"):
        text = unpack.decompress(data)
        ends = ids = None
        for query, its_terms, exact, out in zip(queries, terms, settled, found, strict=True):
            held: set[int] = set()
            for term in its_terms:
                at = text.find(term)
                while at >= 0:
                    if ends is None:
                        ends = _unpacked("I", ends_blob)
                    k = bisect_right(ends, at)
                    held.add(k)
                    at = text.find(term, ends[k])  # the next text's start: each text is found once
            if not held:
                continue
            assert ends is not None
            ids = _unpacked("q", ids_blob) if ids is None else ids
            out[kind] += [ids[k] for k in sorted(held) if exact or query.first_in(
                text[ends[k - 1] if k else 0:ends[k] - 1].decode("utf-8", "surrogatepass")) is not None]
    return [Found(ids) for ids in found]


class Blocks:
    """The `index` of a SQLite store (see store/search.py for the contract, and PostgreSQL's in pg_search.py).

    Rows may wait in `search_pending` (kind, id) before a block holds them (store/search_pending.py): a search takes
    every waiting row of a kind as a candidate beside what the blocks give, and its stored text decides as for any
    candidate, so answers do not depend on whether a row was written to a block yet."""

    @staticmethod
    def add(cur, index: str, rows: list[tuple[int, str]]) -> None:
        write_block(cur, KINDS[index], rows)

    @staticmethod
    def remove(cur, index: str, ids: list[int]) -> None:
        kind = KINDS[index]
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            cur.execute(f"DELETE FROM search_pending WHERE kind = ? AND id IN ({','.join('?' * len(chunk))})",
                        [kind, *chunk])
        drop(cur, kind, ids)

    @staticmethod
    def matches(index: str, match: Found) -> str:
        return "1"  # the records found are in `rows`, beside the rows waiting

    @staticmethod
    def rows(index: str) -> str:
        return (f"(SELECT value AS rowid FROM json_each(?) UNION ALL"
                f" SELECT id FROM search_pending WHERE kind = {KINDS[index]}) {index}")

    @staticmethod
    def indexed(index: str) -> str:
        """What the blocks give of a kind, without the rows waiting (keyword ranking takes those itself)."""
        return f"(SELECT value AS rowid FROM json_each(?)) {index}"

    @staticmethod
    def joins(index: str, column: str) -> str:
        return f"{column} = {index}.rowid"

    @staticmethod
    def ids(index: str) -> str:
        return "rowid"

    @staticmethod
    def arguments(index: str, match: Found) -> list[str]:
        """The values of `rows(index)`'s and `matches(index, match)`'s placeholders."""
        return [match.json(index)]

    @staticmethod
    def planned(cur) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    @staticmethod
    def argument(cur, query: Any) -> Found:
        return find(cur, query)

    @staticmethod
    def arguments_of(cur, queries: list[Any]) -> list[Found]:
        """`argument` of each query, the blocks read once for all."""
        return find_each(cur, queries)

    @staticmethod
    def is_common(cur, match: Found, common: int) -> bool:
        """Whether `common` contents or more hold the text (counted exactly: every block was read)."""
        return match.count("contents_search") >= common


BLOCKS = Blocks()
