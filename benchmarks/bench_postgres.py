"""PostgreSQL against SQLite on the same workload, in the same run: write time and storage.

    python benchmarks/bench_postgres.py --db postgresql://postgres@127.0.0.1:55432/postgres --size medium
    python benchmarks/bench_postgres.py --size medium --json     # $REASONLOG_TEST_POSTGRES when --db is absent

The workload is `../shared/bench/workload.py`, generated once before any timing. Each store gets the same
calls through a `Recorder` (background writer) and is timed from the first call until `flush()` returns.
On PostgreSQL the calls go into a new schema, dropped afterwards. Storage is every reasonlog table with its
indexes and TOAST (`pg_total_relation_size`) after a VACUUM, against the workload's unique content bytes
(each distinct message, system prompt and tool schema once, as canonical JSON), the figure issue 10 bounds at 2x.
CPU: the bench process's own (generation, recorder, writer) for each store, plus on PostgreSQL its backends'
(sampled from /proc by application_name): on a loaded machine the steadier figure.

`--trgm` also builds, in the same schema, a plain table of the unique messages' searchable text with a GIN
`gin_trgm_ops` index in one go (COPY, then CREATE INDEX), and prints its build time and bytes beside the store's
own index (`contents_search`, filled row by row as calls are written; the word index of schemas 6-12 and its
`search_words` vocabulary before migration 13), with the time of a rare and a common substring query in each.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import psycopg  # noqa: E402
import workload  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.store.postgres import TABLES  # noqa: E402


class BackendCPU:
    """CPU seconds of the PostgreSQL backends whose application_name is `name` (the store's connections, named
    through PGAPPNAME), sampled from /proc every 0.2 s while they live: the server's share of a write."""

    def __init__(self, db: str, name: str):
        self.db, self.name, self.seen, self.done = db, name, {}, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        with psycopg.connect(self.db, autocommit=True, application_name="bench_postgres sampler") as conn:
            while not self.done.wait(0.2):
                for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                                           (self.name,)).fetchall():
                    try:
                        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    self.seen[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> "BackendCPU":
        os.environ["PGAPPNAME"] = self.name
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        os.environ.pop("PGAPPNAME", None)

    @property
    def seconds(self) -> float:
        return sum(self.seen.values())


def record(target, calls) -> float:
    """Seconds from the first call until everything is durable."""
    rec = reasonlog.Recorder(target, max_queue=len(calls) * 3 + 1000)
    sessions, exchanges, last = {}, {}, {}
    for c in calls:
        last[c["session_id"]] = c["call_id"]
    t0 = time.perf_counter()
    for c in calls:
        sid = c["session_id"]
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                            labels={"user": c["user_id"]}, external_id=sid, started_at=c["ts_start"])
        if c["iteration"] == 0:
            exchanges[sid] = s.exchange(input=c["request"]["messages"][-1]["content"][0]["text"])
        resp = c["response"]
        s.call(request=c["request"], response={"role": "assistant", "content": resp["content"]}, model=c["model"],
               provider=c["provider"], stop_reason=resp["stop_reason"],
               usage=reasonlog.Usage.from_anthropic(resp["usage"]), latency_ms=c["latency_ms"],
               started_at=c["ts_start"], provider_message_id=resp["id"], raw=resp)
        if c["iteration"] == c["n_iterations"] - 1:
            exchanges.pop(sid).end()
        if c["call_id"] == last[sid]:
            sessions.pop(sid).end()
    assert rec.flush(timeout=None)
    took = time.perf_counter() - t0
    rec.close()
    return took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"), help="a PostgreSQL URL")
    ap.add_argument("--size", default="medium", choices=sorted(workload.SIZES))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--trgm", action="store_true", help="also measure pg_trgm against the word index")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db postgresql://… (or $REASONLOG_TEST_POSTGRES) is needed")
    calls = list(workload.generate(args.size))
    unique = workload.truths(calls)["unique_content_bytes"]

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        cpu = time.process_time()
        sqlite_s = record(db, calls)
        sqlite_cpu = time.process_time() - cpu
        store = reasonlog.open_store(db)
        store.checkpoint()
        sqlite_bytes = store.status()["bytes_on_disk"]
        store.close()

    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(args.db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{args.db}{'&' if '?' in args.db else '?'}options=-csearch_path%3D{schema}"
    trgm = None
    try:
        with BackendCPU(args.db, schema) as backends:  # the store closes its connections before this ends
            cpu = time.process_time()
            pg_s = record(url, calls)
            pg_cpu = time.process_time() - cpu
        if args.trgm:
            trgm = measure_trgm(url, calls)
        with psycopg.connect(url, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(f"VACUUM {table}")
            pg_bytes = sum(conn.execute("SELECT pg_total_relation_size(to_regclass(%s))", (t,)).fetchone()[0] or 0
                           for t in TABLES)
            by_table = {t: conn.execute("SELECT pg_total_relation_size(to_regclass(%s))", (t,)).fetchone()[0]
                        for t in TABLES}
    finally:
        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    result = {"size": args.size, "calls": len(calls), "unique_content_bytes": unique,
              "sqlite": {"durable_s": sqlite_s, "bytes": sqlite_bytes},
              "postgresql": {"durable_s": pg_s, "bytes": pg_bytes, "by_table": by_table},
              "pg_bytes_per_unique": pg_bytes / unique, "sqlite_bytes_per_unique": sqlite_bytes / unique,
              "pg_time_over_sqlite": pg_s / sqlite_s, "trgm": trgm, "sqlite_cpu_s": sqlite_cpu,
              "pg_cpu_s": {"client": pg_cpu, "server": backends.seconds},
              "pg_cpu_over_sqlite": (pg_cpu + backends.seconds) / sqlite_cpu}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.size}: {len(calls)} calls, unique content {unique:,} B")
    print(f"  SQLite      durable in {sqlite_s:6.2f} s, {sqlite_bytes:>13,} B = {sqlite_bytes / unique:.2f} x unique")
    print(f"  PostgreSQL  durable in {pg_s:6.2f} s, {pg_bytes:>13,} B = {pg_bytes / unique:.2f} x unique"
          f"  (target <= 2.0: {'met' if pg_bytes <= 2 * unique else 'NOT met'})")
    print(f"  PostgreSQL / SQLite write time: {pg_s / sqlite_s:.2f}")
    print(f"  CPU: SQLite {sqlite_cpu:.2f} s; PostgreSQL client {pg_cpu:.2f} s + server {backends.seconds:.2f} s;"
          f" ratio {result['pg_cpu_over_sqlite']:.2f}")
    for t, b in sorted(by_table.items(), key=lambda kv: -(kv[1] or 0))[:6]:
        print(f"    {t:<22} {b or 0:>13,} B")
    if trgm:
        words = by_table["contents_search"] + (by_table.get("search_words") or 0)
        print(f"  the store's index (contents_search) {words:,} B = {words / unique:.2f} x unique")
        print(f"  pg_trgm: text {trgm['text_bytes']:,} B + GIN {trgm['index_bytes']:,} B ="
              f" {(trgm['text_bytes'] + trgm['index_bytes']) / unique:.2f} x unique; built in {trgm['build_s']:.2f} s")
        for name, (ms_words, ms_trgm, n) in trgm["queries"].items():
            print(f"    {name:<28} the store {ms_words:7.1f} ms, plain pg_trgm {ms_trgm:7.1f} ms ({n} texts)")
    return 0


QUERIES = {"rare: 'checkout timeout'": "checkout timeout", "common: 'the'": "the", "word part: 'rror'": "rror",
           "some: 'keyerror'": "keyerror", "phrase: 'fallback path should'": "fallback path should"}


def measure_trgm(url: str, calls: list) -> dict:
    """pg_trgm over the unique messages' searchable text, beside the word index of the same schema."""
    from bench_fts import unique_texts  # the same text the store indexes

    texts = unique_texts(calls)
    store = reasonlog.open_store(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")  # where the store installs it
        conn.execute("CREATE TABLE trgm_texts (rowid BIGINT PRIMARY KEY, text TEXT NOT NULL)")
        t0 = time.perf_counter()
        with conn.cursor().copy("COPY trgm_texts (rowid, text) FROM STDIN") as copy:
            for row in texts:
                copy.write_row(row)
        conn.execute("CREATE INDEX trgm_texts_gin ON trgm_texts USING gin (text public.gin_trgm_ops)")
        build = time.perf_counter() - t0
        conn.execute("VACUUM ANALYZE trgm_texts")
        size = conn.execute("SELECT pg_relation_size('trgm_texts'), pg_total_relation_size('trgm_texts'),"
                            " pg_relation_size('trgm_texts_gin')").fetchone()
        queries = {}
        everything = reasonlog.SessionFilter(limit=None)
        for name, needle in QUERIES.items():
            ms_words = _best(lambda needle=needle: store.search(needle, everything, limit=None))
            n = conn.execute("SELECT count(*) FROM trgm_texts WHERE text LIKE %s", (f"%{needle}%",)).fetchone()[0]
            ms_trgm = _best(lambda needle=needle: conn.execute("SELECT rowid FROM trgm_texts WHERE text LIKE %s",
                                                               (f"%{needle}%",)).fetchall())
            queries[name] = (ms_words, ms_trgm, n)
    store.close()
    return {"text_bytes": size[1] - size[2], "index_bytes": size[2], "build_s": build, "queries": queries}


def _best(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return min(times)


if __name__ == "__main__":
    sys.exit(main())
