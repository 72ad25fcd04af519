"""Search by meaning ranked by pgvector against the codes in memory, on one PostgreSQL database (docs/search.md).

    .venv/bin/python benchmarks/bench_pgvector.py --postgres $REASONLOG_TEST_POSTGRES_VECTOR --units 500000

A new schema of the server (it must offer pgvector: .ci/postgres-vector starts one) gets N units in N/100 sessions
(agents a0..a19 in turn) with synthetic 384-dimension unit vectors, `--kind clustered` (the default: points around
N/100 random centres, noise 0.05 a dimension, so that a unit's nearest are its cluster's, as real embeddings have
topics) or `--kind random` (no structure at all: the codes' worst case). They are written with COPY, `embedding`
included, then the HNSW index is made as the store makes it (store/pg_vectors.index_sql; maintenance_work_mem raised
for the build). Then `store.vector_search` (limit 10) of `--queries` new points of the same kind, three ways on the
same store: the exact scan (`exact_vectors`), the codes in memory (`pgvector = False`), and pgvector; unfiltered, and
filtered to one agent of 20. For each: recall@10 against the exact scan, p50 and p95 of the wall time, and the CPU
of this process and of the server's backend per query; the ratios are pgvector over the codes, measured in the same
run. The machine's load average is printed beside the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg

from reasonlog.store import SessionFilter, open_store
from reasonlog.store.pg_vectors import index_sql

MODEL = "synthetic@bench"
DIM = 384
AGENTS = 20
CHUNK = 20_000


def vectors(kind: str, n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    if kind == "random":
        m = rng.standard_normal((n, DIM), dtype=np.float32)
    else:
        m = centres[rng.integers(0, len(centres), n)] + 0.05 * rng.standard_normal((n, DIM), dtype=np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype("<f4")


def build(url: str, units: int, kind: str, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Sessions, texts, units and vectors (with `embedding`) written with COPY, then the HNSW index made; the
    vectors written."""
    open_store(url).close()  # created and migrated: the extension and `embedding` are there
    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                              " WHERE e.extname = 'vector'").fetchone()
        if schema is None:
            sys.exit("this server has no pgvector: start .ci/postgres-vector and pass its URL")
        with conn.cursor().copy("COPY sessions (id, started_at, status, agent) FROM STDIN") as copy:
            for n in range(max(1, units // 100)):
                copy.write_row((f"s{n:06d}", f"2026-01-01T00:00:{n % 60:02d}.000000Z", "completed", f"a{n % AGENTS}"))
        chunks = []
        for start in range(0, units, CHUNK):
            chunks.append(vectors(kind, min(CHUNK, units - start), rng, centres))
            _copy_chunk(conn, start, chunks[-1])
            print(f"  {min(start + CHUNK, units):,} units written", end="\r", file=sys.stderr)
        started = time.process_time(), time.perf_counter()
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute(index_sql(schema[0], MODEL, DIM))
        conn.execute("ANALYZE")
        print(f"\nHNSW index made in {time.perf_counter() - started[1]:.0f} s", file=sys.stderr)
    return np.concatenate(chunks)


def _copy_chunk(conn: psycopg.Connection, start: int, matrix: np.ndarray) -> None:
    codes = np.packbits(matrix > 0, axis=1)
    with conn.transaction():
        cur = conn.cursor()
        with cur.copy("COPY unit_texts (id, hash, size, codec, data) FROM STDIN") as copy:
            for i in range(len(matrix)):
                copy.write_row((start + i + 1, (start + i).to_bytes(16, "big"), 8, 0, f"unit {start + i}".encode()))
        with cur.copy("COPY search_units (session_id, kind, message_idx, part, chunk, text_id) FROM STDIN") as copy:
            for i in range(start, start + len(matrix)):
                copy.write_row((f"s{i // 100:06d}", "user", i % 100, 0, 0, i + 1))
        with cur.copy("COPY unit_vectors (model, text_id, dim, code, vector, embedding) FROM STDIN") as copy:
            for i, row in enumerate(matrix):
                text = "[" + ",".join(map(repr, row.tolist())) + "]"  # each float32 exactly (float64's repr)
                copy.write_row((MODEL, start + i + 1, DIM, codes[i].tobytes(), row.tobytes(), text))


def backend_cpu(pid: int) -> float:
    """The CPU seconds of a server process (it runs on this machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(store, pid: int, queries: np.ndarray, flt: SessionFilter) -> tuple[list[list[str]], dict[str, float]]:
    answers, times, cpu, server = [], [], [], []
    for q in queries:
        s0, c0, w0 = backend_cpu(pid), time.process_time(), time.perf_counter()
        hits = store.vector_search(q.tobytes(), MODEL, flt, 10)
        times.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        server.append((backend_cpu(pid) - s0) * 1000)
        answers.append([f"{h['session_id']}/{h['message_idx']}" for h in hits])
    times.sort()
    return answers, {"p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))],
                     "cpu": statistics.mean(cpu), "server": statistics.mean(server)}


def warm_index(url: str) -> None:
    """Read the HNSW index's files once, into the OS cache, as a server whose memory holds its index has it (pgvector's
    guidance; the CI server's shared_buffers are 128 MB, and on a loaded disk a cold index took 3-23 s a query)."""
    with psycopg.connect(url) as conn:
        folder = conn.execute("SELECT current_setting('data_directory')").fetchone()[0]
        files = [r[0] for r in conn.execute("SELECT pg_relation_filepath(indexrelid) FROM pg_index"
                                            " WHERE indexrelid::regclass::text LIKE 'unit_vectors_hnsw%'")]
    for name in files:
        path = Path(folder, name)
        for part in sorted(path.parent.glob(path.name + "*")) if path.exists() else []:
            with open(part, "rb") as f:
                while f.read(1 << 24):
                    pass


def exact_answers(matrix: np.ndarray, queries: np.ndarray, agent: int | None) -> list[list[str]]:
    """What the exact scan answers, computed with numpy from the vectors the build wrote (the store's own exact scan
    took 13 s a query at 500,000 units under this load: `--store-exact` times it)."""
    keep = np.ones(len(matrix), dtype=bool) if agent is None else (np.arange(len(matrix)) // 100) % AGENTS == agent
    rows = np.flatnonzero(keep)
    out = []
    for q in queries:
        scores = matrix[rows] @ q
        top = rows[np.argsort(-scores, kind="stable")[:10]]
        out.append([f"s{i // 100:06d}/{i % 100}" for i in top])
    return out


def compare(url: str, queries: np.ndarray, matrix: np.ndarray, store_exact: bool) -> None:
    store = open_store(url, read_only=True)
    pid = store._read(lambda cur: cur.execute("SELECT pg_backend_pid()").fetchone()[0])
    for label, flt, agent in (("unfiltered", SessionFilter(limit=None), None),
                              (f"one agent of {AGENTS}", SessionFilter(agent="a3", limit=None), 3)):
        got = {"exact": (exact_answers(matrix, queries, agent), {})}
        for how in ("exact", "codes", "pgvector") if store_exact else ("codes", "pgvector"):
            store.exact_vectors, store.pgvector = how == "exact", how == "pgvector"
            warm = time.perf_counter()
            store.vector_search(queries[0].tobytes(), MODEL, flt, 10)  # the codes read, the index's pages cached
            first = (time.perf_counter() - warm) * 1000
            got[how] = measure(store, pid, queries, flt)
            print(f"  {label}, {how}: first search {first:.0f} ms; p50 {got[how][1]['p50']:.1f} ms,"
                  f" p95 {got[how][1]['p95']:.1f} ms; CPU a query: this process {got[how][1]['cpu']:.1f} ms,"
                  f" the server {got[how][1]['server']:.1f} ms")
        for how in ("codes", "pgvector"):
            recall = np.mean([len(set(a) & set(b)) / max(1, len(b))
                              for a, b in zip(got[how][0], got["exact"][0], strict=True)])
            print(f"  {label}, {how}: recall@10 against the exact scan {recall:.3f}")
        ratio = {k: got["pgvector"][1][k] / max(got["codes"][1][k], 1e-9) for k in ("p50", "p95")}
        print(f"  {label}: pgvector / codes p50 {ratio['p50']:.2f}, p95 {ratio['p95']:.2f};"
              f" load average {os.getloadavg()[0]:.1f}")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", required=True, metavar="URL", help="a server with pgvector (a new schema)")
    parser.add_argument("--units", type=int, default=500_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--kind", choices=["clustered", "random"], default="clustered")
    parser.add_argument("--store-exact", action="store_true", help="also time the store's exact scan (slow)")
    parser.add_argument("--keep", metavar="SCHEMA", help="reuse (or keep) this schema instead of a new one")
    args = parser.parse_args()
    rng = np.random.default_rng(35)
    centres = rng.standard_normal((max(1, args.units // 100), DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    schema = args.keep or "bench_" + uuid.uuid4().hex[:12]
    joiner = "&" if "?" in args.postgres else "?"
    url = f"{args.postgres}{joiner}options=-csearch_path%3D{schema}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        fresh = conn.execute("SELECT to_regnamespace(%s) IS NULL", (schema,)).fetchone()[0]
        if fresh:
            conn.execute(f"CREATE SCHEMA {schema}")
    try:
        print(f"{args.units:,} {args.kind} unit vectors of {DIM} dimensions, schema {schema}; load average"
              f" {os.getloadavg()[0]:.1f}")
        built_matrix = None
        if fresh:
            built = time.perf_counter()
            built_matrix = build(url, args.units, args.kind, rng, centres)
            print(f"built in {time.perf_counter() - built:.0f} s")
        matrix = np.concatenate([vectors(args.kind, min(CHUNK, args.units - start), rng, centres)
                                 for start in range(0, args.units, CHUNK)]) if not fresh else built_matrix
        warm_index(url)
        compare(url, vectors(args.kind, args.queries, np.random.default_rng(36), centres), matrix, args.store_exact)
    finally:
        if not args.keep:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
