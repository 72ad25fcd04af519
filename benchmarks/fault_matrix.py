"""The fault matrix of docs/reliability.md: each fault on purpose, and what survived it.

    python benchmarks/fault_matrix.py            # a Markdown table on stdout
    python benchmarks/fault_matrix.py --json     # the rows as JSON
    python benchmarks/fault_matrix.py --postgres postgresql://…   # also the rows a PostgreSQL database can take

Runs the scenarios of tests/test_fault_matrix.py (tests/faultkit.py) with more records, in a temporary
folder. The read-only and full-disk rows need root (chattr, bind and tmpfs mounts) and are left out
otherwise. Exit status 0 only when every row lost nothing and duplicated nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

import faultkit  # noqa: E402

COLUMNS = ("scenario", "written", "found", "lost", "duplicates", "wrong_replays", "longest_wait_ms", "integrity",
           "note")


def scenarios(root: bool):
    yield "many", lambda tmp: faultkit.many_processes(tmp, processes=8, recorders=2, calls=250)
    yield "lock", lambda tmp: faultkit.lock_held(tmp, hold_s=3.0, calls=300, rate=50, busy_ms=100)
    if root:
        yield "rofile", lambda tmp: faultkit.read_only_file(tmp, calls=300, rate=100)
        yield "rodir", lambda tmp: faultkit.read_only_folder(tmp, calls=300, rate=100)
    if faultkit.can_mount_tmpfs():
        yield "full", lambda tmp: faultkit.full_disk(tmp, calls=400, rate=200, size_kib=3072)
    for rate in (50.0, 0.0):
        yield f"kill{rate:g}", lambda tmp, rate=rate: faultkit.killed(tmp, rate=rate, kill_after_s=2.0)[0]
    yield from on_any_database(None)


def on_any_database(db: str | None):
    """The scenarios that run on the database given (None: a SQLite file in the scenario's folder)."""
    yield "pool", lambda tmp: faultkit.forked_pool(tmp, workers=4, calls=1250, db=db)
    yield "close", lambda tmp: faultkit.close_in_flight(tmp, calls=300, db=db)


def on_postgres(url: str):
    """The scenarios a PostgreSQL database can take, each in a schema of its own, dropped afterwards."""
    os.environ["REASONLOG_TEST_POSTGRES"] = url
    import conftest

    def in_schema(scenario):
        def run(tmp):
            schema = conftest.postgres_schema()
            db = next(schema)
            try:
                out = scenario(tmp, db)
            finally:
                next(schema, None)
            out.scenario += " (PostgreSQL)"
            return out
        return run

    yield "pg-many", in_schema(lambda tmp, db: faultkit.many_processes(tmp, processes=4, recorders=2, calls=250,
                                                                       db=db))
    yield "pg-lock", in_schema(lambda tmp, db: faultkit.lock_held(tmp, hold_s=3.0, calls=300, rate=50, busy_ms=100,
                                                                  db=db))
    yield "pg-pool", in_schema(lambda tmp, db: faultkit.forked_pool(tmp, workers=4, calls=1250, db=db))
    yield "pg-close", in_schema(lambda tmp, db: faultkit.close_in_flight(tmp, calls=300, db=db))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--postgres", metavar="URL", help="also run the PostgreSQL rows on this server")
    parser.add_argument("--only", nargs="*", metavar="NAME", help="run only these scenarios (e.g. pool close)")
    args = parser.parse_args()
    rows = []
    chosen = list(scenarios(os.geteuid() == 0)) + (list(on_postgres(args.postgres)) if args.postgres else [])
    for name, run in chosen:
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"reasonlog-fault-{name}-") as tmp:
            out = run(Path(tmp))
        rows.append(out.row())
        print(f"{out.scenario}: written {out.written}, lost {out.lost}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for row in rows:
            print("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    bad = [r for r in rows if r["duplicates"] or r["wrong_replays"] or (r["lost"] and "SIGKILL" not in r["scenario"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
