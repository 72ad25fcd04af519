"""`reasonlog search` from the command line at 500,000 messages: what a person waits for, by mode.

    python benchmarks/bench_cli_search.py                    # the database bench_server.py built (benchmarks/out)
    python benchmarks/bench_cli_search.py --runs 5 --db PATH
    python benchmarks/bench_cli_search.py --parts-only       # only where a search's time goes, in one process

Each run is a new `python -m reasonlog search QUERY --mode M --limit 10` process on the database bench_server.py
keeps (10,000 sessions, 500,000 messages, 500,000 units with synthetic vectors of the local model's name), timed
from start to exit. `text` needs neither the model nor the vectors: it is the baseline of the same run, and each
mode's median is printed with its ratio to it. `semantic` and `hybrid` load the local model (PyTorch) and read the
500,000 vector codes into memory: a server does both once, a command each time.

Then where that time goes, each part against its baseline of the same run: loading the model to embed one query
(numpy's form, semantic/minilm.py) against importing sentence-transformers (each in a new process); reading the codes
into memory (`store.warm_vectors`); choosing the nearest codes by counting (`vector_index.nearest_of`) against numpy's
`argpartition`, on the distances of one real query; and, for bench_server's 10 queries, the keyword half of a hybrid
search (`store.keyword_search`, 60 hits), the vector half (`store.vector_search`, 60 hits) and the query's embedding.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERY = "cash left after the portfolio decision"


def timed(db: Path, mode: str) -> float:
    env = {**os.environ, "REASONLOG_DB": str(db)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "reasonlog", "search", QUERY, "--mode", mode, "--limit", "10"],
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"reasonlog search --mode {mode} failed: {done.stderr.strip()}")
    return seconds


def in_new_process(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def ms(fn, repeat: int = 5) -> float:
    """The best of `repeat` timings of fn(), in ms."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def parts(db: Path, runs: int) -> None:
    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_server import QUERIES

    import reasonlog
    from reasonlog.semantic import LocalEmbedder
    from reasonlog.store import SessionFilter, vector_index

    numpy_form = statistics.median(in_new_process(
        "from reasonlog.semantic import LocalEmbedder; LocalEmbedder().embed_query('x')") for _ in range(runs))
    torch_form = statistics.median(in_new_process("import sentence_transformers") for _ in range(runs))
    print(f"  the model loaded and one query embedded, numpy's form: {numpy_form:.2f} s (a new process, median);"
          f" importing sentence-transformers alone: {torch_form:.2f} s; ratio {numpy_form / torch_form:.2f}")
    store = reasonlog.open_store(db, read_only=True)
    embedder = LocalEmbedder()
    start = time.perf_counter()
    store.warm_vectors(embedder.model, 384)
    read = time.perf_counter() - start
    print(f"  the vector codes read into memory (store.warm_vectors, once a process): {read:.2f} s")
    index = vector_index.VectorIndex(embedder.model, 384)  # the same codes, held here to time choosing the nearest
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        index.refresh(conn.cursor())
    dist = index.distances(embedder.embed_query(QUERY)).copy()
    counting, partition = ms(lambda: vector_index.nearest_of(dist, 480)), ms(lambda: np.argpartition(dist, 479))
    print(f"  the 480 nearest of {len(dist):,} codes: by counting {counting:.1f} ms, numpy's argpartition"
          f" {partition:.1f} ms; ratio {counting / partition:.2f}")
    every = SessionFilter(limit=None)
    for q in QUERIES:
        vector = embedder.embed_query(q)
        print(f"  {q[:44]:<44} keyword half {ms(lambda q=q: store.keyword_search(q, every, 60), 3):5.1f} ms,"
              f" vector half {ms(lambda v=vector: store.vector_search(v, embedder.model, every, 60), 3):5.1f} ms,"
              f" query embedded {ms(lambda q=q: embedder.embed_query(q), 3):5.1f} ms (best of 3)")
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=REPO / "benchmarks" / "out" / "server-10000.db")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--parts-only", action="store_true", help="skip the commands; only the parts in one process")
    args = ap.parse_args()
    if not args.db.exists():
        raise SystemExit(f"{args.db}: no such database; build it with `python benchmarks/bench_server.py`")
    if not args.parts_only:
        commands(args.db, args.runs)
    print("where the time goes:")
    parts(args.db, args.runs)


def commands(db: Path, runs: int) -> None:
    print(f"reasonlog search {QUERY!r} --limit 10 on {db.name}, {runs} runs a mode (a new process each)")
    medians: dict[str, float] = {}
    for mode in ("text", "keywords", "semantic", "hybrid"):
        times = [timed(db, mode) for _ in range(runs)]
        medians[mode] = statistics.median(times)
        print(f"  --mode {mode:<9} median {medians[mode]:6.2f} s  (min {min(times):.2f}, max {max(times):.2f})"
              f"  {medians[mode] / medians['text']:5.2f} x text")


if __name__ == "__main__":
    main()
