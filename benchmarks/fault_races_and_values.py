"""Rows of docs/reliability.md's fault matrix for issue 30 items 4, 5 and 6b, on SQLite and PostgreSQL.

    python benchmarks/fault_races_and_values.py --db postgresql://postgres@127.0.0.1:55432/postgres
    python benchmarks/fault_races_and_values.py --json        # $REASONLOG_TEST_POSTGRES when no --db

- races: 4 writer processes (tests/writing_child.py) on sessions of their own, then on 6 sessions they all share,
  each call followed by a tool result and an outcome. Sent: every record the processes recorded; stored: the
  rows found; spilled and dropped: the recorders' own counts; duplicates: rows beyond one per tool use id
  (tool results) or per call (outcomes); rejected and batches retried event by event: `db status`.
- URL passwords: a connection URL with a password in every field of every event type (the planted events of
  tests/test_secrets_everywhere.py) written, spilled and replayed; passwords found anywhere a person can read.
- NaN: 100 calls, every tenth with `params={"t": nan}` (or an infinity), recorded in the default mode; stored,
  rejected (counted), and calls whose stored request differs from the one sent (`t` null).
Run against another tree's code with PYTHONPATH=<its src> (the writer processes inherit it).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
sys.path.insert(0, str(TESTS))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(REPO / "src"))

import reasonlog  # noqa: E402
from reasonlog.store import open_store  # noqa: E402

PROCESSES, SESSIONS, CALLS = 4, 10, 25


def rows_of(target, sql: str) -> list[tuple]:
    if isinstance(target, Path):
        with sqlite3.connect(target) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(target) as conn:
        return conn.execute(sql).fetchall()


def races(target, shared: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(REPO / "src")}
    args = ["--sessions", str(SESSIONS), "--calls", str(CALLS)] + (["--shared"] if shared else [])
    procs = [subprocess.Popen([sys.executable, str(TESTS / "writing_child.py"), "--db", str(target), "--tag", f"w{k}",
                               *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for k in range(PROCESSES)]
    stats = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode:
            raise SystemExit(err[-3000:])
        stats.append(json.loads(out.strip().splitlines()[-1])["stats"])
    status = open_store(target).status()
    (tools, tool_ids), = rows_of(target, "SELECT COUNT(*), COUNT(DISTINCT tool_use_id) FROM tool_results")
    (outcomes, outcome_calls), = rows_of(target, "SELECT COUNT(*), COUNT(DISTINCT call_id) FROM outcomes")
    (calls,), = rows_of(target, "SELECT COUNT(*) FROM calls")
    sent = 3 * PROCESSES * SESSIONS * CALLS
    return {"scenario": f"4 writer processes, {'shared' if shared else 'disjoint'} sessions", "sent": sent,
            "stored": calls + tools + outcomes, "spilled": sum(s["spilled_events"] for s in stats),
            "dropped": sum(s["dropped"] for s in stats), "duplicates": (tools - tool_ids) + (outcomes - outcome_calls),
            "rejected": status["rejected_records"], "isolated_batches": status.get("isolated_batches", "n/a")}


def url_passwords(target, folder: Path) -> dict:
    import test_secrets_everywhere as planted_module

    from reasonlog.capture.sinks import SpillingSink, StoreSink
    from reasonlog.redact import Redactor

    class Refusing:
        def write_batch(self, events, counters=None):
            raise OSError("the database is away")

    events, _ = planted_module.planted_events()
    planted = sum(planted_module.URL_PASSWORD in json.dumps(e.to_dict(), default=str) for e in events)
    sink = SpillingSink(Refusing(), folder / "spill", Redactor())
    sink.write_batch(events)
    spilled = b"".join(p.read_bytes() for p in (folder / "spill").iterdir())
    sink.inner = StoreSink(lambda: open_store(target))
    sink.replay()
    read = planted_module.everything_read(target)
    store = open_store(target)
    status = store.status()
    store.close()
    password = planted_module.URL_PASSWORD.encode()
    return {"scenario": "a connection URL's password in every field of every event type, spilled then replayed",
            "sent": len(events), "stored": len(events) - status["rejected_records"],
            "spilled": len(events), "dropped": 0, "duplicates": 0, "rejected": status["rejected_records"],
            "events_holding_it": planted,
            "passwords_found": spilled.count(password) + read.count(password)}


def nan_params(target) -> dict:
    rec = reasonlog.Recorder(target)
    s = rec.session(agent="nan")
    sent = []
    for i in range(100):
        t = (math.nan, math.inf, -math.inf)[i // 10 % 3] if i % 10 == 0 else i / 100
        sent.append(t)
        s.call(messages=[{"role": "user", "content": f"q{i}"}], params={"t": t}, response="ok")
    s.end()
    rec.close()
    store = open_store(target)
    calls = store.get_session(s.id)["calls"]
    replayed = [store.replay_call(c["id"]).get("t") for c in calls]
    status = store.status()
    store.close()
    finite = [t for t in sent if math.isfinite(t)]
    return {"scenario": "100 calls, 10 with NaN or an infinity in params, default mode", "sent": len(sent),
            "stored": len(calls), "spilled": rec.stats()["spilled_events"], "dropped": rec.stats()["dropped"],
            "duplicates": len(calls) - len({c["id"] for c in calls}), "rejected": status["rejected_records"],
            "replays_not_sent": sum(1 for t in replayed if t is None) + (replayed != finite)}


def targets(db: str | None, folder: Path):
    yield "SQLite", lambda name: folder / f"{name}.db", None
    if db:
        schemas: list[str] = []

        def pg(name: str) -> str:
            import psycopg

            schema = f"fault_{name}_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            schemas.append(schema)
            return f"{db}{'&' if '?' in db else '?'}options=-csearch_path%3D{schema}"
        yield "PostgreSQL", pg, schemas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", choices=["races", "urls", "nan"])
    args = ap.parse_args()
    out = []
    with tempfile.TemporaryDirectory(prefix="reasonlog-fault30-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("XDG_DATA_HOME", str(folder / "data"))
        for dialect, make, schemas in targets(args.db, folder):
            runs = {"races": [lambda m=make: races(m("disjoint"), False), lambda m=make: races(m("shared"), True)],
                    "urls": [lambda m=make, d=dialect: url_passwords(m("urls"), folder / f"urls-{d}")],
                    "nan": [lambda m=make: nan_params(m("nan"))]}
            try:
                for name, fns in runs.items():
                    if args.only in (None, name):
                        out += [{"dialect": dialect, **fn()} for fn in fns]
                        print(f"{dialect} {name}: done", file=sys.stderr)
            finally:
                if schemas:
                    import psycopg

                    with psycopg.connect(args.db, autocommit=True) as conn:
                        for schema in schemas:
                            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for row in out:
            extra = {k: v for k, v in row.items() if k not in ("dialect", "scenario", "sent", "stored", "spilled",
                                                               "dropped", "duplicates")}
            print(f"| {row['scenario']} | {row['dialect']} | {row['sent']:,} | {row['stored']:,} | {row['spilled']} |"
                  f" {row['dropped']} | {row['duplicates']} | {', '.join(f'{k} {v}' for k, v in extra.items())} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
