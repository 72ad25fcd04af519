"""The ClickHouse mirror (issue 36) against the record it mirrors, in the same run.

    python benchmarks/bench_mirror.py                                    # SQLite record, chdb mirror, 10,000 sessions
    python benchmarks/bench_mirror.py --mirror clickhouse://127.0.0.1:59000/bench_mirror   # a ClickHouse server
    python benchmarks/bench_mirror.py --db postgresql://postgres@127.0.0.1:55432/postgres  # a PostgreSQL record
    python benchmarks/bench_mirror.py --sessions 2000                    # a quicker, smaller run
    python benchmarks/bench_mirror.py --baseline-src ../main/src         # the push of another checkout first
    python benchmarks/bench_mirror.py --sessions 100000 --mirror chdb:///PATH --pushed   # a mirror pushed before

The record is bench_server.py's archive (trading model-days: 50 messages and 5 calls a session; 10,000 sessions
are 500,000 messages; built once and kept). Then, each in a process of its own as a user runs it:

1. `reasonlog mirror push TARGET --rebuild`: the whole archive into an empty mirror; calls/s over the push's wall
   time, and its CPU (the push process's; a ClickHouse server's own CPU is read from /proc when it runs here).
2. The mirror's bytes on disk (system.parts) over the record's unique content bytes (`db status`).
3. `reasonlog serve` twice, on the record alone and with `--mirror TARGET`: each growing route's p50/p95 over
   N requests and the server process's CPU seconds for them (utime + stime from /proc, the server engine's too),
   the ratio mirror / record beside each.
4. `--watch` under ingestion: a writer adds a session of 5 calls, started now, every 0.2 s while
   `mirror push --watch --every 1 --times 20` runs; the lag each push reports (at its end, now minus the newest
   instant it copied), that of the whole first push apart from the others' (the sessions written since). The
   written sessions are deleted afterwards (the archive stays what later runs reuse; a mirror they were pushed to is
   then behind it until pushed again).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_server import MODELS, OUT, Server, build, free_port, p, timed  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.model import CallRecorded, SessionStarted, Usage, stable_id  # noqa: E402

ROUTES = {"GET /usage (dashboard)": "/usage", "GET /v1/stats?by=day": "/v1/stats?by=day",
          "GET /v1/stats?by=model": "/v1/stats?by=model", "GET /v1/runs": "/v1/runs",
          "GET /v1/sessions (all sessions, newest 50)": "/v1/sessions",
          "GET /v1/sessions?model=model-07": "/v1/sessions?model=model-07",
          "GET /v1/sessions?label=date=D": "/v1/sessions?label=date=2024-06-01",
          "GET /v1/sessions?q= common word (every session)": "/v1/sessions?q=price",
          "GET /v1/sessions?q= rare text": "/v1/sessions?q=model-07+on+2024-06-01%3A+decision+3"}


def cli(target, *args: str, src: Path = REPO / "src") -> tuple[str, float]:
    """`reasonlog ARGS` on the record (reasonlog's code from `src`); its stdout and CPU seconds (user + system,
    children included)."""
    env = {**os.environ, "REASONLOG_DB": str(target), "PYTHONPATH": str(src)}
    before = os.times()
    done = subprocess.run([sys.executable, "-m", "reasonlog", *args], capture_output=True, text=True, env=env,
                          timeout=7200)
    after = os.times()
    if done.returncode:
        raise SystemExit(f"reasonlog {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def cpu_of(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def clickhouse_pid(mirror: str) -> int | None:
    """The ClickHouse server's process when it runs on this machine (its CPU is part of a mirrored answer)."""
    if not mirror.startswith("clickhouse://"):
        return None
    found = subprocess.run(["pgrep", "-f", "clickhouse-server"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def push(target, mirror: str, calls: int, src: Path = REPO / "src", label: str = "push") -> float:
    """The whole archive pushed into an emptied mirror; returns calls per CPU second (the push's and a local
    ClickHouse server's)."""
    ch, ch_cpu = clickhouse_pid(mirror), cpu_of(clickhouse_pid(mirror))
    t = time.perf_counter()
    out, cpu = cli(target, "mirror", "push", mirror, "--rebuild", "--json", src=src)
    wall = time.perf_counter() - t
    figures = json.loads(out)
    server = cpu_of(ch) - ch_cpu
    print(f"  {label}: {figures['sessions']:,} sessions, {figures['entries']:,} entries, {figures['messages']:,}"
          f" messages in {wall:.1f} s = {calls / wall:,.0f} calls/s wall; CPU {cpu:.1f} s in the push"
          + (f" + {server:.1f} s in the ClickHouse server" if ch else "")
          + f" = {calls / (cpu + server):,.0f} calls per CPU second")
    return calls / (cpu + server)


def sizes(target, mirror: str) -> None:
    status, _ = cli(target, "db", "status", "--json")
    unique = json.loads(status)["unique_content_bytes"]
    code = ("import sys; from reasonlog.mirror import engine; e = engine.connect(sys.argv[1]);"
            " print(e.query(\"SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '\""
            " + e.database + \"'\")[0][0])")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    held = int(subprocess.run([sys.executable, "-c", code, mirror], capture_output=True, text=True, env=env,
                              check=True).stdout)
    print(f"  mirror bytes on disk {held:,} / unique content {unique:,} = {held / unique:.2f}")


class Started(Server):
    """bench_server's `reasonlog serve`, given up to `READY_S` to answer /readyz: on a machine whose load is 20 on
    2 cores, the import of the server and the opening of a 5,000,000-message archive take more than its 30 s."""

    READY_S = 240.0

    def __init__(self, target, *args: str, src: str):
        self.port, self.base = (port := free_port()), f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(port), *args],
                                     env={**os.environ, "REASONLOG_DB": str(target), "PYTHONPATH": src},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.READY_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=30) as ready:
                    if ready.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise SystemExit(f"reasonlog serve {' '.join(args)} did not become ready in {self.READY_S:.0f} s")


def routes(target, mirror: str, n: int, src: str | None = None) -> None:
    ch = clickhouse_pid(mirror)
    results = {}
    for label, args in (("record", ()), ("mirror", ("--mirror", mirror))):
        server = Started(target, "--no-embed", *args, src=src or str(REPO / "src"))
        try:
            for name, path in ROUTES.items():
                before = cpu_of(server.proc.pid) + cpu_of(ch if label == "mirror" else None)
                ms = timed(server.base + path, n)
                cpu = cpu_of(server.proc.pid) + cpu_of(ch if label == "mirror" else None) - before
                results[(label, name)] = (p(ms, 50), p(ms, 95), cpu / (n + 5) * 1000)
        finally:
            server.stop()
    for name in ROUTES:
        (r50, r95, rcpu), (m50, m95, mcpu) = results[("record", name)], results[("mirror", name)]
        print(f"  {name:<44} record p50 {r50:7.1f} p95 {r95:7.1f} cpu {rcpu:6.1f} ms | mirror p50 {m50:7.1f}"
              f" p95 {m95:7.1f} cpu {mcpu:6.1f} ms | p95 ratio {m95 / r95:5.2f}  target p95 < 100 ms:"
              f" {'met' if m95 < 100 else 'NOT met'}")


def live_session(k: int) -> list:
    """A session of 5 calls started now (so the lag a push reports is how old the newest copied call is)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{time.time_ns() % 10**9 // 1000:06d}Z"
    sid = stable_id(now, "bench-watch", str(k))
    events: list = [SessionStarted(session_id=sid, started_at=now, agent="watch", run="watch", model=MODELS[0],
                                   provider="openai")]
    for c in range(5):
        events.append(CallRecorded(call_id=stable_id(now, "bench-watch", sid, c), session_id=sid, exchange_id=None,
                                   started_at=now, request={"model": MODELS[0], "messages": [
                                       {"role": "user", "content": f"watch {k}.{c}"}]},
                                   response={"role": "assistant", "content": f"ok {k}.{c}"}, model=MODELS[0],
                                   provider="openai", usage=Usage(input_tokens=100, output_tokens=5),
                                   latency_ms=100.0))
    return events


def watch_lag(target, mirror: str, seconds: float) -> None:
    """`mirror push --watch --every 1` while a writer adds one session (5 calls) every 0.2 s."""
    stop, written = threading.Event(), []

    def writer() -> None:
        store = reasonlog.open_store(target)
        k = 0
        while not stop.is_set():
            events = live_session(k)
            store.write_batch(events)
            written.append(events[0].session_id)
            k += 1
            time.sleep(0.2)
        store.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        out, _ = cli(target, "mirror", "push", mirror, "--watch", "--every", "1",
                     "--times", str(int(seconds)), "--json")
    finally:
        stop.set()
        thread.join()
        store = reasonlog.open_store(target)  # the archive stays what later runs reuse
        store.delete_sessions(sorted(set(written)))
        store.close()
    lines = [json.loads(line) for line in out.splitlines()]
    lags, pushed = [w["lag_s"] for w in lines], [w["sessions"] for w in lines]
    recent = [w["lag_s"] for w in lines if not w.get("whole", True)]  # between whole pushes: the recent sessions
    print(f"  --watch under ingestion: {len(lags)} pushes, sessions each {pushed}; lag s p50 {p(lags, 50):.1f}"
          f" max {max(lags):.1f}; whole pushes {len(lags) - len(recent)}, seconds each"
          f" {[w['seconds'] for w in lines if w.get('whole', True)]}"
          + (f"; the others' lag p50 {p(recent, 50):.1f} p95 {p(recent, 95):.1f} max {max(recent):.1f}" if recent
             else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="the record (default: a SQLite file kept in benchmarks/out/)")
    parser.add_argument("--mirror", help="the mirror TARGET (default: chdb in a fresh temporary folder)")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("-n", type=int, default=50, help="requests a route")
    parser.add_argument("--watch-seconds", type=float, default=20)
    parser.add_argument("--only-watch", action="store_true", help="push once, then measure --watch alone")
    parser.add_argument("--pushed", action="store_true", help="the --mirror given holds the record pushed already:"
                                                              " measure its routes without pushing again")
    parser.add_argument("--routes-src", metavar="PATH", help="another checkout's src/ to serve the routes with (the"
                                                             " code before, on a mirror of its own layout)")
    parser.add_argument("--baseline-src", metavar="PATH", help="another checkout's src/ whose push is measured"
                                                                " first, in the same run (before and after)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    target = args.db or OUT / f"server-{args.sessions}.db"
    mirror = args.mirror or f"chdb://{tempfile.mkdtemp(prefix='bench-mirror-')}"
    print(f"record {target if args.db is None else 'PostgreSQL'}, mirror {mirror.split('://')[0]},"
          f" {args.sessions:,} sessions ({args.sessions * 50:,} messages, {args.sessions * 5:,} calls)")
    build(target, args.sessions)
    if args.pushed:
        print(f"  mirror pushed before; load average {os.getloadavg()[0]:.1f}")
    elif args.baseline_src:  # the same push by another checkout's code first (before), into the same mirror
        before = push(target, mirror, args.sessions * 5, Path(args.baseline_src), "push (baseline code)")
        after = push(target, mirror, args.sessions * 5)
        print(f"  push calls per CPU second, this code / baseline: {after / before:.2f}")
    else:
        push(target, mirror, args.sessions * 5)
    if not args.only_watch:
        sizes(target, mirror)
        routes(target, mirror, args.n, args.routes_src)
        print(f"  load average at the end {os.getloadavg()[0]:.1f}")
    if args.watch_seconds:
        watch_lag(target, mirror, args.watch_seconds)


if __name__ == "__main__":
    main()
