"""`reasonlog serve` under load: read latency with 10,000 sessions and 500,000 messages, and ingestion over HTTP.

    python benchmarks/bench_server.py                                   # SQLite (built once, cached in out/)
    python benchmarks/bench_server.py --db postgresql://postgres@127.0.0.1:55432/postgres
    python benchmarks/bench_server.py --sessions 1000                   # a quicker, smaller run
    python benchmarks/bench_server.py --scale 10000,100000 --no-semantic  # every route at both sizes (issue 35)

The database holds trading-simulator model-days: 10,000 sessions (20 models x 500 days of one job), each of
5 calls whose contexts grow by 10 messages a call (50 messages a session, 500,000 in all; past 10,000 sessions, more
sessions a model-day, an hour apart), with two
`position` outcomes each. It is written once through the store's `write_batch` and kept (a SQLite file in
`benchmarks/out/`, a schema `bench_server_<n>` on PostgreSQL) for later runs.

A `reasonlog serve` process on 127.0.0.1 then answers, 200 times each, with a warm-up first:
`GET /reasoning` for one model-day with the full conversation; `GET /v1/sessions` filtered by model and
date label; `GET /v1/sessions?q=` a full-text search; `GET /v1/search?mode=semantic|hybrid` (issue 24: the
sessions' units cut once and cached with the database, each text given a SYNTHETIC normalised vector, as embedding
~500,000 texts with the real model would take hours; each query embedded by the real local model in the server,
whose cost is printed beside). p50 and p95 are printed against each target, beside `GET /healthz` measured the
same way (the floor: HTTP and the framework alone).

`--scale 10000,100000` (issue 35): every route (`--usage-only`: the usage routes) at each size, with each figure's
ratio to the smallest size's and the machine's load beside it; missing archives are built first, through the store's
`write_batch` (on PostgreSQL its bulk path) by `--writers` processes at once, each a slice of the model-days (a build
that stopped midway goes on where it stopped).
Server CPU per request is the `serve` process's (and on PostgreSQL its backends') over the requests after each
route's 5 of warm-up, which compile its template and fill caches.
`--baseline DIR/src` also measures the usage routes of another tree's server (`git archive main src | tar -x -C DIR`)
on the same archive in the same run, with this tree's ratio to it.

Ingestion: the medium workload (`../shared/bench/workload.py`) recorded by a `Recorder` into a local file
(in-process), then by a `Recorder("http://…")` through a second server into a fresh database, both timed
until every call is durable; the ratio is HTTP's rate over in-process's (target >= 0.5).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import reasonlog  # noqa: E402
from reasonlog.model import CallRecorded, OutcomeRecorded, SessionEnded, SessionStarted, Usage, stable_id  # noqa: E402

OUT = Path(os.environ.get("REASONLOG_BENCH_OUT") or REPO / "benchmarks" / "out")
MODELS = [f"model-{m:02d}" for m in range(20)]
CALLS, NEW_PER_CALL = 5, 10
DAYS = 500  # the archive spans 500 days at any size: a larger one holds more sessions a model-day (issue 35)


def days(n: int) -> list[str]:
    start = time.mktime((2024, 1, 1, 12, 0, 0, 0, 0, 0))
    return [time.strftime("%Y-%m-%d", time.gmtime(start + 86400 * d)) for d in range(n)]


def session_events(model: str, day: str, k: int, replica: int = 0) -> list:
    """One model-day: 5 calls, each resending the history plus 10 new messages, and two positions. `replica`: the
    n-th session of that model and day (past 10,000 sessions), an hour later each."""
    hour = f"{9 + replica:02d}"
    sid = stable_id(f"{day}T09:00:00Z", "bench", model, day, *((replica,) if replica else ()))
    events: list = [SessionStarted(session_id=sid, started_at=f"{day}T{hour}:00:00Z", agent=model, run="job-1",
                                   model=model, provider="openai", labels={"date": day})]
    history: list = []
    for c in range(CALLS):
        for m in range(NEW_PER_CALL - 1):
            history.append({"role": "user", "content": f"{model} {day} step {c}.{m}: price of NVDA is "
                                                       f"{180 + (k * 7 + c * 3 + m) % 40} and cash {10000 - c * 100}"})
        reply = {"role": "assistant", "content": [{"type": "text", "text": f"{model} on {day}: decision {c} for "
                                                   f"portfolio {k % 97}, buying {c + 1} shares"}]}
        events.append(CallRecorded(call_id=stable_id(f"{day}T{hour}:0{c}:00Z", "bench", sid, c), session_id=sid,
                                   exchange_id=None, started_at=f"{day}T{hour}:0{c}:00Z",
                                   request={"model": model, "messages": list(history)}, response=reply, model=model,
                                   provider="openai", usage=Usage(input_tokens=1000 + c, output_tokens=50),
                                   latency_ms=300.0 + (k * 37 + c * 101) % 2000, stable_history=True))
        history.append(reply)
    for n, (symbol, amount, price) in enumerate((("NVDA", 10, 189.6), ("GOOGL", 6, 245.15))):
        events.append(OutcomeRecorded(outcome_id=stable_id(f"{day}T{hour}:10:00Z", "bench", sid, n), session_id=sid,
                                      at=f"{day}T{hour}:1{n}:00Z", outcome_kind="position",
                                      payload={"action_id": n + 1, "action_type": "buy", "symbol": symbol,
                                               "amount": amount, "price": price, "cash_after": 8104.0 - n * 1471}))
    events.append(SessionEnded(session_id=sid, ended_at=f"{day}T{hour}:20:00Z"))
    return events


def build(target, sessions: int, writers: int = 1) -> None:
    """The archive of `sessions` sessions, written through the store's `write_batch` (the bulk path on PostgreSQL)
    by `writers` processes at once, each a slice of the model-days (no two write the same content, usage row or
    session); a build that stopped midway goes on (a session is written whole in one batch or not at all)."""
    if built(target, sessions):
        print(f"  reusing {sessions:,} sessions", file=sys.stderr)
        return
    t0, load = time.perf_counter(), os.getloadavg()[0]
    if writers == 1:
        done = [write_slice(str(target), sessions, 0, 1)]
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(writers) as pool:
            done = pool.starmap(write_slice, [(str(target), sessions, w, writers) for w in range(writers)])
    wall = time.perf_counter() - t0
    print(f"  {sessions:,} sessions built by {writers} writer(s) in {wall:.0f} s wall: writers' CPU"
          f" {sum(d[0] for d in done):.0f} s, their PostgreSQL backends' {sum(d[1] for d in done):.0f} s;"
          f" {sum(d[2] for d in done):,} sessions written, {sum(d[3] for d in done):,} found written"
          f" (load {load:.1f} -> {os.getloadavg()[0]:.1f})", file=sys.stderr)


def write_slice(target: str, sessions: int, writer: int, writers: int) -> tuple[float, float, int, int]:
    """Write the sessions of slice `writer` of `writers` (by model-day) that the store does not hold, in batches of
    about 2,000 events. Its CPU, its PostgreSQL backend's CPU (0 on SQLite), sessions written and skipped."""
    store = reasonlog.open_store(target)
    backend = [store._read(lambda cur: cur.execute("SELECT pg_backend_pid()").fetchone()[0])] \
        if target.startswith("postgresql") else []  # noqa: SLF001 - whose CPU the build cost on the server
    held = set(store._read(lambda cur: [r[0] for r in cur.execute("SELECT id FROM sessions").fetchall()]))
    t0, cpu0, server0 = time.perf_counter(), time.process_time(), cpu_seconds(backend)
    calendar, per_day = days(DAYS), len(MODELS) * DAYS
    level, batch, written, skipped = min(sessions, per_day), [], 0, 0
    for k in range(sessions):
        if (k % per_day) * writers // level != writer:
            continue
        events = session_events(MODELS[k % len(MODELS)], calendar[k // len(MODELS) % DAYS], k, k // per_day)
        if events[0].session_id in held:
            skipped += 1
            continue
        batch += events
        written += 1
        if len(batch) >= 2000:
            store.write_batch(batch)
            batch = []
        if written % 1000 == 0:
            print(f"  writer {writer + 1}/{writers}: {written:,} sessions written ({time.perf_counter() - t0:.0f} s,"
                  f" load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    store.write_batch(batch)
    figures = (time.process_time() - cpu0, cpu_seconds(backend) - server0, written, skipped)
    store.close()
    return figures


def build_sizes(read_targets: dict[int, str], writers: int) -> None:
    """Each size's archive, the smallest first, each through `write_batch` (`build`)."""
    for sessions in sorted(read_targets):
        build(read_targets[sessions], sessions, writers)


def built(target, sessions: int) -> bool:
    store = reasonlog.open_store(target)
    try:
        return store.count_sessions(reasonlog.SessionFilter(run="job-1", limit=None)) == sessions
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_semantic(target) -> str | None:
    """Units cut from every session, each text given a SYNTHETIC vector (random, normalised, seeded by its id)
    stored as the local model's: embedding ~500,000 texts with the real model would take hours on this machine,
    and ranking costs the same whatever the vectors mean. The query is embedded by the real model, in the server.
    Returns the model's name; None (with a note) without the `semantic` extra."""
    import numpy as np

    from reasonlog.semantic import SemanticUnavailable, choose_embedder

    try:
        model = choose_embedder().model
    except SemanticUnavailable as exc:
        print(f"  search by meaning not measured: {exc}")
        return None
    store = reasonlog.open_store(target)
    t0 = time.perf_counter()
    cut = store.cut_units(lambda done, total: print(f"  units of {done:,} / {total:,} sessions cut", end="\r",
                                                    file=sys.stderr))
    if cut:
        print(f"  {cut:,} units cut in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    after = written = 0
    while batch := store.unit_backlog(model, 5000, after):
        ids = [tid for tid, _ in batch]
        rng = np.random.default_rng(ids[0])
        matrix = rng.standard_normal((len(ids), 384), dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        written += store.save_vectors(model, [(tid, matrix[i].astype("<f4").tobytes()) for i, tid in enumerate(ids)])
        after = ids[-1]
        print(f"  {written:,} synthetic vectors written", end="\r", file=sys.stderr)
    counts = store.semantic_counts(model)
    store.close()
    print(f"  search by meaning: {counts['units']:,} units, {counts['texts']:,} distinct texts,"
          f" {counts['embedded']:,} with a (synthetic) vector of {model}")
    return model


# Queries asked by the semantic and hybrid routes, in turn (embedded by the real model in the server).
QUERIES = ["which model bought NVDA when the price went up", "cash left after the portfolio decision",
           "price of NVDA is 190", "selling shares to raise cash", "decision for the portfolio on a falling day",
           "how many shares were bought", "model-07 decision", "step 3 price check", "buying GOOGL",
           "what did the agent decide about the position"]


def query_embedding_ms(n: int) -> tuple[float, float] | None:
    """p50 and p95 of the local model embedding one query (loaded first), in this process: the share of a
    semantic or hybrid search's latency that is the query's embedding."""
    from reasonlog.semantic import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.embed_query("load the model first")
    ms = []
    for k in range(n):
        t = time.perf_counter()
        embedder.embed_query(QUERIES[k % len(QUERIES)])  # as a search does (numpy's form of the model)
        ms.append((time.perf_counter() - t) * 1000)
    return p(ms, 50), p(ms, 95)


class Server:
    def __init__(self, target, *args: str, src: str | None = None):
        """`reasonlog serve` of this tree, or of the source folder `src` (a baseline's: `git archive main src`)."""
        self.port = free_port()
        env = {**os.environ, "REASONLOG_DB": str(target), **({"PYTHONPATH": src} if src else {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "serve", "--port", str(self.port), *args],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(300):
            try:
                if urllib.request.urlopen(self.base + "/readyz", timeout=5).status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("reasonlog serve did not become ready")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def timed(url: str | list[str], n: int, warm: int = 5) -> list[float]:
    """Milliseconds of `n` requests (of the urls in turn), after `warm` of warm-up (the first may load a model)."""
    urls = [url] if isinstance(url, str) else url
    for k in range(warm):
        urllib.request.urlopen(urls[k % len(urls)], timeout=300).read()
    out = []
    for k in range(n):
        t = time.perf_counter()
        with urllib.request.urlopen(urls[k % len(urls)], timeout=30) as r:
            r.read()
        out.append((time.perf_counter() - t) * 1000)
    return out


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds these processes have used so far (/proc/PID/stat's utime and stime)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def server_pids(server: Server, target) -> list[int]:
    """The server process and, on PostgreSQL, the backends serving its connections (by application_name)."""
    pids = [server.proc.pid]
    if str(target).startswith("postgresql"):
        import psycopg

        with psycopg.connect(str(target).split("?")[0], autocommit=True) as conn:
            pids += [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                                                (APP,))]
    return pids


APP = "bench_server_reads"  # the application_name of the measured server's PostgreSQL connections
USAGE_ROUTES = ("/usage", "/v1/stats?by=day", "/v1/stats?by=model")


def reads(target, sessions: int, n: int, model: str | None = None, only_usage: bool = False,
          src: str | None = None) -> dict:
    """Each route's p50, p95, server CPU per request (ms; the server process and its PostgreSQL backends) and the
    machine's 1-minute load beside it; printed, and returned by name. `src`: a baseline's source folder."""
    server = Server(target, "--no-embed", src=src)  # the vectors are written already; nothing competes with the reads
    day = days(DAYS)[DAYS // 2]
    urls = {
        "GET /healthz (floor)": "/healthz",
        "GET /reasoning, one model-day, full conversation":
            "/reasoning?" + urllib.parse.urlencode({"date": day, "model": "model-07", "include_full_conversation":
                                                    "true"}),
        "GET /v1/sessions, model + date label": "/v1/sessions?" + urllib.parse.urlencode(
            {"model": "model-07", "label": f"date={day}"}),
        "GET /reasoning?date=D, all models of a day": "/reasoning?" + urllib.parse.urlencode({"date": day}),
        "GET /v1/sessions?q= rare text": "/v1/sessions?" + urllib.parse.urlencode(
            {"q": f"model-07 on {day}: decision 3"}),
        "GET /v1/sessions?q= common word (every session)": "/v1/sessions?q=price",
        "GET /v1/sessions/{id}?limit=200 (50 messages)": f"/v1/sessions/{session_of(day)}?limit=200",
        "GET /usage (dashboard)": "/usage",
        "GET /v1/stats?by=day (stats --by day)": "/v1/stats?by=day",
        "GET /v1/stats?by=model": "/v1/stats?by=model",
    }
    if only_usage:
        urls = {k: v for k, v in urls.items() if v == "/healthz" or v in USAGE_ROUTES}
    search: dict[str, list[str]] = {} if model is None else {
        f"GET /v1/search?mode={mode}, limit 10 (10 queries in turn)": [
            "/v1/search?" + urllib.parse.urlencode({"q": q, "mode": mode, "limit": 10}) for q in QUERIES]
        for mode in ("semantic", "hybrid")}
    floor, out = None, {}
    try:
        for name, path in [*urls.items(), *search.items()]:
            where = [server.base + u for u in path] if isinstance(path, list) else server.base + path
            count = n if "usage" not in name else max(10, n // 4)
            try:
                timed(where, 0)  # the warm-up, not counted: a route's first answers compile its template, fill caches
                pids = server_pids(server, target)
                before = cpu_seconds(pids)
                ms = timed(where, count, warm=0)
            except TimeoutError:
                print(f"  {name:<52} a request took more than 30 s: NOT met")
                continue
            except urllib.error.HTTPError as exc:  # e.g. an id a grown archive's copies share as a prefix
                print(f"  {name:<52} answered {exc.code} {exc.reason}: not measured")
                continue
            cpu = (cpu_seconds(pids) - before) * 1000 / count  # after the warm-up (before h35usage2: with it)
            load = os.getloadavg()[0]
            floor = floor or p(ms, 50)
            out[name] = (p(ms, 50), p(ms, 95), cpu, load)
            goal = next((g for key, g in TARGETS.items() if key in name), None)
            note = "" if goal is None else f"  target p95 < {goal} ms: {'met' if p(ms, 95) < goal else 'NOT met'}"
            print(f"  {name:<52} p50 {p(ms, 50):7.1f} ms  p95 {p(ms, 95):7.1f} ms  server CPU {cpu:6.1f} ms/request"
                  f"  load {load:4.1f}  p50/floor {p(ms, 50) / floor:6.1f}{note}")
    finally:
        server.stop()
    if search:
        embedding = query_embedding_ms(n)
        if embedding:
            print(f"  {'the query embedding alone (local model, in-process)':<52} p50 {embedding[0]:7.1f} ms"
                  f"  p95 {embedding[1]:7.1f} ms")
    return out


def old_and_new(target, n: int) -> None:
    """The statistics' query as the previous code ran it (each session's kept sums, every call's latency for the
    medians) beside the kept rows by day, model, agent, run and source, in this process on the same database:
    CPU ms per answer and the ratio, with the load."""
    from reasonlog.store import usage

    store = reasonlog.open_store(target)
    flt = reasonlog.SessionFilter(limit=None)
    fn_read = store._read  # noqa: SLF001 - a benchmark of the store's own query functions
    backend = [fn_read(lambda cur: cur.execute("SELECT pg_backend_pid()").fetchone()[0])] \
        if str(target).startswith("postgresql") else []
    try:
        for by, latencies in (("day", True), ("model", True), ("day", False)):
            cost = {}
            for name, fn in (("previous", usage.session_groups), ("kept rows", usage.stats_groups)):
                fn_read(fn, by, flt, latencies)
                t, server = time.process_time(), cpu_seconds(backend)
                for _ in range(n):
                    fn_read(fn, by, flt, latencies)
                cost[name] = (time.process_time() - t + cpu_seconds(backend) - server) * 1000 / n
            print(f"  in-process stats by {by}{' with medians' if latencies else ''}: previous query"
                  f" {cost['previous']:7.1f} ms CPU, kept rows {cost['kept rows']:6.1f} ms CPU, ratio"
                  f" {cost['previous'] / cost['kept rows']:6.1f} x  (this process{' + its backend' if backend else ''};"
                  f" load {os.getloadavg()[0]:.1f})")
    finally:
        store.close()


def scale(read_targets: dict[int, str], n: int, semantic: bool, only_usage: bool, baseline: str | None) -> None:
    """Every route (or the usage routes alone) at each size, and each figure's ratio to the smallest size's; with
    `baseline` (a source folder), the usage routes of that code's server too, and this tree's ratio to it."""
    figures = {}
    for sessions, target in read_targets.items():
        print(f"  -- {sessions:,} sessions, {sessions * CALLS * NEW_PER_CALL:,} messages")
        model = prepare_semantic(target) if semantic and not only_usage else None
        figures[sessions] = reads(target, sessions, n, model, only_usage=only_usage)
        if baseline:
            print(f"  the baseline's server ({baseline}):")
            before = reads(target, sessions, n, only_usage=True, src=baseline)
            for name, (p50, _, cpu, load) in before.items():
                now = figures[sessions][name]
                print(f"  {name:<52} this tree / baseline: server CPU {now[2]:.1f} / {cpu:.1f} ms ="
                      f" {now[2] / cpu:.2f} x, p50 {now[0] / p50:.2f} x (loads {now[3]:.1f}, {load:.1f})")
        old_and_new(target, max(3, n // 20))
    small, *larger = sorted(figures)
    for big in larger:
        for name, (p50, p95, cpu, load) in figures[big].items():
            base = figures[small].get(name)
            if base:
                print(f"  {name:<52} {big:,} / {small:,} sessions: p50 {p50 / base[0]:5.2f} x, p95"
                      f" {p95 / base[1]:5.2f} x, server CPU {cpu / base[2]:5.2f} x (loads {base[3]:.1f}, {load:.1f})")


# Issue 20's targets (p95, ms) by a part of each route's name; issue 24's for search by meaning.
TARGETS = {"one model-day": 20, "all models": 50, "model + date": 20, "rare text": 50, "common word": 100,
           "/usage": 200, "limit=200": 200, "mode=hybrid": 100, "mode=semantic": 100}


def session_of(day: str) -> str:
    return stable_id(f"{day}T09:00:00Z", "bench", "model-07", day)


def ingestion(fresh_target, local_target) -> None:
    """The medium workload into `local_target` by an in-process recorder, then over HTTP into `fresh_target`
    (both of the dialect measured)."""
    import workload
    from bench_postgres import record

    calls = list(workload.generate("medium"))
    with tempfile.TemporaryDirectory() as tmp:
        local = record(local_target or Path(tmp) / "local.db", calls)
        server = Server(fresh_target)
        try:
            os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
            remote = record(server.base, calls)
        finally:
            server.stop()
    print(f"  ingestion of the medium workload ({len(calls):,} calls): in-process {len(calls) / local:,.0f} calls/s,"
          f" over HTTP {len(calls) / remote:,.0f} calls/s; ratio {local / remote:.2f} (target >= 0.5:"
          f" {'met' if local / remote >= 0.5 else 'NOT met'})")


def targets(db: str | None, sessions: int, prefix: str = "bench_server", fresh: bool = True):
    """The cached read database and a fresh one for ingestion (with `fresh`), for the dialect `db` names."""
    if not db:
        OUT.mkdir(parents=True, exist_ok=True)
        return OUT / f"server-{sessions}.db", Path(tempfile.mkdtemp()) / "ingest.db"
    import uuid

    import psycopg

    read_schema, fresh_schema = f"{prefix}_{sessions}", "bench_ingest_" + uuid.uuid4().hex[:8]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {read_schema}")
        if fresh:
            conn.execute(f"CREATE SCHEMA {fresh_schema}")
            conn.execute(f"CREATE SCHEMA {fresh_schema}_local")
    joiner = "&" if "?" in db else "?"
    return (f"{db}{joiner}options=-csearch_path%3D{read_schema}&application_name={APP}",
            f"{db}{joiner}options=-csearch_path%3D{fresh_schema}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", help="a PostgreSQL URL (default: a SQLite file in benchmarks/out)")
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--skip-ingestion", action="store_true")
    ap.add_argument("--no-semantic", action="store_true", help="skip /v1/search by meaning (and cutting units)")
    ap.add_argument("--scale", help="sizes in sessions, e.g. 10000,100000: the usage routes at each (built first)"
                                    " with the ratios between them, and the previous query beside the kept rows")
    ap.add_argument("--baseline", help="with --scale: a source folder (e.g. `git archive main src | tar -x -C DIR`,"
                                       " then DIR/src) whose server's usage routes are measured beside")
    ap.add_argument("--usage-only", action="store_true", help="with --scale: the usage routes alone")
    ap.add_argument("--schema-prefix", default="bench_server", help="PostgreSQL: the read schemas' prefix")
    ap.add_argument("--writers", type=int, help="processes writing a missing archive at once, each through"
                                                " write_batch (default: 2 on PostgreSQL, 1 on SQLite)")
    args = ap.parse_args(argv)
    if args.scale:
        sizes = [int(x) for x in args.scale.split(",")]
        read_targets = {n: targets(args.db, n, args.schema_prefix, fresh=False)[0] for n in sizes}
        build_sizes(read_targets, args.writers or (2 if args.db else 1))
        print(f"{'PostgreSQL' if args.db else 'SQLite'}: {'usage' if args.usage_only else 'every route'} at"
              f" {', '.join(f'{n:,}' for n in sizes)} sessions")
        scale(read_targets, args.requests, not args.no_semantic, args.usage_only, args.baseline)
        return 0
    read_target, fresh = targets(args.db, args.sessions, args.schema_prefix)
    print(f"{'PostgreSQL' if args.db else 'SQLite'}: {args.sessions:,} sessions,"
          f" {args.sessions * CALLS * NEW_PER_CALL:,} messages")
    build(read_target, args.sessions, args.writers or (2 if args.db else 1))
    model = None if args.no_semantic else prepare_semantic(read_target)
    reads(read_target, args.sessions, args.requests, model)
    try:
        if not args.skip_ingestion:
            ingestion(fresh, f"{fresh}_local" if args.db else None)
    finally:
        if args.db:  # the ingestion schemas are the run's own
            import psycopg

            schema = str(fresh).rsplit("%3D", 1)[1]
            with psycopg.connect(args.db, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
                conn.execute(f"DROP SCHEMA {schema}_local CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
