"""HTTP ingestion with `reasonlog serve --workers 1, 2, 4` on PostgreSQL, each against in-process writing, same run.

    python benchmarks/bench_ingest.py --db postgresql://postgres@127.0.0.1:55432/postgres
    python benchmarks/bench_ingest.py --size small --workers 1,4            # a quicker run
    python benchmarks/bench_ingest.py --json                                # $REASONLOG_TEST_POSTGRES when no --db

The workload is `../shared/bench/workload.py` (medium: 200 sessions, 5,000 calls), with a tool result recorded
for every tool_use of each response (the results the next request carries) and an outcome at the end of each
exchange, so that batches write the record tables concurrent writers used to trip over (issue 30 item 4). Its
sessions are dealt round-robin to `--recorders` processes (4), started with `spawn` so that each imports reasonlog
itself; each generates the workload before a common start, records its share through a `Recorder` (background
writer) and flushes. The time is from the start until the last recorder's `flush()` returned: everything durable.

Rows: in-process (each recorder writes to PostgreSQL itself), then `reasonlog serve --workers N --no-embed` on
127.0.0.1 for each N (each recorder sends to it, `Recorder("http://…")`). Each row gets a fresh schema and is
checked afterwards: every call, tool result and outcome stored once, nothing rejected, no batch retried event by
event (`db status` `isolated_batches`). The ratio is a row's rate over in-process's in the same run.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_BENCH = REPO / ".." / "shared" / "bench"


def _paths() -> None:
    for p in (str(SHARED_BENCH), str(REPO / "src")):
        if p not in sys.path:
            sys.path.insert(0, p)


_paths()


def share(size: str, k: int, n: int) -> list[dict]:
    """The calls of every n-th session of the workload, from the k-th, in the workload's order."""
    import workload

    calls = list(workload.generate(size))
    order = list(dict.fromkeys(c["session_id"] for c in calls))
    mine = set(order[k::n])
    return [c for c in calls if c["session_id"] in mine]


def expected(size: str) -> dict[str, int]:
    """What the whole workload stores: calls, tool results and outcomes."""
    import workload

    calls = list(workload.generate(size))
    tools = sum(1 for c in calls for b in c["response"]["content"] if b.get("type") == "tool_use")
    exchanges = sum(1 for c in calls if c["iteration"] == c["n_iterations"] - 1)
    return {"calls": len(calls), "tool_results": tools, "outcomes": exchanges}


def record(rec, calls: list[dict]) -> None:
    """Record the calls as an agent loop would: sessions, exchanges, calls, tool results, an outcome per exchange."""
    import reasonlog

    sessions, exchanges, last = {}, {}, {}
    for c in calls:
        last[c["session_id"]] = c["call_id"]
    for c in calls:
        sid = c["session_id"]
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                            labels={"user": c["user_id"]}, external_id=sid, started_at=c["ts_start"])
        if c["iteration"] == 0:
            exchanges[sid] = s.exchange(input=c["request"]["messages"][-1]["content"][0]["text"])
        resp = c["response"]
        call_id = s.call(request=c["request"], response={"role": "assistant", "content": resp["content"]},
                         model=c["model"], provider=c["provider"], stop_reason=resp["stop_reason"],
                         usage=reasonlog.Usage.from_anthropic(resp["usage"]), latency_ms=c["latency_ms"],
                         started_at=c["ts_start"], provider_message_id=resp["id"], raw=resp)
        for block in resp["content"]:
            if block.get("type") == "tool_use":
                s.tool_result(block["id"], f"ran {block['name']}", name=block["name"], input=block["input"],
                              at=c["ts_end"])
        if c["iteration"] == c["n_iterations"] - 1:
            s.outcome("exchange_done", {"iterations": c["n_iterations"]}, call_id=call_id, at=c["ts_end"])
            exchanges.pop(sid).end()
        if c["call_id"] == last[sid]:
            sessions.pop(sid).end()


def recorder_process(target: str, size: str, k: int, n: int, ready, start, out) -> None:
    _paths()
    import reasonlog

    calls = share(size, k, n)
    rec = reasonlog.Recorder(target, max_queue=len(calls) * 4 + 1000)
    ready.release()
    start.wait()
    record(rec, calls)
    assert rec.flush(timeout=None)
    done = time.perf_counter()
    stats = rec.stats()
    rec.close()
    out.put((k, done, stats["rejected"], stats["dropped"], stats["spilled_events"]))


def run_recorders(target: str, size: str, n: int) -> tuple[float, list]:
    """Seconds from a common start until every recorder's flush returned; each one's (rejected, dropped, spilled)."""
    ctx = mp.get_context("spawn")
    ready, start, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=recorder_process, args=(target, size, k, n, ready, start, out)) for k in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join(60)
    return max(r[1] for r in results) - t0, [r[2:] for r in results]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, target: str, workers: int):
        import urllib.request

        self.port = free_port()
        env = {**os.environ, "REASONLOG_DB": target}
        self.proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(self.port),
                                      "--workers", str(workers), "--no-embed"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(600):
            try:
                if urllib.request.urlopen(self.base + "/readyz", timeout=5).status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("reasonlog serve did not become ready")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server's workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


class CPUSampler:
    """CPU used by the server's processes and by the PostgreSQL backends of the row's connections (those whose
    application_name is the row's, set through PGAPPNAME), sampled every 0.2 s: a process's last sample stands
    for it once it is gone (a recorder's backend ends when it closes)."""

    def __init__(self, db: str, app: str, server_pid: int | None):
        import threading

        import psycopg

        self.conn = psycopg.connect(db, autocommit=True)
        self.app, self.server_pid = app, server_pid
        self.first: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.stop_event = threading.Event()
        self.sample(at_start=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self, at_start: bool = False) -> None:
        """A process seen at the start counts from then; one seen later (a new connection) from its birth."""
        pids = [("pg", r[0]) for r in self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.app,))]
        pids += [("server", p) for p in tree(self.server_pid)] if self.server_pid else []
        for key in pids:
            used = cpu_s(key[1])
            if used is not None:
                self.first.setdefault(key, used if at_start else 0.0)
                self.last[key] = used

    def run(self) -> None:
        while not self.stop_event.wait(0.2):
            self.sample()

    def finish(self) -> dict[str, float]:
        self.sample()
        self.stop_event.set()
        self.thread.join()
        self.conn.close()
        used = {"server": 0.0, "pg": 0.0}
        for key, value in self.last.items():
            used[key[0]] += value - self.first[key]
        return {"server_cpu_s": round(used["server"], 2), "pg_cpu_s": round(used["pg"], 2)}


def schema_url(db: str, schema: str) -> str:
    return f"{db}{'&' if '?' in db else '?'}options=-csearch_path%3D{schema}"


def stored(url: str) -> dict[str, int]:
    import reasonlog

    store = reasonlog.open_store(url)
    try:
        counts, status = store.record_counts(), store.status()
    finally:
        store.close()
    return {"calls": counts["calls"], "tool_results": counts["tool_results"], "outcomes": counts["outcomes"],
            "rejected": status["rejected_records"], "isolated_batches": status["isolated_batches"]}


def row(db: str, size: str, recorders: int, workers: int | None) -> dict:
    """One configuration in a fresh schema: in-process when `workers` is None, else through a server."""
    import psycopg

    import reasonlog

    schema = "bench_ingest_" + uuid.uuid4().hex[:10]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = schema_url(db, schema)
    reasonlog.open_store(url).close()  # migrated before the clock starts, as a running server's database is
    os.environ["PGAPPNAME"] = schema  # the row's connections, in the server and in the recorders alike
    server = None
    try:
        if workers is not None:
            server = Server(url, workers)
        sampler = CPUSampler(db, schema, server.proc.pid if server else None)
        seconds, per = run_recorders(server.base if server else url, size, recorders)
        used = sampler.finish()
        if server:
            server.stop()
            server = None
        return {"workers": workers, "seconds": round(seconds, 2), "recorders": per, **used, **stored(url)}
    finally:
        os.environ.pop("PGAPPNAME", None)
        if server:
            server.stop()
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("REASONLOG_TEST_POSTGRES"), help="a PostgreSQL URL")
    ap.add_argument("--size", default="medium", choices=["small", "medium", "large"])
    ap.add_argument("--recorders", type=int, default=4)
    ap.add_argument("--workers", default="1,2,4", help="serve --workers values, comma-separated")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db postgresql://… (or $REASONLOG_TEST_POSTGRES) is needed")
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="bench-ingest-data-")  # remote recorders' spill folder
    want = expected(args.size)
    load = os.getloadavg()[0]
    rows = [row(args.db, args.size, args.recorders, None)]
    rows += [row(args.db, args.size, args.recorders, int(w)) for w in args.workers.split(",")]
    base = rows[0]["seconds"]
    for r in rows:
        r["calls_per_s"] = round(want["calls"] / r["seconds"], 1)
        r["ratio"] = round(base / r["seconds"], 2)
        r["complete"] = all(r[k] == v for k, v in want.items()) and r["rejected"] == 0 == r["isolated_batches"]
    if args.json:
        print(json.dumps({"size": args.size, "expected": want, "load_before": load, "load_after": os.getloadavg()[0],
                          "rows": rows}, indent=2))
    else:
        print(f"{args.size} workload: {want['calls']:,} calls, {want['tool_results']:,} tool results,"
              f" {want['outcomes']:,} outcomes; {args.recorders} recorder processes; load average"
              f" {load:.1f} before, {os.getloadavg()[0]:.1f} after")
        print("| writing | s until durable | calls/s | ratio to in-process | server CPU ms/call |"
              " PostgreSQL backends CPU ms/call | stored calls / tool results / outcomes"
              " | rejected | batches retried event by event |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            name = "in-process (each recorder to PostgreSQL)" if r["workers"] is None else \
                f"`serve --workers {r['workers']}`"
            per_call = 1000 / want["calls"]
            print(f"| {name} | {r['seconds']} | {r['calls_per_s']:,} | {r['ratio']} |"
                  f" {r['server_cpu_s'] * per_call:.2f} | {r['pg_cpu_s'] * per_call:.2f} | {r['calls']:,} /"
                  f" {r['tool_results']:,} / {r['outcomes']:,} | {r['rejected']} | {r['isolated_batches']} |")
    return 0 if all(r["complete"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
