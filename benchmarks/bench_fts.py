"""Which FTS5 settings index the medium workload's unique messages fastest and smallest.

    .venv/bin/python benchmarks/bench_fts.py

Indexes the text reasonlog indexes (`parts.searchable_text` of every unique message) into a
contentless, detail=none FTS5 table, in batches of 1,400 rows as the writer does, once per
setting, five times each (the fastest counts: the machine is noisy), and prints seconds and bytes.
The default is the baseline of the same run.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
import workload  # noqa: E402

REPEATS = 5
SETTINGS = {
    "default": [],
    "pgsz=4000": ["INSERT INTO f(f, rank) VALUES ('pgsz', 4000)"],
    "automerge=8": ["INSERT INTO f(f, rank) VALUES ('automerge', 8)"],
    "cache 32 MiB": ["PRAGMA cache_size=-32768"],
    "automerge=8 + cache 32 MiB": ["INSERT INTO f(f, rank) VALUES ('automerge', 8)", "PRAGMA cache_size=-32768"],
    "automerge=16 + cache 32 MiB": ["INSERT INTO f(f, rank) VALUES ('automerge', 16)", "PRAGMA cache_size=-32768"],
}


def unique_texts() -> list[tuple[int, str]]:
    seen: dict[bytes, dict] = {}
    for call in workload.generate("medium"):
        reply = {"role": "assistant", "content": call["response"]["content"]}
        for message in [*call["request"]["messages"], reply]:
            seen.setdefault(orjson.dumps(message, option=orjson.OPT_SORT_KEYS), message)
    return [(i, searchable_text(m)) for i, m in enumerate(seen.values())]


def index(docs: list[tuple[int, str]], setup: list[str], path: str) -> tuple[float, int]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size=16384")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(t, content='', detail=none)")
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
    for name, setup in SETTINGS.items():
        runs = []
        for _attempt in range(REPEATS):
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(index(docs, setup, os.path.join(tmp, "fts.db")))
        seconds, size = min(r[0] for r in runs), runs[0][1]
        base = base or (seconds, size)
        print(f"{name:30s} {seconds:6.3f} s ({seconds / base[0]:.2f}x)  {size:>11,} B ({size / base[1]:.2f}x)")


if __name__ == "__main__":
    main()
