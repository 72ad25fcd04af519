"""What keeping usage by day, model, agent, run and source (migration 18's triggers) costs the write path.

    python benchmarks/bench_write_cost.py --base /path/to/a/checkout/of/main
    python benchmarks/bench_write_cost.py --base /path/to/main --db postgresql://postgres@127.0.0.1:55432/postgres

Each round writes the same 1,000 trading sessions (`bench_server.session_events`: 5 calls with a latency each,
50 messages, 2 outcomes; 5,000 calls) through `store.write_batch` into a fresh database, once with this tree's
code and once with the `--base` tree's, in turn, each in a process of its own. The figure is CPU seconds: the
writing process's, plus on PostgreSQL its backend's (where the triggers run), read from /proc; the machine is
shared, so wall time would measure the neighbours. Prints each round, the medians and this tree's ratio to base's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import os, sys, time
import reasonlog  # the tree's (PYTHONPATH), before bench_server puts this tree's src first
sys.path.insert(0, {bench!r})
import bench_server as b
from bench_server import cpu_seconds
print(reasonlog.__file__)
target = sys.argv[1]
store = reasonlog.open_store(target)
backend = []
if target.startswith("postgresql"):
    backend = [store._conn.execute("SELECT pg_backend_pid()").fetchone()[0]]
calendar, batch = b.days(b.DAYS), []
events = [b.session_events(b.MODELS[k % len(b.MODELS)], calendar[k // len(b.MODELS) % b.DAYS], k, 0)
          for k in range(int(sys.argv[2]))]
before, backend_before = time.process_time(), cpu_seconds(backend)
for one in events:
    batch += one
    if len(batch) >= 2000:
        store.write_batch(batch)
        batch = []
store.write_batch(batch)
print(time.process_time() - before + cpu_seconds(backend) - backend_before)
store.close()
"""


def fresh(db: str | None, folder: Path, n: int) -> str:
    if not db:
        return str(folder / f"w{n}.db")
    import psycopg

    schema = "bench_write_" + uuid.uuid4().hex[:8]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{db}{'&' if '?' in db else '?'}options=-csearch_path%3D{schema}"


def drop(db: str | None, target: str) -> None:
    if db:
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {target.rsplit('%3D', 1)[1]} CASCADE")


def run(tree: Path, target: str, sessions: int) -> float:
    """CPU seconds of one round written with `tree`'s code (its schema made first, outside the timing)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    subprocess.run([sys.executable, "-c", "import sys, reasonlog; reasonlog.open_store(sys.argv[1]).close()", target],
                   env=env, check=True)
    out = subprocess.run([sys.executable, "-c", CHILD.format(bench=str(HERE)), target, str(sessions)], env=env,
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="a checkout of the code to compare with (e.g. a worktree of main)")
    ap.add_argument("--db", help="a PostgreSQL URL (default: SQLite files in a temporary folder)")
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    trees = {"this tree": HERE.parent, "base": Path(args.base).resolve()}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, tree in (trees.items() if r % 2 == 0 else reversed(trees.items())):
                target = fresh(args.db, Path(tmp), len(cpu[name]) + 10 * r + (name == "base"))
                try:
                    cpu[name].append(run(tree, target, args.sessions))
                finally:
                    drop(args.db, target)
                print(f"  round {r + 1}: {name:<9} {cpu[name][-1]:6.2f} s CPU  (load {os.getloadavg()[0]:.1f})")
    mine, base = (statistics.median(cpu[n]) for n in trees)
    print(f"{'PostgreSQL' if args.db else 'SQLite'}: {args.sessions:,} sessions ({args.sessions * 5:,} calls) written:"
          f" this tree {mine:.2f} s CPU, base {base:.2f} s CPU (medians of {args.rounds}); ratio {mine / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
