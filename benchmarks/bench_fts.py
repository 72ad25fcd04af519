"""What the store's full-text index costs on the medium workload's unique messages, and the settings around it.

    .venv/bin/python benchmarks/bench_fts.py

Indexes the text the store indexes (`search.index_form` of `parts.searchable_text` of every unique message)
into the store's index since migration 6 (contentless FTS5, trigram tokenizer, `detail=none`, `columnsize=0`,
`automerge` 8), in batches of 1,400 rows as the writer does, five times each (the fastest counts: the machine
is noisy), and prints seconds and bytes against it, measured in the same run. Beside it: the word index the
store used before (migrations 1-5), and the trigram index with other settings.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson

from reasonlog.parts import searchable_text
from reasonlog.store.search import index_form

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
import workload  # noqa: E402

REPEATS = 5
TRIGRAM = "fts5(t, content='', detail=none, columnsize=0, tokenize='trigram case_sensitive 1')"
AUTOMERGE_8 = "INSERT INTO f(f, rank) VALUES ('automerge', 8)"
SETTINGS = {  # name: (table, statements after creating it); the first is the store's and the baseline
    "store: trigram, automerge=8": (TRIGRAM, [AUTOMERGE_8]),
    "trigram, default merging": (TRIGRAM, []),
    "trigram, automerge=8, pgsz=4000": (TRIGRAM, [AUTOMERGE_8, "INSERT INTO f(f, rank) VALUES ('pgsz', 4000)"]),
    "words (migrations 1-5), automerge=8": ("fts5(t, content='', detail=none)", [AUTOMERGE_8]),
}


def unique_texts(calls: list | None = None) -> list[tuple[int, str]]:
    """(n, the index's form of the searchable text) of each unique message of the medium workload (or `calls`)."""
    seen: dict[bytes, dict] = {}
    for call in calls if calls is not None else workload.generate("medium"):
        reply = {"role": "assistant", "content": call["response"]["content"]}
        for message in [*call["request"]["messages"], reply]:
            seen.setdefault(orjson.dumps(message, option=orjson.OPT_SORT_KEYS), message)
    return [(i, index_form(searchable_text(m))) for i, m in enumerate(seen.values())]


def index(docs: list[tuple[int, str]], table: str, setup: list[str], path: str) -> tuple[float, int]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size=16384")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"CREATE VIRTUAL TABLE f USING {table}")
    db.execute("PRAGMA cache_size=-32768")  # the store's page cache
    for statement in setup:
        db.execute(statement)
    start = time.perf_counter()
    for k in range(0, len(docs), 1400):
        db.execute("BEGIN")
        db.executemany("INSERT INTO f(rowid, t) VALUES (?, ?)", docs[k:k + 1400])
        db.execute("COMMIT")
    seconds = time.perf_counter() - start
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return seconds, os.path.getsize(path)


def main() -> None:
    docs = unique_texts()
    print(f"{len(docs)} unique messages, {sum(len(t) for _, t in docs):,} characters of text")
    base = None
    for name, (table, setup) in SETTINGS.items():
        runs = []
        for _attempt in range(REPEATS):
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(index(docs, table, setup, os.path.join(tmp, "fts.db")))
        seconds, size = min(r[0] for r in runs), runs[0][1]
        base = base or (seconds, size)
        print(f"{name:30s} {seconds:6.3f} s ({seconds / base[0]:.2f}x)  {size:>11,} B ({size / base[1]:.2f}x)")


if __name__ == "__main__":
    main()
