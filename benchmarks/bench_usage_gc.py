"""`/usage` in one served process, with and without its long-lived objects frozen out of the collector (issue 36).

    python benchmarks/bench_usage_gc.py --db ARCHIVE.db [--mirror chdb:///PATH] [-n 60]

The app `reasonlog serve` builds (`serve_app`, over the record, `--mirror` as `serve --mirror` gives it), driven by
a `TestClient` in a fresh process for each mode: `settle_heap=False` (session 12's server) and `True` (the server
since, server/heap.py). Each process answers `/usage` 3 times to warm up, then N times; it prints the wall p50 / p95 /
max of those and each full (oldest-generation) collection that ran inside one, timed by a `gc.callbacks` hook. The
ratio of the two p95s is the figure; both come from the same run. The archive is bench_server.py's (5,000,000
messages: `--scale 100000`), the mirror bench_mirror.py's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, json, sys, time
from fastapi.testclient import TestClient
from reasonlog.server.app import serve_app

db, mirror, settle, n = sys.argv[1], sys.argv[2] or None, sys.argv[3] == "1", int(sys.argv[4])
full, started = [], {}
def timed(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            started["at"] = time.perf_counter()
        else:
            full.append(time.perf_counter() - started["at"])
gc.callbacks.append(timed)
with TestClient(serve_app(db, mirror=mirror, settle_heap=settle)) as client:
    for _ in range(3):
        assert client.get("/usage").status_code == 200
    full.clear()
    walls = []
    for _ in range(n):
        t = time.perf_counter()
        assert client.get("/usage").status_code == 200
        walls.append(time.perf_counter() - t)
print(json.dumps({"walls": walls, "full": full}))
"""


def measure(db: str, mirror: str | None, settle: bool, n: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", CHILD, db, mirror or "", "1" if settle else "0", str(n)],
                          capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="the record (bench_server.py's archive)")
    parser.add_argument("--mirror", help="a mirror TARGET, as `serve --mirror` takes it")
    parser.add_argument("-n", type=int, default=60, help="requests measured in each mode")
    args = parser.parse_args()
    print(f"/usage over {args.db}{' with --mirror ' + args.mirror if args.mirror else ''}, {args.n} requests a mode,"
          f" load average {os.getloadavg()[0]:.1f}")
    p95 = {}
    for settle in (False, True):
        got = measure(args.db, args.mirror, settle, args.n)
        walls, full = got["walls"], got["full"]
        p95[settle] = pct(walls, 0.95)
        print(f"  settle_heap={settle!s:<5}  p50 {pct(walls, 0.5):6.1f}  p95 {p95[settle]:6.1f}"
              f"  max {pct(walls, 1):6.1f} ms | full collections inside the requests: {len(full)},"
              f" {' '.join(f'{f * 1000:.1f}' for f in full) or '-'} ms")
    print(f"  p95 settled / not: {p95[True] / p95[False]:.2f}; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
