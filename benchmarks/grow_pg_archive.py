"""A larger PostgreSQL archive for `bench_server.py --scale`, grown in SQL from a smaller one.

    python benchmarks/grow_pg_archive.py --db postgresql://postgres@127.0.0.1:55432/postgres \\
        --from bench_server_10000 --to bench_server_100000 --factor 10

Writing 5,000,000 messages through `write_batch` on PostgreSQL takes about two hours on this shared machine
(10,000 sessions took 12 minutes), so the 100,000-session archive is the 10,000-session one's rows copied
`factor` times inside the server: copy r of a session has its ids suffixed `.rR` and its instants R hours later
(the shape `bench_server.session_events` gives its R-th session of a model-day), its labels, calls, messages,
outcomes and kept usage with it; contents and everything not of a session are copied once. The target schema is
made by the store first (every migration), so its triggers keep the usage by day, model, agent, run and source
as the copies are inserted, as they would for rows written by the store. Outcomes' search rows are not copied
(the scale run measures the usage routes only).
"""
from __future__ import annotations

import argparse
import sys
import time

import psycopg

SCOPED = ("sessions", "session_labels", "calls", "messages", "outcomes", "usage_rollup")
IDS = ("id", "session_id", "call_id", "parent_session_id", "parent_call_id")
INSTANTS = ("started_at", "ended_at", "at", "last_call_at")
SKIP = {"_reasonlog_migrations", "usage_daily", "latency_daily", "latency_buckets", "outcomes_search"}


def columns(conn, schema: str, table: str) -> list[tuple[str, bool]]:
    """(name, is an identity column) of a table, in order."""
    return [(r[0], r[1] == "YES") for r in conn.execute(
        "SELECT column_name, is_identity FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
        " ORDER BY ordinal_position", (schema, table))]


def mapped(name: str, r: int) -> str:
    if r and name in IDS:
        return f"{name} || '.r{r}'"
    if r and name in INSTANTS:
        return f"substr({name}, 1, 11) || lpad((substr({name}, 12, 2)::int + {r})::text, 2, '0') || substr({name}, 14)"
    return name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--from", dest="small", required=True)
    ap.add_argument("--to", dest="big", required=True)
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--resume", help="copy only these tables (comma-separated) into the existing target")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "src"))
    import reasonlog

    if not args.resume:
        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {args.big} CASCADE")
            conn.execute(f"CREATE SCHEMA {args.big}")
        reasonlog.open_store(f"{args.db}?options=-csearch_path%3D{args.big}").close()  # every migration, triggers
    with psycopg.connect(args.db) as conn:
        conn.execute(f"SET search_path TO {args.big}")  # the triggers' functions name their tables unqualified
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
                                             " AND table_type = 'BASE TABLE'", (args.small,))]
        t0 = time.perf_counter()
        order = [t for t in tables if t not in SKIP and t not in SCOPED] + list(SCOPED)
        for table in [t for t in order if not args.resume or t in args.resume.split(",")]:
            cols = columns(conn, args.small, table)
            for r in range(args.factor if table in SCOPED else 1):
                keep = [(n, i) for n, i in cols if not (i and table in SCOPED)]  # identities as the store gives them
                names = ", ".join(n for n, _ in keep)
                override = " OVERRIDING SYSTEM VALUE" if any(ident for _, ident in keep) else ""
                conn.execute(f"INSERT INTO {args.big}.{table} ({names}){override} SELECT"
                             f" {', '.join(mapped(n, r) for n, _ in keep)} FROM {args.small}.{table}")
                conn.commit()
            print(f"  {table} copied ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        conn.execute(f"ANALYZE {args.big}.usage_daily")
        conn.execute(f"ANALYZE {args.big}.latency_daily")
        conn.commit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
