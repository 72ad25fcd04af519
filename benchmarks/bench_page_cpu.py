"""CPU time of the dashboard's session pages, against another version of reasonlog in the same run.

    python benchmarks/bench_page_cpu.py --baseline-src ../old/src --baseline-db ../old/benchmarks/out/server-10000.db

Wall time over HTTP (bench_dashboard.py) is what a person waits, but on a machine shared with other work it
swings with the load; the CPU time a page's data costs (`time.process_time` in one process) does much less.
Both databases are bench_dashboard.py's (its 1,000- and 50,000-message sessions), each written by its own
version (they may be the same file); this tree's is benchmarks/out/server-10000.db. A page is gathered and
rendered as the server does: once (its first view in the process, no Markdown rendered yet), then `--runs`
times; prints the first view and the p50 for both versions and their ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEASURE = """
import json, statistics, sys, time
import reasonlog
from reasonlog.model import stable_id
from reasonlog.server.dashboard import pages, render
store = reasonlog.open_store(sys.argv[1], read_only=True)
out = {}
for messages, window in ((1_000, None), (50_000, 400)):
    sid = stable_id("2024-06-01T00:00:00Z", "bench-dashboard", messages, window)
    limit = 0 if messages == 1_000 else pages.PAGE
    def shown():  # what the served page does: gather, then render the template
        return render.page("session.html", request=None, **pages.session(store, sid, "full", 0, limit))
    t = time.process_time()
    shown()  # the first view in this process: its Markdown rendered for the first time
    out[f"{messages} first"] = (time.process_time() - t) * 1000
    cpu = []
    for _ in range(int(sys.argv[2])):
        t = time.process_time()
        shown()
        cpu.append(time.process_time() - t)
    out[str(messages)] = statistics.median(cpu) * 1000
print(json.dumps(out))
"""


def measure(src: Path, db: Path, runs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(db), str(runs)], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-src", type=Path, required=True)
    ap.add_argument("--baseline-db", type=Path, required=True)
    ap.add_argument("--db", type=Path, default=REPO / "benchmarks" / "out" / "server-10000.db")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    base = measure(args.baseline_src, args.baseline_db, args.runs)
    this = measure(REPO / "src", args.db, args.runs)
    for key, name in (("1000 first", "a 1,000-message session, first view"), ("1000", "a 1,000-message session, again"),
                      ("50000", "first page of 50,000 messages")):
        ratio = this[key] / base[key]
        print(f"  {name:<36} {this[key]:7.1f} ms CPU  (baseline {base[key]:7.1f} ms, ratio {ratio:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
