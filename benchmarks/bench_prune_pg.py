"""Removing a month on PostgreSQL: `reasonlog prune` (batched deletes) against dropping a month's partition.

    python benchmarks/bench_prune_pg.py --db postgresql://postgres@127.0.0.1:55432/postgres
    python benchmarks/bench_prune_pg.py --size small --json      # $REASONLOG_TEST_POSTGRES when --db is absent

The medium workload (`../shared/bench/workload.py`: 200 sessions, 5,000 calls) is recorded into a new schema with
its sessions spread over six months (session k moved by 30 x (k mod 6) days; each ends at its last call). Then, in
the same run:

- `partition drop`: `messages` and `calls` copied into tables partitioned by month of their instant (`at`,
  `started_at`), and the oldest month's two partitions dropped; the baseline. It removes those rows only: not the
  month's contents, search rows, tool results, outcomes, usage or units, which need the per-content question anyway.
- `plain delete`: the same rows deleted from unpartitioned copies with the store's indexes.
- `prune`: `PostgresStore.prune` of the oldest month, 100 sessions a transaction (everything of those sessions and
  the contents only they named, with their trigram rows).
- `shared`: of the contents the oldest month's sessions name, those another month names too: what dedup keeps
  from being dropped with a partition.

Each figure is the wall time and the CPU time of the PostgreSQL backend that did it (from /proc, same machine),
with the machine's load average (the CPU in clock ticks of 10 ms); ratios are of wall time to `partition drop`
measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import psycopg  # noqa: E402
import workload  # noqa: E402
from bench_postgres import record  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.store.maintenance import PruneCriteria  # noqa: E402

MONTHS = 6
TICKS = os.sysconf("SC_CLK_TCK")


def spread(calls: list[dict]) -> tuple[list[dict], str]:
    """The calls with session k moved by 30 x (k mod MONTHS) days; and the instant before which the oldest
    month's sessions (and only they) were last active."""
    order = {sid: k for k, sid in enumerate(dict.fromkeys(c["session_id"] for c in calls))}
    moved = []
    for c in calls:
        shift = timedelta(days=30 * (order[c["session_id"]] % MONTHS))
        at = datetime.fromisoformat(c["ts_start"].replace("Z", "+00:00")) + shift
        moved.append({**c, "ts_start": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"})
    return moved, (workload.EPOCH + timedelta(days=25)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def backend_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def timed(pid: int, fn) -> dict:
    cpu, t0 = backend_cpu_s(pid), time.perf_counter()
    fn()
    return {"wall_ms": (time.perf_counter() - t0) * 1000, "backend_cpu_ms": (backend_cpu_s(pid) - cpu) * 1000,
            "load": os.getloadavg()[0]}


def copies(conn: psycopg.Connection, cut: str) -> None:
    """Partitioned and plain copies of messages and calls (with the store's indexes on the plain ones)."""
    first = workload.EPOCH.replace(day=1)
    for table, column in (("messages", "at"), ("calls", "started_at")):
        conn.execute(f"CREATE TABLE {table}_parted (LIKE {table}) PARTITION BY RANGE ({column})")
        for m in range(MONTHS + 2):
            lo = (first + timedelta(days=31 * m)).replace(day=1)
            hi = (first + timedelta(days=31 * (m + 1))).replace(day=1)
            conn.execute(f"CREATE TABLE {table}_p{m} PARTITION OF {table}_parted FOR VALUES FROM"
                         f" ('{lo:%Y-%m-%d}') TO ('{hi:%Y-%m-%d}')")
        conn.execute(f"INSERT INTO {table}_parted SELECT * FROM {table}")
        conn.execute(f"CREATE TABLE {table}_plain (LIKE {table} INCLUDING INDEXES)")
        conn.execute(f"INSERT INTO {table}_plain SELECT * FROM {table}")
    conn.execute("CREATE INDEX ON calls_plain USING gin"
                 " ((context_json::jsonb || COALESCE(tools_json::jsonb, '[]'::jsonb)) jsonb_path_ops)")
    conn.execute("ANALYZE")


def shared_contents(conn: psycopg.Connection, cut: str) -> tuple[int, int]:
    """(contents the oldest month's sessions name, of which another month's sessions name too)."""
    named = ("SELECT m.session_id, m.content_id AS id FROM messages m"
             " UNION SELECT session_id, system_id FROM calls WHERE system_id IS NOT NULL"
             " UNION SELECT session_id, response_id FROM calls WHERE response_id IS NOT NULL"
             " UNION SELECT session_id, (j #>> '{}')::bigint FROM calls, jsonb_array_elements("
             "context_json::jsonb || COALESCE(tools_json::jsonb, '[]'::jsonb)) j WHERE jsonb_typeof(j) = 'number'")
    old = "(SELECT id FROM sessions WHERE started_at < %s)"
    row = conn.execute(f"WITH n AS ({named}) SELECT COUNT(DISTINCT id),"
                       f" COUNT(DISTINCT id) FILTER (WHERE id IN (SELECT id FROM n WHERE session_id NOT IN {old}))"
                       f" FROM n WHERE session_id IN {old}", (cut, cut)).fetchone()
    return row[0], row[1]


def measure(db: str, size: str) -> dict:
    calls, cut = spread(list(workload.generate(size)))
    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{db}{'&' if '?' in db else '?'}options=-csearch_path%3D{schema}"
    try:
        record(url, calls)
        with psycopg.connect(url, autocommit=True) as conn:
            # The recorder ended each session when it was recorded (now): it ended at its last call.
            conn.execute("UPDATE sessions s SET ended_at = (SELECT MAX(started_at) FROM calls c WHERE"
                         " c.session_id = s.id)")
            copies(conn, cut)
            named, shared = shared_contents(conn, cut)
            pid = conn.info.backend_pid
            rows = conn.execute("SELECT (SELECT COUNT(*) FROM messages_p0), (SELECT COUNT(*) FROM calls_p0)").fetchone()
            drop = timed(pid, lambda: [conn.execute(f"DROP TABLE {t}_p0") for t in ("messages", "calls")])
            delete = timed(pid, lambda: [conn.execute(f"DELETE FROM {t}_plain WHERE {c} < '{cut[:10]}'")
                                         for t, c in (("messages", "at"), ("calls", "started_at"))])
        store = reasonlog.open_store(url)
        try:
            pid = store._conn.info.backend_pid  # the backend the prune's statements run in (a benchmark's look inside)
            done: dict = {}
            prune = timed(pid, lambda: done.update(store.prune(PruneCriteria(before=cut))))
        finally:
            store.close()
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return {"size": size, "calls": len(calls), "month": {"sessions": done["sessions"], "messages": rows[0],
                                                          "calls": rows[1], "contents_removed": done["contents"]},
            "contents_named": named, "contents_shared_with_other_months": shared,
            "partition_drop": drop, "plain_delete": delete, "prune": prune}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"), help="a PostgreSQL URL")
    ap.add_argument("--size", default="medium", choices=sorted(workload.SIZES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db postgresql://… (or $REASONLOG_TEST_POSTGRES) is needed")
    r = measure(args.db, args.size)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    m, base = r["month"], r["partition_drop"]["wall_ms"]
    print(f"{args.size}: {r['calls']} calls over {MONTHS} months; the oldest month: {m['sessions']} sessions,"
          f" {m['calls']} calls, {m['messages']} messages, {m['contents_removed']} contents removed")
    print(f"  contents its sessions name: {r['contents_named']}, of which other months name too:"
          f" {r['contents_shared_with_other_months']}")
    for name in ("partition_drop", "plain_delete", "prune"):
        f = r[name]
        print(f"  {name:<15} wall {f['wall_ms']:8.1f} ms ({f['wall_ms'] / base:5.1f} x drop)  backend CPU"
              f" {f['backend_cpu_ms']:6.0f} ms (in {1000 // TICKS} ms ticks)  load {f['load']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
