"""What SQLite's full-text index costs on the medium workload's unique messages, by layout (issue 34).

    .venv/bin/python benchmarks/bench_fts.py [--repeats 3]

Indexes the text the store indexes (`search.index_form` of `parts.searchable_text` of every unique message, 10,000
texts, 15.5 M characters) into each layout below, the writer's way: batches of 42 texts a transaction (the medium
workload's recorder wrote 10,200 texts in 241 batches), and prints the CPU seconds of the inserts and of the commits
(the fastest of --repeats: the machine is shared), the file's bytes, and for a few queries the candidates the index
gives and the CPU of asking for them (microseconds, the median of 30):

- `main` (the baseline): contentless FTS5, trigram tokenizer, `detail=none`, `columnsize=0`, `automerge` 8, each batch
  indexed in its own transaction (migration 6 to 24);
- `(b) waiting rows, caught up every 0.5 MB`: the same index, but each batch only notes its rows in `search_pending`
  and a batch that brings the waiting text to 500,000 characters indexes all of it (schema 25 only; since schema 26
  store/search_pending.py feeds blocks). A query then also takes the waiting rows as candidates (none here: the last
  rows are indexed at close);
- `(c) blocks of N texts`: one index row for N texts joined, so a query's candidates are every text of each block
  found (the approach of PostgreSQL's migration 20, store/pg_search.py);
- `(d) words only`: the `ascii` tokenizer alone, a query's words asked as prefixes: what a word index costs, and
  what it cannot answer (a query inside a word finds nothing);
- `(a) words + trigram vocabulary`: FTS5's `ascii` tokenizer (tokens: runs of ASCII letters, digits, `_` and any
  non-ASCII character), with the words new to the store (each batch's distinct words from a temporary FTS5 table's
  `fts5vocab`, kept in a WITHOUT ROWID table) indexed by trigram in a row per batch: a query's inner words must be
  whole words, its first a suffix and its last a prefix of one, a lone word anywhere inside one; the words that
  fit are looked up in the vocabulary's trigram index and checked, and the text index is asked for any of them;
- `(e) blocks of text, scanned`: no index (what SQLite keeps since schema 26, store/text_blocks.py): the texts in
  zstd blocks of about 1 MB with their ids and ends, every block read by each query.
"""
from __future__ import annotations

import argparse
import array
import bisect
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import zstandard

from reasonlog.parts import searchable_text
from reasonlog.store.search import grams_of, index_form

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
import workload  # noqa: E402

BATCH = 42
CAUGHT_UP = 500_000
TRIGRAM = "fts5(t, content='', detail=none, columnsize=0, tokenize='trigram case_sensitive 1')"
WORDS = "fts5(t, content='', detail=none, columnsize=0, tokenize=\"ascii tokenchars '_'\")"
AUTOMERGE_8 = "INSERT INTO f(f, rank) VALUES ('automerge', 8)"
QUERIES = ["the", "rror", "laacbuen_async", "the scheduler never checks", "日本語"]
_TOKEN = re.compile(r"[0-9a-z_\x80-\U0010ffff]+")


def match_query(needle: str) -> str | None:
    """The FTS5 query every text holding `needle` (lowercased) matches: the AND of its trigrams (None: too short)."""
    grams = grams_of(needle)
    return None if grams is None else " AND ".join('"' + g.replace('"', '""') + '"' for g in grams)


def unique_texts(calls: list | None = None) -> list[tuple[int, str]]:
    """(n, the index's form of the searchable text) of each unique message of the medium workload (or `calls`)."""
    seen: dict[bytes, dict] = {}
    for call in calls if calls is not None else workload.generate("medium"):
        reply = {"role": "assistant", "content": call["response"]["content"]}
        for message in [*call["request"]["messages"], reply]:
            seen.setdefault(orjson.dumps(message, option=orjson.OPT_SORT_KEYS), message)
    return [(i, index_form(searchable_text(m))) for i, m in enumerate(seen.values())]


def _open(path: str, *tables: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size=16384")
    db.execute("PRAGMA journal_mode=WAL")
    for table in tables:
        db.execute(table)
    db.execute("PRAGMA cache_size=-32768")  # the store's page cache
    return db


class Layout:
    """One way to index the texts: `write` a batch in the open transaction, `close` what is left, `candidates`."""

    tables = [f"CREATE VIRTUAL TABLE f USING {TRIGRAM}", AUTOMERGE_8]

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def write(self, batch: list[tuple[int, str]]) -> None:
        self.db.executemany("INSERT INTO f(rowid, t) VALUES (?, ?)", batch)

    def close(self) -> None:
        pass

    def candidates(self, query: str) -> list[int]:
        match = match_query(query.lower())
        return [r for (r,) in self.db.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,))] if match else []


class Waiting(Layout):
    tables = [*Layout.tables, "CREATE TABLE search_pending (kind INTEGER NOT NULL, id INTEGER NOT NULL,"
              " PRIMARY KEY (kind, id)) WITHOUT ROWID"]

    def __init__(self, db: sqlite3.Connection):
        super().__init__(db)
        self.texts: dict[int, str] = {}
        self.chars = 0

    def write(self, batch: list[tuple[int, str]]) -> None:
        self.texts.update(batch)
        self.chars += sum(len(t) for _, t in batch)
        if self.chars >= CAUGHT_UP:
            self.close()
        else:
            self.db.executemany("INSERT INTO search_pending VALUES (0, ?)", [(i,) for i, _ in batch])

    def close(self) -> None:
        waiting = {i for (i,) in self.db.execute("SELECT id FROM search_pending")}
        assert waiting <= self.texts.keys()  # one writer here: every waiting row's text is in memory
        super().write(sorted(self.texts.items()))
        self.db.execute("DELETE FROM search_pending")
        self.texts, self.chars = {}, 0


class Blocks(Layout):
    size = 64

    def __init__(self, db: sqlite3.Connection):
        super().__init__(db)
        self.blocks: list[list[int]] = []

    def write(self, batch: list[tuple[int, str]]) -> None:
        rows = []
        for start in range(0, len(batch), self.size):
            part = batch[start:start + self.size]
            self.blocks.append([i for i, _ in part])
            rows.append((len(self.blocks) - 1, "\n".join(t for _, t in part)))
        super().write(rows)

    def candidates(self, query: str) -> list[int]:
        return [i for block in super().candidates(query) for i in self.blocks[block]]


class Blocks16(Blocks):
    size = 16


class Words(Layout):
    tables = [f"CREATE VIRTUAL TABLE f USING {WORDS}", AUTOMERGE_8,
              "CREATE TABLE w (word TEXT PRIMARY KEY) WITHOUT ROWID",
              "CREATE TABLE wb (id INTEGER PRIMARY KEY, words TEXT)", f"CREATE VIRTUAL TABLE wv USING {TRIGRAM}",
              f"CREATE VIRTUAL TABLE temp.b USING {WORDS}",
              "CREATE VIRTUAL TABLE temp.bv USING fts5vocab(temp, b, row)"]

    def write(self, batch: list[tuple[int, str]]) -> None:
        super().write(batch)
        self.db.executemany("INSERT INTO b(rowid, t) VALUES (?, ?)", batch)
        new = [w for (w,) in self.db.execute("INSERT OR IGNORE INTO w(word) SELECT term FROM bv RETURNING word")]
        self.db.execute("INSERT INTO b(b) VALUES ('delete-all')")
        if new:
            text = "\n".join(new)
            block = self.db.execute("INSERT INTO wb(words) VALUES (?)", (text,)).lastrowid
            self.db.execute("INSERT INTO wv(rowid, t) VALUES (?, ?)", (block, index_form(text)))

    def candidates(self, query: str) -> list[int]:
        low = query.lower()
        tokens = [(m.group(), m.start() == 0, m.end() == len(low)) for m in _TOKEN.finditer(low)]
        groups = [self._words(word, first, last) for word, first, last in tokens]
        known = [g for g in groups if g is not None]
        if not known or not all(known):
            return []  # no group: the layout would scan every text; an empty group: no text holds the query
        match = " AND ".join("(" + " OR ".join('"' + w + '"' for w in g) + ")" for g in known)
        return [r for (r,) in self.db.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,))]

    def _words(self, word: str, first: bool, last: bool) -> list[str] | None:
        if not first and not last:
            return [word]
        if last and not first:
            words = [w for (w,) in self.db.execute("SELECT word FROM w WHERE word >= ? AND word < ? LIMIT 1001",
                                                   (word, word + "\U0010ffff"))]
            return words if len(words) <= 1000 else None
        match = match_query(word)
        if match is None:
            return None
        fits: Callable[[str], bool] = (lambda w: word in w) if last else (lambda w: w.endswith(word))
        out = {w for (text,) in self.db.execute("SELECT words FROM wb WHERE id IN (SELECT rowid FROM wv WHERE wv"
                                                " MATCH ?)", (match,)) for w in text.split("\n") if fits(w)}
        return sorted(out) if len(out) <= 1000 else None


class WordsOnly(Layout):
    """What a word index alone costs (the price of the trigram layouts' substring answers): it finds whole words
    and word prefixes only, so a query inside a word (`rror`) finds nothing."""

    tables = [f"CREATE VIRTUAL TABLE f USING {WORDS}", AUTOMERGE_8]

    def candidates(self, query: str) -> list[int]:
        words = _TOKEN.findall(query.lower())
        match = " AND ".join(f'"{w}"*' for w in words)
        return [r for (r,) in self.db.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,))] if match else []


class Scanned(Layout):
    """No index: the texts (their index form, UTF-8) appended to blocks of about `BLOCK_BYTES`, each compressed by
    zstd with the ids and end offsets of its texts, and a query's candidates found by reading every block and
    looking for the query's longest term in it (`bytes.find`, which lands only on character boundaries in UTF-8).
    Any substring of any length, in any script; what a query costs grows with the archive."""

    tables = ["CREATE TABLE blocks (id INTEGER PRIMARY KEY, ids BLOB, ends BLOB, data BLOB)"]
    BLOCK_BYTES = 1 << 20
    LEVEL = 1

    def __init__(self, db: sqlite3.Connection):
        super().__init__(db)
        self.parts: list[bytes] = []
        self.ids = array.array("q")
        self.ends = array.array("I")
        self.size = 0
        self.packer = zstandard.ZstdCompressor(level=self.LEVEL)
        self.unpacker = zstandard.ZstdDecompressor()

    def write(self, batch: list[tuple[int, str]]) -> None:
        for i, text in batch:
            data = text.encode() + b"\x00"
            self.parts.append(data)
            self.size += len(data)
            self.ids.append(i)
            self.ends.append(self.size)
        if self.size >= self.BLOCK_BYTES:
            self.close()

    def close(self) -> None:
        if self.parts:
            self.db.execute("INSERT INTO blocks (ids, ends, data) VALUES (?, ?, ?)",
                            (self.ids.tobytes(), self.ends.tobytes(), self.packer.compress(b"".join(self.parts))))
            self.parts, self.ids, self.ends, self.size = [], array.array("q"), array.array("I"), 0

    def candidates(self, query: str) -> list[int]:
        needle = max(query.lower().split(), key=len).encode()
        out: list[int] = []
        for ids_blob, ends_blob, data in self.db.execute("SELECT ids, ends, data FROM blocks ORDER BY id"):
            text = self.unpacker.decompress(data)
            at = text.find(needle)
            if at < 0:
                continue
            ids, ends = array.array("q", ids_blob), array.array("I", ends_blob)
            while at >= 0:
                k = bisect.bisect_right(ends, at)
                out.append(ids[k])
                at = text.find(needle, ends[k])  # the next text's start: a text is a candidate once
        return out


LAYOUTS: dict[str, type[Layout]] = {"main: trigram, a commit a batch": Layout,
                                    "(b) waiting rows, caught up every 0.5 MB": Waiting,
                                    "(c) blocks of 16 texts": Blocks16, "(c) blocks of 64 texts": Blocks,
                                    "(a) words + trigram vocabulary": Words,
                                    "(d) words only (no substrings)": WordsOnly,
                                    "(e) blocks of text, scanned": Scanned}


def run(layout: type[Layout], docs: list[tuple[int, str]], path: str) -> tuple[float, float, int, Layout]:
    db = _open(path, *layout.tables)
    index = layout(db)
    cpu_write = cpu_commit = 0.0
    for k in range(0, len(docs), BATCH):
        start = time.process_time()
        db.execute("BEGIN")
        index.write(docs[k:k + BATCH])
        mid = time.process_time()
        db.execute("COMMIT")
        cpu_write, cpu_commit = cpu_write + mid - start, cpu_commit + time.process_time() - mid
    start = time.process_time()
    db.execute("BEGIN")
    index.close()
    db.execute("COMMIT")
    cpu_write += time.process_time() - start
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return cpu_write, cpu_commit, os.path.getsize(path), index


def query_costs(index: Layout, texts: dict[int, str]) -> list[tuple[str, int, int, float]]:
    """(query, candidates, true hits, median µs of asking the index) for each of QUERIES."""
    out = []
    for query in QUERIES:
        found = index.candidates(query)
        hits = sum(query.lower() in texts[i] for i in found)
        times = []
        for _ in range(30):
            start = time.process_time()
            index.candidates(query)
            times.append(time.process_time() - start)
        out.append((query, len(found), hits, statistics.median(times) * 1e6))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sketch", action="store_true",
                        help="also run ../shared/bench/sketch_dedup.py --size medium (the durable write's floor) in"
                             " this run, and print each layout's CPU against it")
    parser.add_argument("--only", help="the layouts to run: a comma-separated list of their letters or 'main'")
    args = parser.parse_args()
    sketch = _sketch_cpu(args.repeats) if args.sketch else None
    docs = unique_texts()
    texts = dict(docs)
    assert grams_of("rror") is not None
    print(f"{len(docs):,} unique messages, {sum(len(t) for _, t in docs):,} characters; batches of {BATCH}")
    base = None
    chosen = args.only.split(",") if args.only else None
    for name, layout in LAYOUTS.items():
        if chosen and not any(name.startswith(c) or name.startswith(f"({c})") for c in chosen):
            continue
        runs = []
        with tempfile.TemporaryDirectory() as tmp:
            for attempt in range(args.repeats):
                path = os.path.join(tmp, f"fts{attempt}.db")
                runs.append(run(layout, docs, path))
            write, commit, size, index = min(runs, key=lambda r: r[0] + r[1])
            total = write + commit
            base = base or (total, size)
            print(f"{name:40s} insert {write:6.3f} + commit {commit:6.3f} = {total:6.3f} s CPU ({total / base[0]:.2f}x)"
                  f"  {size:>11,} B ({size / base[1]:.2f}x)"
                  + (f"; {total / sketch:.2f}x the sketch's whole write" if sketch else ""))
            for query, candidates, hits, micros in query_costs(index, texts):
                print(f"    {query!r:32s} {candidates:6,} candidates ({hits:,} hold it) {micros:9.0f} µs")
            index.db.close()


def _sketch_cpu(repeats: int) -> float:
    """The sketch's CPU seconds for the whole medium write (the fastest of `repeats`, as for the layouts)."""
    script = Path(workload.__file__).with_name("sketch_dedup.py")
    runs = [orjson.loads(subprocess.run([sys.executable, str(script), "--size", "medium"], capture_output=True,
                                        check=True, text=True).stdout)["cpu_s"] for _ in range(repeats)]
    print(f"the sketch (sketch_dedup.py --size medium), the whole durable write: {min(runs):.3f} s CPU")
    return min(runs)


if __name__ == "__main__":
    main()
