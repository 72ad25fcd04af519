"""The routes issue 20 times, served by this tree and by another version of reasonlog at once, asked in turns.

    python benchmarks/bench_ab.py --baseline-src ../old/src                     # SQLite (bench_server.py's data)
    python benchmarks/bench_ab.py --baseline-src ../old/src --db postgresql://postgres@127.0.0.1:55432/postgres

On a machine shared with other work, two runs minutes apart differ by more than most changes do. Here both
versions serve the same database (bench_server.py's 10,000 sessions; on SQLite also bench_dashboard.py's
1,000-message session) from two `reasonlog serve` processes started together, and each request goes to one
then the other, so both meet the same load. Prints p50 and p95 of each, each server's CPU per request (its process,
from /proc) and the ratios this / baseline (below 1: this tree is faster).

    python benchmarks/bench_ab.py --src ../new/src --baseline-src ../old/src --baseline-db old-10000.db

`--src`: the code measured as "this" (default: this tree's); `--baseline-db`: a SQLite copy of the same archive for
the baseline's server, when the two versions' schemas differ (an older reasonlog refuses a newer schema).

    python benchmarks/bench_ab.py --baseline-src ../old/src --ingest 3

`--ingest N`: instead of the reads, ingestion: the medium workload (5,000 calls) recorded over HTTP
(`Recorder("http://…")`, this tree's client) into each version's server on a fresh SQLite file, N rounds, the two
in turns (the order swapped each round); prints each server's CPU per 1,000 calls and the ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_server import MODELS, cpu_seconds, days, free_port, targets  # noqa: E402

from reasonlog.model import stable_id  # noqa: E402


def serve(target, src: Path, *args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "REASONLOG_DB": str(target), "PYTHONPATH": str(src)}
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(port), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if urllib.request.urlopen(base + "/readyz", timeout=5).status == 200:
                return proc, base
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"reasonlog serve ({src}) did not become ready")


def fetch_ms(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        answer.read()
    return (time.perf_counter() - start) * 1000


def routes(sessions: int, sqlite: bool) -> dict[str, str]:
    day = days(sessions // len(MODELS) + 1)[sessions // len(MODELS) // 2]
    one_k = stable_id("2024-06-01T00:00:00Z", "bench-dashboard", 1000, None)
    return {"GET /healthz (floor)": "/healthz",
            "GET /v1/sessions?q= rare text": "/v1/sessions?" + urllib.parse.urlencode(
                {"q": f"model-07 on {day}: decision 3"}),
            "GET /v1/sessions?q=price (every session)": "/v1/sessions?q=price",
            "GET /usage (dashboard)": "/usage",
            **({"a 1,000-message session page": f"/sessions/{one_k}?limit=1000"} if sqlite else {})}


def ingest_rounds(rounds: int, sources: dict[str, Path]) -> None:
    """Server CPU (its process, /proc) per 1,000 calls of the medium workload sent over HTTP, versions in turns."""
    import tempfile

    import workload
    from bench_postgres import record

    calls = list(workload.generate("medium"))
    cpu: dict[str, list[float]] = {who: [] for who in sources}
    for n in range(rounds):
        for who in (list(sources) if n % 2 == 0 else list(sources)[::-1]):
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")  # the client's spill folder: the run's own
                proc, base = serve(Path(tmp) / "ingest.db", sources[who], "--no-embed")  # the writes alone
                try:
                    before = cpu_seconds([proc.pid])
                    record(base, calls)
                    cpu[who].append((cpu_seconds([proc.pid]) - before) * 1000 / len(calls))
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
            print(f"  round {n + 1} {who:<8} server CPU {cpu[who][-1] * 1000:6.1f} ms per 1,000 calls", flush=True)
    this, baseline = statistics.median(cpu["this"]), statistics.median(cpu["baseline"])
    print(f"  ingestion, {len(calls):,} calls: server CPU per 1,000 calls, median of {rounds}:"
          f" this {this * 1000:.1f} ms, baseline {baseline * 1000:.1f} ms, ratio {this / baseline:.2f}")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[94]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline-src", type=Path, required=True)
    ap.add_argument("--db", help="a PostgreSQL URL (default: SQLite in benchmarks/out)")
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--src", type=Path, default=REPO / "src", help="the code measured as this (default: this tree's)")
    ap.add_argument("--baseline-db", type=Path, help="SQLite: the baseline server's copy of the archive")
    ap.add_argument("--ingest", type=int, metavar="N", help="measure N rounds of ingestion instead of the reads")
    args = ap.parse_args(argv)
    if args.ingest:
        sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
        print(f"SQLite: ingestion over HTTP, {args.ingest} rounds in turns")
        ingest_rounds(args.ingest, {"this": args.src.resolve(), "baseline": args.baseline_src.resolve()})
        return 0
    target, fresh = targets(args.db, 10_000)
    servers = {"this": serve(target, args.src.resolve(), "--no-embed"),  # no background job beside the reads
               "baseline": serve(args.baseline_db or target, args.baseline_src.resolve(), "--no-embed")}
    try:
        print(f"{'PostgreSQL' if args.db else 'SQLite'}: {args.requests} requests each, in turns; ms")
        for name, path in routes(10_000, not args.db).items():
            for _proc, base in servers.values():
                for _ in range(3):
                    fetch_ms(base + path)  # warm-up (the page's first view is bench_dashboard.py's)
            took: dict[str, list[float]] = {"this": [], "baseline": []}
            cpu = {who: -cpu_seconds([proc.pid]) for who, (proc, _base) in servers.items()}
            for _ in range(args.requests):
                for who, (_proc, base) in servers.items():
                    took[who].append(fetch_ms(base + path))
            cpu = {who: (cpu[who] + cpu_seconds([proc.pid])) * 1000 / args.requests
                   for who, (proc, _base) in servers.items()}
            a, b = took["this"], took["baseline"]
            mid_a, mid_b = statistics.median(a), statistics.median(b)
            cpu_ratio = f"{cpu['this'] / cpu['baseline']:.2f}" if cpu["baseline"] else "-"
            print(f"  {name:<42} this p50 {mid_a:7.1f} p95 {p95(a):7.1f} CPU {cpu['this']:6.1f} | baseline p50"
                  f" {mid_b:7.1f} p95 {p95(b):7.1f} CPU {cpu['baseline']:6.1f} | ratio p50 {mid_a / mid_b:.2f}"
                  f" p95 {p95(a) / p95(b):.2f} CPU {cpu_ratio}")
    finally:
        for proc, _base in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
        if args.db:
            import psycopg

            schema = str(fresh).rsplit("%3D", 1)[1]  # targets() made it for an ingestion not run here
            with psycopg.connect(args.db, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                conn.execute(f"DROP SCHEMA IF EXISTS {schema}_local CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
