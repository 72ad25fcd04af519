"""Search by meaning: what embedding costs and how fast vectors are ranked (docs/search.md, docs/performance.md).

    .venv/bin/python benchmarks/bench_semantic.py embed                      # ~2 min: real transcripts, real model
    .venv/bin/python benchmarks/bench_semantic.py scan --units 500000        # SQLite; add --postgres URL for both
    .venv/bin/python benchmarks/bench_semantic.py corpus --texts 60000   # ~20 min; into benchmarks/out, resumes
    .venv/bin/python benchmarks/bench_semantic.py recall --vectors benchmarks/out/docstrings.f32 --sizes 10000 60000

`embed`: imports the real Claude Code transcripts of shared/fixtures/real/claude-code-transcripts/spotter into a new
SQLite file (timed: the baseline of the same run), then works off the embedding backlog with the local model
(all-MiniLM-L6-v2, CPU) as `reasonlog embed` does, and prints: units and distinct texts, the catch-up rate (units a
second, cutting included), the embedding throughput (texts a second), the catch-up time over the import's, and the
bytes the units, texts and vectors add (the file after checkpoint, before and after) over the unique content bytes.

`scan`: a database of N units in N/100 sessions with random unit vectors (384 float32, normalised; synthetic, as
latency does not depend on what they mean), then `store.vector_search` of 20 random queries (limit 10), p50 and p95,
against the floor measured in the same run: numpy's exact scan of the same vectors held in memory.

`corpus`: real embeddings at a size the fixtures cannot give: distinct paragraphs (80 to 1,000 characters) of the
docstrings of the packages installed beside reasonlog (PyTorch, transformers, numpy, ...: prose and code, as the files
an agent reads come back in tool results), a seeded sample of N, embedded by the local model and appended to a raw
float32 file, so that a killed run goes on where it stopped. `recall`: recall@10 of codes + rescore against the exact
scan, on the first `--sizes` rows of such files (or .npy files), for several candidate counts K.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import reasonlog
from reasonlog.store import SessionFilter, open_store

SPOTTER = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "claude-code-transcripts" / "spotter"
MODEL = "synthetic@bench"
DIM = 384
AGENTS = 20  # sessions' agents, one in 20 each: a filter to one of them keeps 5% of the units


def bench_embed(megabytes: int, workers: int = 1) -> None:
    """`megabytes` 0: the spotter folder as it is; else its transcripts copied to that size as bench_import.py
    and bench_stats.py copy them (each copy with its own ids), the catch-up after a large import; `workers` batches
    embedded at once (`reasonlog embed --workers`)."""
    from bench_import import replicate

    from reasonlog.io.importing import plan, run_import
    from reasonlog.semantic import LocalEmbedder
    from reasonlog.semantic.backlog import embed_backlog

    with tempfile.TemporaryDirectory() as folder:
        db, source = Path(folder) / "e.db", SPOTTER
        if megabytes:
            source = Path(folder) / "transcripts"
            replicate(source, megabytes)
        store = open_store(db)
        started = time.perf_counter()
        run_import(store, plan([source]))
        imported = time.perf_counter() - started
        store.checkpoint()
        before, unique = db.stat().st_size, store.status()["unique_content_bytes"]
        embedder = LocalEmbedder()
        embedder.embed(["load the model first: its loading is not the backlog's"])
        done = embed_backlog(store, embedder, workers=workers)
        store.checkpoint()
        counts = store.semantic_counts(embedder.model)
        after = db.stat().st_size
        store.close()
    print(f"import of {SPOTTER.name}{f' copied to {megabytes} MB' if megabytes else ''} (baseline): {imported:.2f} s")
    print(f"units {counts['units']}, distinct texts {counts['texts']}, embedded {done.embedded}"
          f" in {done.seconds:.1f} s on {workers} worker(s)")
    print(f"catch-up rate: {counts['units'] / done.seconds:.1f} units/s; embedding throughput:"
          f" {done.embedded / done.seconds:.1f} texts/s; catch-up ÷ import time: {done.seconds / imported:.1f}")
    print(f"bytes added by units, texts and vectors: {after - before:,} = {(after - before) / unique:.2f} × the unique"
          f" content ({unique:,} bytes; file {before:,} → {after:,})")


def bench_scan(units: int, postgres: str | None) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((units, DIM), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    queries = [q / np.linalg.norm(q) for q in rng.standard_normal((20, DIM), dtype=np.float32)]
    floor = _timed(lambda q: np.argpartition(-(matrix @ q), 10)[:10], queries)
    print(f"floor, numpy over {units:,} vectors in memory: p50 {floor[0]:.1f} ms, p95 {floor[1]:.1f} ms")
    with tempfile.TemporaryDirectory() as folder:
        targets = [("SQLite", str(Path(folder) / "scan.db"))] + ([("PostgreSQL", postgres)] if postgres else [])
        for name, target in targets:
            built = time.perf_counter()
            _fill(target, matrix)
            print(f"{name}: database built in {time.perf_counter() - built:.0f} s")
            answers: dict[bool, list[list[str]]] = {}
            for how, exact in (("exact scan", True), ("codes + rescore", False)):
                store = open_store(target, read_only=True)
                store.exact_vectors = exact
                started = time.perf_counter()
                store.vector_search(queries[0].astype("<f4").tobytes(), MODEL, SessionFilter(limit=None), 10)
                first = (time.perf_counter() - started) * 1000  # the index loaded (codes + rescore)
                p50, p95 = _timed(lambda q, store=store: store.vector_search(q.astype("<f4").tobytes(), MODEL,
                                                                             SessionFilter(limit=None), 10), queries)
                agent = _timed(lambda q, store=store: store.vector_search(q.astype("<f4").tobytes(), MODEL,
                                                                          SessionFilter(agent="a3", limit=None), 10),
                               queries[:5])
                answers[exact] = [[h["session_id"] + str(h["message_idx"]) for h in store.vector_search(
                    q.astype("<f4").tobytes(), MODEL, SessionFilter(limit=None), 10)] for q in queries]
                store.close()
                print(f"{name}, {how}: store.vector_search over {units:,} units: p50 {p50:.0f} ms, p95 {p95:.0f} ms"
                      f" ({p50 / floor[0]:.2f} × the floor); first search {first:.0f} ms; filtered to one agent of"
                      f" {AGENTS} ({units // AGENTS:,} units): p50 {agent[0]:.0f} ms")
            recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(answers[True], answers[False], strict=True)])
            print(f"{name}: recall@10 of codes + rescore on these random vectors (the worst case: no structure):"
                  f" {recall:.3f}")


def sign_codes(matrix: np.ndarray) -> np.ndarray:
    """Each row's sign bits as vectors.sign_code writes them (384 dimensions: 48 bytes, whole words already)."""
    bits = np.packbits(matrix > 0, axis=1)
    return np.pad(bits, ((0, 0), (0, -bits.shape[1] % 8)))


def _timed(fn, queries) -> tuple[float, float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def _fill(target: str, matrix: np.ndarray) -> None:
    """Sessions, units, texts and vectors written straight into a new database (a benchmark's shortcut)."""
    open_store(target).close()  # created and migrated
    if target.startswith("postgres"):
        import psycopg

        conn = psycopg.connect(target)
        mark = "%s"
    else:
        import sqlite3

        conn = sqlite3.connect(target)
        mark = "?"
    sessions = max(1, len(matrix) // 100)
    codes = sign_codes(matrix)
    with conn:
        cur = conn.cursor()
        cur.executemany(f"INSERT INTO sessions (id, started_at, status, agent) VALUES ({mark}, {mark}, 'completed',"
                        f" {mark})", [(f"s{n:06d}", f"2026-01-01T00:00:{n % 60:02d}.000000Z", f"a{n % AGENTS}")
                                      for n in range(sessions)])
        for start in range(0, len(matrix), 20000):
            rows = range(start, min(start + 20000, len(matrix)))
            cur.executemany(f"INSERT INTO unit_texts (id, hash, size, codec, data) VALUES ({mark}, {mark}, {mark},"
                            f" 0, {mark})", [(i + 1, i.to_bytes(16, "big"), 8, f"unit {i}".encode()) for i in rows])
            cur.executemany(f"INSERT INTO search_units (session_id, kind, message_idx, part, chunk, text_id) VALUES"
                            f" ({mark}, 'user', {mark}, 0, 0, {mark})",
                            [(f"s{i // 100:06d}", i % 100, i + 1) for i in rows])
            cur.executemany(f"INSERT INTO unit_vectors (model, text_id, dim, code, vector) VALUES ({mark}, {mark},"
                            f" {DIM}, {mark}, {mark})",
                            [(MODEL, i + 1, codes[i].tobytes(), matrix[i].tobytes()) for i in rows])
            print(f"  {min(start + 20000, len(matrix)):,} units written", end="\r", file=sys.stderr)
        if target.startswith("postgres"):
            cur.execute("ANALYZE")
    conn.close()


def docstring_paragraphs() -> list[str]:
    """The distinct paragraphs of 80 to 1,000 characters of the docstrings under this Python's site-packages, sorted."""
    import re
    import site

    found: set[str] = set()
    for root in {Path(p) for p in site.getsitepackages()}:
        for path in root.rglob("*.py"):
            try:
                source = path.read_text(errors="ignore")
            except OSError:
                continue
            for doc in re.finditer(r'"""(.*?)"""', source, re.S):
                for paragraph in re.split(r"\n\s*\n", doc.group(1)):
                    paragraph = " ".join(paragraph.split())
                    if 80 <= len(paragraph) <= 1000:
                        found.add(paragraph)
    return sorted(found)


def bench_corpus(texts: int, out: Path) -> None:
    """Embed a seeded sample of `texts` docstring paragraphs with the local model into `out` (raw float32 rows of
    384), appending; rows already there are kept and not embedded again."""
    from reasonlog.semantic import LocalEmbedder

    paragraphs = docstring_paragraphs()
    rng = np.random.default_rng(24)
    chosen = [paragraphs[i] for i in rng.permutation(len(paragraphs))[:texts]]
    out.parent.mkdir(parents=True, exist_ok=True)
    done = out.stat().st_size // (DIM * 4) if out.exists() else 0
    with open(out, "r+b" if out.exists() else "wb") as f:
        f.truncate(done * DIM * 4)  # a row cut by a kill is embedded again
    print(f"{len(paragraphs):,} distinct docstring paragraphs; {len(chosen):,} chosen, {done:,} embedded already")
    embedder = LocalEmbedder()
    t0 = time.perf_counter()
    for start in range(done, len(chosen), 1000):
        batch = chosen[start:start + 1000]
        with open(out, "ab") as f:
            f.write(b"".join(embedder.embed(batch)))
        rate = (start + len(batch) - done) / (time.perf_counter() - t0)
        print(f"  {start + len(batch):,} embedded ({rate:.0f} texts/s)", end="\r", file=sys.stderr)
    print(f"{out}: {out.stat().st_size // (DIM * 4):,} vectors of {DIM}")


def load_vectors(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path).astype("<f4")
    return np.fromfile(path, dtype="<f4").reshape(-1, DIM)


def bench_recall(vectors: list[Path], queries: int, sizes: list[int] | None = None) -> None:
    """recall@10 of codes + rescore against the exact scan, on real embeddings (.npy or raw float32 files of
    L2-normalised rows, e.g. what `embed` stored for the real fixtures, or `corpus` wrote): each of `queries` rows in
    turn is the query, the rest the corpus; for several candidate counts K; at each of `sizes` (the first rows)."""
    everything = np.concatenate([load_vectors(v) for v in vectors])
    for size in sizes or [len(everything)]:
        _recall(everything[:size], vectors, queries)


def _recall(matrix: np.ndarray, vectors: list[Path], queries: int) -> None:
    from reasonlog.store.vector_index import VectorIndex

    rng = np.random.default_rng(11)
    picked = rng.choice(len(matrix), size=min(queries, len(matrix)), replace=False)
    index = VectorIndex(MODEL, matrix.shape[1])
    index.append(np.arange(len(matrix), dtype=np.int64), sign_codes(matrix).view("<u8"))
    print(f"{len(matrix):,} real vectors ({', '.join(v.name for v in vectors)}), {len(picked)} of them as queries")
    for k in (50, 100, 200, 400, 800, 1600):
        found = []
        for i in picked:
            q = matrix[i].tobytes()
            scores = matrix @ matrix[i]
            scores[i] = -2.0  # the query itself left out
            tenth = np.sort(scores)[-10]
            near = index.nearest(q, k + 1)
            best = np.sort(scores[near[near != i]])[-10:]
            found.append(float(np.sum(best >= tenth - 1e-6)) / 10)  # equal scores are the same answer
        print(f"  K = {k:5d} ({k / len(matrix):.2%} of the vectors): recall@10 mean {np.mean(found):.3f},"
              f" worst query {min(found):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["embed", "scan", "recall", "corpus"])
    parser.add_argument("--vectors", type=Path, nargs="*", help="recall: .npy files of real embeddings")
    parser.add_argument("--queries", type=int, default=500, help="recall: how many of the vectors ask")
    parser.add_argument("--units", type=int, default=500_000)
    parser.add_argument("--postgres", metavar="URL", help="also scan on this PostgreSQL database (a new schema)")
    parser.add_argument("--mb", type=int, default=0, help="embed: the transcripts copied to this many MB first")
    parser.add_argument("--workers", type=int, default=1, help="embed: batches embedded at once")
    parser.add_argument("--texts", type=int, default=60_000, help="corpus: how many docstring paragraphs to embed")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "docstrings.f32")
    parser.add_argument("--sizes", type=int, nargs="*", help="recall: measure on the first N vectors, for each N")
    args = parser.parse_args()
    if args.part == "corpus":
        return bench_corpus(args.texts, args.out)
    if args.part == "embed":
        return bench_embed(args.mb, args.workers)
    if args.part == "recall":
        return bench_recall(args.vectors, args.queries, args.sizes)
    url = None
    if args.postgres:
        import uuid

        import psycopg

        schema = "bench_" + uuid.uuid4().hex[:8]
        with psycopg.connect(args.postgres, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {schema}")
        url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}options=-csearch_path%3D{schema}"
    try:
        bench_scan(args.units, url)
    finally:
        if url:
            with psycopg.connect(args.postgres, autocommit=True) as c:
                c.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _ = reasonlog  # the package under test, as installed
    main()
