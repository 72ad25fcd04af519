"""PostgreSQL search of this code against a baseline's, on stores each built by its own code, in the same run.

    git -C /work/main archive main src | tar -x -C /tmp/base      # the baseline's package, e.g. main's
    python benchmarks/bench_pg_search.py --db postgresql://postgres@127.0.0.1:55432/postgres --base /tmp/base/src
    python benchmarks/bench_pg_search.py --base before=/tmp/before/src --base main=/tmp/base/src   # several

`--base` may be given more than once, each as NAME=PATH (a bare PATH is named `base`): each query is then asked of
every code in turn and this code's ratio to each baseline is printed.

Each code records the workload (`../shared/bench/workload.py`, `--size`) through a `Recorder` into a new schema
(as benchmarks/bench_postgres.py does), then VACUUM ANALYZE, and reports the schema's bytes ÷ unique content. Each
query is then asked of each store by its own code in a fresh process, alternating, `store.search(q, limit=None)`
five times (`--runs`) after one warm-up: the best wall time, the best client CPU and the best CPU of the store's
PostgreSQL backends (from /proc, found by application_name; 10 ms ticks), and the ratio this ÷ base. The schemas
are dropped at the end unless `--keep`; `--reuse SCHEMA,…,THIS_SCHEMA` (the bases' in order, this code's last) skips the
builds of the schemas it names (an empty name is built, and dropped unless `--keep`). `--query` replaces the five
queries; `--lists` asks `store.list_sessions(SessionFilter(text=q, limit=50))` (the page `/v1/sessions?q=` shows).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = ("checkout timeout", "the", "rror", "keyerror", "fallback path should")


def _url(db: str, schema: str) -> str:
    return f"{db}{'&' if '?' in db else '?'}options=-csearch_path%3D{schema}"


def _child_build(db: str, schema: str, size: str) -> dict:
    import psycopg

    sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
    import workload
    from bench_postgres import record  # its own `reasonlog` is the one already imported (the code measured)

    calls = list(workload.generate(size))
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    seconds = record(_url(db, schema), calls)
    with psycopg.connect(db, autocommit=True) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                             (schema,)).fetchall()]
        for table in tables:
            conn.execute(f'VACUUM ANALYZE {schema}."{table}"')
        total = sum(conn.execute("SELECT pg_total_relation_size(%s)", (f'{schema}."{t}"',)).fetchone()[0]
                    for t in tables)
        index = conn.execute("SELECT pg_total_relation_size(%s)", (f"{schema}.contents_search",)).fetchone()[0]
    unique = workload.truths(calls)["unique_content_bytes"]
    return {"durable_s": seconds, "bytes": total, "contents_search": index, "unique": unique}


def _child_search(db: str, schema: str, query: str, times: str = "5", lists: str = "") -> dict:
    import psycopg

    import reasonlog

    app = "bench_pg_search_" + schema
    os.environ["PGAPPNAME"] = app  # the store's connections, found by the monitor below
    store = reasonlog.open_store(_url(db, schema))
    everything = reasonlog.SessionFilter(limit=None)

    def ask() -> int:  # a search, or with `lists` a page of 50 sessions holding the text (`/v1/sessions?q=`)
        if lists:
            return len(store.list_sessions(reasonlog.SessionFilter(text=query, limit=50)))
        return len(store.search(query, everything, limit=None))
    with psycopg.connect(db, autocommit=True, application_name="bench_pg_search monitor") as monitor:
        def server() -> float:
            pids = monitor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchall()
            return sum(_cpu_of(pid) for (pid,) in pids)

        hits = ask()  # warm: connections, dictionaries
        runs = []
        for _ in range(int(times)):
            s0, c0, t0 = server(), time.process_time(), time.perf_counter()
            ask()
            runs.append((time.perf_counter() - t0, time.process_time() - c0, server() - s0))
    store.close()
    return {"hits": hits, "wall_ms": 1000 * min(r[0] for r in runs), "client_ms": 1000 * min(r[1] for r in runs),
            "server_ms": 1000 * min(r[2] for r in runs), "cpu_ms": 1000 * min(r[1] + r[2] for r in runs)}


def _cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(src: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child-src", src, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise SystemExit(f"{src} {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"), help="a PostgreSQL URL")
    ap.add_argument("--base", required=True, action="append",
                    help="a baseline's package directory (holding reasonlog/), as PATH or NAME=PATH; repeatable")
    ap.add_argument("--size", default="medium")
    ap.add_argument("--keep", action="store_true", help="keep the schemas (their names are printed)")
    ap.add_argument("--reuse", help="SCHEMA,…,THIS_SCHEMA built by an earlier --keep run (the bases' in order; an"
                                    " empty name is built anew)")
    ap.add_argument("--query", action="append", help="ask these queries instead of the default five; repeatable")
    ap.add_argument("--runs", type=int, default=5, help="times each query is asked of each store (the best counts)")
    ap.add_argument("--lists", action="store_true", help="ask for a page of 50 sessions holding each query instead")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db postgresql://… (or $REASONLOG_TEST_POSTGRES) is needed")
    codes = dict(b.split("=", 1) if "=" in b else ("base", b) for b in args.base)
    codes["this"] = str(REPO / "src")
    reused = dict(zip(codes, args.reuse.split(","), strict=True)) if args.reuse else {}
    schemas = {name: reused.get(name) or f"bench_search_{name}_{uuid.uuid4().hex[:8]}" for name in codes}
    built = [name for name in codes if not reused.get(name)]
    print("load average", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    try:
        for name in built:
            b = _run(codes[name], "build", args.db, schemas[name], args.size)
            print(f"{name:6} {schemas[name]}: durable in {b['durable_s']:.1f} s, {b['bytes']:,} B ="
                  f" {b['bytes'] / b['unique']:.2f} x unique (contents_search {b['contents_search']:,} B)")
        for query in args.query or QUERIES:
            got = {name: _run(src, "search", args.db, schemas[name], query, str(args.runs), "1" if args.lists else "")
                   for name, src in codes.items()}
            _report(query, got)
    finally:
        if not args.keep:
            import psycopg

            with psycopg.connect(args.db, autocommit=True) as conn:
                for name in built:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schemas[name]} CASCADE")
        else:
            print("schemas kept:", ",".join(schemas.values()))
    print("load average", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    return 0


def _report(query: str, got: dict[str, dict]) -> None:
    """One line a code: hits, best wall, best CPU (client + server), and this code's CPU ÷ that code's."""
    this = got["this"]
    print(f"{query!r}", flush=True)
    for name, run in got.items():
        ratio = "" if name == "this" else f"; this ÷ {name}: CPU {this['cpu_ms'] / max(run['cpu_ms'], 1.0):.2f} x," \
            f" wall {this['wall_ms'] / max(run['wall_ms'], 0.1):.2f} x"
        print(f"  {name:6} hits {run['hits']:5}: wall {run['wall_ms']:7.1f} ms; CPU client + server"
              f" {run['client_ms']:.0f} + {run['server_ms']:.0f} = {run['cpu_ms']:.0f} ms{ratio}", flush=True)


def _child(argv: list[str]) -> int:
    src, what, *rest = argv
    sys.path.insert(0, src)  # before anything imports reasonlog: the code measured
    sys.path.insert(1, str(REPO / "benchmarks"))
    import reasonlog  # noqa: F401  (bench_postgres puts this repository's src first; this one is already loaded)

    print(json.dumps(_child_build(*rest) if what == "build" else _child_search(*rest)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child-src":
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
