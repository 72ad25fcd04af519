"""Store benchmark: reasonlog against three naive baselines, in the same run, on the same workload.

    python benchmarks/bench_store.py --size medium
    python benchmarks/bench_store.py --size large
    python benchmarks/bench_store.py --sizes medium,large      # both, plus large/medium ratios
    python benchmarks/bench_store.py --size medium --json      # machine-readable results on stdout
    python benchmarks/bench_store.py --src ../old/src          # another checkout's code, the same workload

Workload: the deterministic generator in `../shared/bench/workload.py` (relative to the repo root).
The calls are generated once, up front, outside every timing.

What is measured (all in a temporary directory under /tmp, removed afterwards):

- reasonlog: a `Recorder` with the default background writer. Only `session.call(...)` on the
  caller thread is timed (p50/p99). "Durable and searchable" is the wall clock from the first
  recorded call until `rec.flush()` returns. Bytes on disk are db + -wal + -shm + spill files,
  measured after `rec.close()` and a WAL checkpoint.
- (a) one JSON file per call (json.dumps of the whole call), timed per call and in total.
- (b) stdlib sqlite3 with default settings (rollback journal, synchronous=FULL), one row per
  message of every request (the whole resent history) plus the response, a commit per call.
- (c) stdlib sqlite3, every unique message once (deduplicated by its JSON text) in a table plus
  a default FTS5 table, one executemany each, one transaction: the floor for a searchable store.
- Reads on the reasonlog store once durable: whole-session read, filtered session list and
  full-text search, each checked against the workload's ground truth.

`--profile-writer` additionally runs the recorder's writer thread under cProfile and prints
where it spends its time (cProfile does not follow threads on its own).
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measured_src(argv: list[str]) -> Path:
    """`--src DIR` (read before reasonlog is imported): the code measured; this tree's `src` without it."""
    for k, arg in enumerate(argv):
        if arg == "--src" and k + 1 < len(argv):
            return Path(argv[k + 1]).resolve()
        if arg.startswith("--src="):
            return Path(arg.split("=", 1)[1]).resolve()
    return REPO / "src"


sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
sys.path.insert(0, str(measured_src(sys.argv)))

import workload  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.capture.writer import BackgroundWriter  # noqa: E402
from reasonlog.store.sqlite import SQLiteStore, spill_dir  # noqa: E402

MEDIUM_TARGETS = "targets are defined on the medium set"


# ----------------------------------------------------------------------------- helpers

def pct(values, p):
    """Nearest-rank percentile of a list of numbers."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def text_of(value) -> str:
    """The human-readable text of a message (or system prompt), joined by newlines."""
    out = []

    def walk(v, key=None):
        if isinstance(v, str):
            if key not in ("type", "id", "tool_use_id", "signature", "role"):
                out.append(v)
        elif isinstance(v, dict):
            for k, item in v.items():
                walk(item, k)
        elif isinstance(v, list):
            for item in v:
                walk(item, key)

    walk(value)
    return "\n".join(out)


def last_user_text(messages) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "\n".join(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")
    return ""


class _StubPrices:
    """Used only if `reasonlog.pricing` is missing in this checkout (the run says so)."""

    class _Cost:
        usd, source = None, "unknown_model"

    def cost(self, model, usage):
        return self._Cost()


def price_table_or_none():
    try:
        import reasonlog.pricing  # noqa: F401
        return None, None
    except ImportError as exc:
        return _StubPrices(), f"reasonlog.pricing not importable ({exc}); a no-op price table was passed"


# ----------------------------------------------------------------------------- instrumentation

class WriterTimer:
    """Wraps SQLiteStore.write_batch (class level, this process only) to time the writer thread."""

    def __init__(self):
        self.batches, self.events, self.ns = 0, 0, 0
        self._orig = SQLiteStore.write_batch
        timer = self

        def write_batch(store, events, *args, **kwargs):  # whatever the store's signature grows to
            t = time.perf_counter_ns()
            try:
                return timer._orig(store, events, *args, **kwargs)
            finally:
                timer.ns += time.perf_counter_ns() - t
                timer.batches += 1
                timer.events += len(events)

        SQLiteStore.write_batch = write_batch

    def restore(self):
        SQLiteStore.write_batch = self._orig


class WriterProfiler:
    """Runs BackgroundWriter._run under cProfile (the writer thread is started lazily, after this)."""

    def __init__(self):
        self.profile = cProfile.Profile()
        self._orig = BackgroundWriter._run
        prof, orig = self.profile, self._orig

        def _run(writer):
            prof.enable()
            try:
                return orig(writer)
            finally:
                prof.disable()

        BackgroundWriter._run = _run

    def restore(self):
        BackgroundWriter._run = self._orig

    def report(self, n=30) -> str:
        out = io.StringIO()
        st = pstats.Stats(self.profile, stream=out)
        st.sort_stats("tottime").print_stats(n)
        st.sort_stats("cumulative").print_stats(n)
        return out.getvalue()


# ----------------------------------------------------------------------------- reasonlog

def run_reasonlog(calls, tr, work: Path, profile: bool) -> dict:
    db = work / "reasonlog.db"
    prices, price_note = price_table_or_none()
    last_ids = {c["call_id"] for c in tr["last_call"].values()}
    first_ts = {}
    for c in calls:
        first_ts.setdefault(c["session_id"], c["ts_start"])
    n_events = len(calls) + 2 * len(first_ts) + 2 * sum(1 for c in calls if c["iteration"] == 0)

    timer = WriterTimer()
    prof = WriterProfiler() if profile else None
    try:
        rec = reasonlog.Recorder(db, max_queue=n_events + 1000, price_table=prices)
        sessions, exchanges = {}, {}
        lat = []
        Usage = reasonlog.Usage
        perf = time.perf_counter_ns
        cpu0 = time.process_time()  # this process: the caller's loop and the writer thread
        t0 = perf()
        for c in calls:
            sid = c["session_id"]
            s = sessions.get(sid)
            if s is None:
                s = sessions[sid] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                                labels={"user": c["user_id"]}, external_id=sid,
                                                started_at=first_ts[sid])
            if c["iteration"] == 0:
                exchanges[sid] = s.exchange(input=last_user_text(c["request"]["messages"]))
            resp = c["response"]
            t = perf()  # the whole call expression, arguments included (Usage conversion, response dict)
            s.call(request=c["request"], response={"role": "assistant", "content": resp["content"]},
                   model=c["model"], provider=c["provider"], stop_reason=resp["stop_reason"],
                   usage=Usage.from_anthropic(resp["usage"]),
                   latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=resp["id"], raw=resp)
            lat.append(perf() - t)
            if c["iteration"] == c["n_iterations"] - 1:
                exchanges.pop(sid).end()
            if c["call_id"] in last_ids:
                sessions.pop(sid).end()
        t_recorded = perf()
        flushed = rec.flush(timeout=None)
        t_durable = perf()
        cpu_durable = time.process_time() - cpu0
        stats = rec.stats()
        rec.close(timeout=None)
    finally:
        timer.restore()
        if prof:
            prof.restore()

    store = reasonlog.open_store(db)
    store.checkpoint()
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
    sp = spill_dir(db)
    spill_files = sorted(sp.glob("*")) if sp.exists() else []
    size = sum(f.stat().st_size for f in files + spill_files if f.exists())
    status = store.status()

    out = {
        "caller_p50_us": pct(lat, 50) / 1e3, "caller_p99_us": pct(lat, 99) / 1e3,
        "caller_max_us": max(lat) / 1e3, "caller_mean_us": statistics.fmean(lat) / 1e3,
        "record_loop_s": (t_recorded - t0) / 1e9, "durable_s": (t_durable - t0) / 1e9, "flushed": flushed,
        "durable_cpu_s": cpu_durable,
        "bytes_on_disk": size, "spill_files": len(spill_files), "writer_stats": stats,
        "writer_busy_s": timer.ns / 1e9, "writer_batches": timer.batches, "writer_events": timer.events,
        "store_counts": status["counts"], "store_unique_content_bytes": status["unique_content_bytes"],
        "price_note": price_note,
    }
    out["reads"] = run_reads(store, calls, tr)
    store.close()
    if prof:
        out["writer_profile"] = prof.report()
    return out


def run_reads(store, calls, tr) -> dict:
    everything = store.list_sessions(reasonlog.SessionFilter(limit=None))
    ext = {s["id"]: s["external_id"] for s in everything}
    by_ext = {v: k for k, v in ext.items()}
    res = {"sessions_in_store": len(everything), "sessions_expected": len(tr["last_call"])}

    # whole session read
    rng = random.Random(42)
    ids = sorted(ext)
    t_read, cpu_read = [], []
    for _ in range(200):
        sid = rng.choice(ids)
        t, cpu = time.perf_counter_ns(), time.thread_time_ns()  # CPU too: wall time swings with the machine's load
        store.get_session(sid)
        cpu_read.append(time.thread_time_ns() - cpu)
        t_read.append(time.perf_counter_ns() - t)
    res["session_read_p50_ms"] = pct(t_read, 50) / 1e6
    res["session_read_p99_ms"] = pct(t_read, 99) / 1e6
    res["session_read_cpu_p50_ms"] = pct(cpu_read, 50) / 1e6

    # the conversation read back equals the one sent (every session)
    bad = []
    for xsid, last in tr["last_call"].items():
        conv = workload.conversation_of(last)
        session = store.get_session(by_ext[xsid]) if xsid in by_ext else {"messages": [], "system_prompts": []}
        msgs = [dict(m["content"]) if isinstance(m["content"], dict) else m["content"] for m in session["messages"]]
        systems = [sp["content"] for sp in session["system_prompts"]]  # system prompts have their own key
        ok = systems == [conv["system"]] and msgs == conv["messages"]
        if not ok:
            bad.append(xsid)
    res["conversations_checked"] = len(tr["last_call"])
    res["conversations_bad"] = bad[:5]
    res["conversations_ok"] = not bad

    # filtered list
    t_list, cpu_list, wrong = [], [], []
    for (model, day), truth in sorted(tr["by_model_date"].items()):
        flt = reasonlog.SessionFilter(model=model, since=day, until=day, limit=None)
        t, cpu = time.perf_counter_ns(), time.thread_time_ns()
        got = store.list_sessions(flt)
        cpu_list.append(time.thread_time_ns() - cpu)
        t_list.append(time.perf_counter_ns() - t)
        if {s["external_id"] for s in got} != truth:
            wrong.append([model, day])
    res["list_queries"] = len(t_list)
    res["list_p50_ms"] = pct(t_list, 50) / 1e6
    res["list_p99_ms"] = pct(t_list, 99) / 1e6
    res["list_cpu_p50_ms"] = pct(cpu_list, 50) / 1e6
    res["list_wrong"] = wrong
    res["list_ok"] = not wrong

    # full-text search
    terms = workload.search_terms(calls, n=8)
    t_search, cpu_search, wrong = [], [], []
    for term, truth in terms:
        t, cpu = time.perf_counter_ns(), time.thread_time_ns()
        hits = store.search(term, reasonlog.SessionFilter(limit=None), limit=10000)
        cpu_search.append(time.thread_time_ns() - cpu)
        t_search.append(time.perf_counter_ns() - t)
        got = {ext[h["session_id"]] for h in hits}
        if got != truth:
            wrong.append({"term": term, "expected": len(truth), "got": len(got)})
    res["search_terms"] = [t for t, _ in terms]
    res["search_p50_ms"] = pct(t_search, 50) / 1e6
    res["search_p99_ms"] = pct(t_search, 99) / 1e6
    res["search_cpu_p50_ms"] = pct(cpu_search, 50) / 1e6
    res["search_wrong"] = wrong
    res["search_ok"] = not wrong and len(terms) > 0
    return res


def reads_only(db: Path, size: str, repeat: int) -> dict:
    """The reads of `run_reads` on a database written before, `repeat` times: the median of each CPU p50 (ms)."""
    calls = list(workload.generate(size))
    tr = workload.truths(calls)
    store = reasonlog.open_store(db, read_only=True)
    try:
        runs = [run_reads(store, calls, tr) for _ in range(repeat)]
    finally:
        store.close()
    assert all(r["conversations_ok"] and r["list_ok"] and r["search_ok"] for r in runs), "a read answered wrong"
    keys = ("session_read_cpu_p50_ms", "list_cpu_p50_ms", "search_cpu_p50_ms")
    return {k: statistics.median(r[k] for r in runs) for k in keys}


# ----------------------------------------------------------------------------- baselines

def run_baseline_a(calls, work: Path) -> dict:
    """One JSON file per call."""
    d = work / "a"
    d.mkdir()
    lat = []
    perf = time.perf_counter_ns
    t0 = perf()
    for i, c in enumerate(calls):
        t = perf()
        data = json.dumps(c)
        with open(d / f"{i:07d}.json", "w") as f:
            f.write(data)
        lat.append(perf() - t)
    total = (perf() - t0) / 1e9
    size = dir_bytes(d)
    shutil.rmtree(d)
    return {"caller_p50_us": pct(lat, 50) / 1e3, "caller_p99_us": pct(lat, 99) / 1e3, "total_s": total,
            "bytes_on_disk": size}


def run_baseline_b(calls, work: Path) -> dict:
    """stdlib sqlite3, defaults, a row per message of every request + the response, commit per call."""
    path = work / "b.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE messages (session_id, call_id, idx, role, json)")
    conn.commit()
    perf = time.perf_counter_ns
    t0 = perf()
    for c in calls:
        sid, cid = c["session_id"], c["call_id"]
        msgs = c["request"]["messages"]
        rows = [(sid, cid, i, m["role"], json.dumps(m)) for i, m in enumerate(msgs)]
        rows.append((sid, cid, len(msgs), "assistant",
                     json.dumps({"role": "assistant", "content": c["response"]["content"]})))
        conn.executemany("INSERT INTO messages VALUES (?,?,?,?,?)", rows)
        conn.commit()
    total = (perf() - t0) / 1e9
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    conn.close()
    size = sum(p.stat().st_size for p in work.glob("b.db*"))
    for p in work.glob("b.db*"):
        p.unlink()
    return {"total_s": total, "bytes_on_disk": size, "journal_mode": mode, "synchronous": sync}


def run_baseline_c(calls, work: Path) -> dict:
    """stdlib sqlite3, unique messages once + default FTS5, one transaction (the floor)."""
    path = work / "c.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id, json)")
    conn.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(text)")
    conn.commit()
    perf = time.perf_counter_ns
    t0 = perf()
    seen, rows, fts = set(), [], []

    def add(sid, value):
        js = json.dumps(value)
        if js in seen:
            return
        seen.add(js)
        n = len(rows) + 1
        rows.append((n, sid, js))
        fts.append((n, text_of(value)))

    for c in calls:
        sid = c["session_id"]
        add(sid, c["request"]["system"])
        for m in c["request"]["messages"]:
            add(sid, m)
        add(sid, {"role": "assistant", "content": c["response"]["content"]})
    t1 = perf()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO messages VALUES (?,?,?)", rows)
    conn.executemany("INSERT INTO messages_fts (rowid, text) VALUES (?,?)", fts)
    conn.commit()
    total = (perf() - t0) / 1e9
    conn.close()
    size = sum(p.stat().st_size for p in work.glob("c.db*"))
    for p in work.glob("c.db*"):
        p.unlink()
    return {"total_s": total, "serialize_dedupe_s": (t1 - t0) / 1e9, "sql_s": total - (t1 - t0) / 1e9,
            "unique_rows": len(rows), "bytes_on_disk": size}


# ----------------------------------------------------------------------------- one size

def run_size(size: str, profile: bool, log, with_b: bool = True, keep: Path | None = None) -> dict:
    log(f"[{size}] generating workload ...")
    t = time.perf_counter()
    calls = list(workload.generate(size))
    tr = workload.truths(calls)
    log(f"[{size}] {len(calls)} calls, {len(tr['last_call'])} sessions, logical {tr['logical_bytes']:,} B,"
        f" unique content {tr['unique_content_bytes']:,} B ({time.perf_counter() - t:.1f}s, untimed)")
    work = Path(tempfile.mkdtemp(prefix=f"bench_store_{size}_", dir="/tmp"))
    try:
        log(f"[{size}] reasonlog ...")
        rl = run_reasonlog(calls, tr, work, profile)
        if keep is not None:  # the database written, for `--reads-from` (checkpointed: one file)
            shutil.copyfile(work / "reasonlog.db", keep)
        gc.collect()
        log(f"[{size}] baseline (a) one JSON file per call ...")
        a = run_baseline_a(calls, work)
        gc.collect()
        b = None
        if with_b:
            log(f"[{size}] baseline (b) sqlite3 defaults, row per resent message, commit per call ...")
            b = run_baseline_b(calls, work)
        gc.collect()
        log(f"[{size}] baseline (c) sqlite3 unique messages + FTS5, one transaction ...")
        c = run_baseline_c(calls, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"size": size, "calls": len(calls), "sessions": len(tr["last_call"]),
            "logical_bytes": tr["logical_bytes"], "unique_content_bytes": tr["unique_content_bytes"],
            "unique_messages": tr["unique_messages"], "reasonlog": rl, "a": a, "b": b, "c": c,
            "rows": figures(tr, rl, a, b, c)}


def figures(tr, rl, a, b, c) -> list[dict]:
    r = rl["reads"]
    rows = []

    def row(name, mine, base, ratio, target, ok, unit=""):
        rows.append({"figure": name, "reasonlog": mine, "baseline": base, "ratio": ratio, "target": target,
                     "pass": ok, "unit": unit})

    row("caller p50 per call (us) vs (a)", rl["caller_p50_us"], a["caller_p50_us"],
        rl["caller_p50_us"] / a["caller_p50_us"], "<= 1/50 (0.020)", rl["caller_p50_us"] * 50 <= a["caller_p50_us"])
    row("caller p99 per call (us) vs (a)", rl["caller_p99_us"], a["caller_p99_us"],
        rl["caller_p99_us"] / a["caller_p99_us"], "<= 1/10 (0.100)", rl["caller_p99_us"] * 10 <= a["caller_p99_us"])
    if b is not None:
        row("durable+searchable (s) vs (b)", rl["durable_s"], b["total_s"], rl["durable_s"] / b["total_s"],
            "<= 1/8 (0.125)", rl["durable_s"] * 8 <= b["total_s"])
    row("durable+searchable (s) vs (c)", rl["durable_s"], c["total_s"], rl["durable_s"] / c["total_s"],
        "<= 2", rl["durable_s"] <= 2 * c["total_s"])
    row("bytes on disk vs unique content", rl["bytes_on_disk"], tr["unique_content_bytes"],
        rl["bytes_on_disk"] / tr["unique_content_bytes"], "<= 1.1",
        rl["bytes_on_disk"] <= 1.1 * tr["unique_content_bytes"])
    row("session read p50 (ms)", r["session_read_p50_ms"], None, None, "<= 2 ms",
        r["session_read_p50_ms"] <= 2 and r["conversations_ok"])
    row("filtered list p50 (ms), answers", r["list_p50_ms"], None, None, "<= 5 ms, exact",
        r["list_p50_ms"] <= 5 and r["list_ok"])
    row("search p50 (ms), answers", r["search_p50_ms"], None, None, "<= 10 ms, exact",
        r["search_p50_ms"] <= 10 and r["search_ok"])
    return rows


# ----------------------------------------------------------------------------- output

def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or (isinstance(v, float) and v >= 1e5):
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 10 else f"{v:.1f}"
    return str(v)


def table(rows, headers) -> str:
    cells = [headers] + [[fmt(x) for x in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(str(x).ljust(w[i]) for i, x in enumerate(r)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (x + 2) for x in w) + "|"]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def report(res: dict) -> str:
    rl, a, b, c, r = res["reasonlog"], res["a"], res["b"], res["c"], res["reasonlog"]["reads"]
    lines = [f"## size={res['size']}: {res['calls']} calls, {res['sessions']} sessions, "
             f"logical {res['logical_bytes']:,} B, unique content {res['unique_content_bytes']:,} B"]
    if res["size"] != "medium":
        lines.append(f"(PASS/FAIL below applies the medium targets; {MEDIUM_TARGETS})")
    lines.append("")
    lines.append(table([[x["figure"], x["reasonlog"], x["baseline"], x["ratio"], x["target"],
                         "PASS" if x["pass"] else "FAIL"] for x in res["rows"]],
                       ["figure", "reasonlog", "baseline", "ratio", "target", "verdict"]))
    lines.append("")
    lines.append("details:")
    lines.append(f"- reasonlog caller: mean {rl['caller_mean_us']:.1f} us, max {rl['caller_max_us']:.0f} us; "
                 f"record loop {rl['record_loop_s']:.2f} s, then flush -> durable at {rl['durable_s']:.2f} s "
                 f"(flush ok: {rl['flushed']}); CPU of this process until durable {rl['durable_cpu_s']:.2f} s")
    ws = rl["writer_stats"]
    lines.append(f"- reasonlog writer thread: {rl['writer_busy_s']:.2f} s inside store.write_batch over "
                 f"{rl['writer_batches']} batches / {rl['writer_events']} events; stats submitted={ws.get('submitted')}"
                 f" written={ws.get('written')} dropped={ws.get('dropped')} rejected={ws.get('rejected')}"
                 f" spilled_batches={ws.get('spilled_batches')} last_error={ws.get('last_error')}")
    lines.append(f"- reasonlog bytes: db+wal+shm+spill after close and PRAGMA wal_checkpoint(TRUNCATE) = "
                 f"{rl['bytes_on_disk']:,} B ({rl['spill_files']} spill files); store counts {rl['store_counts']}, "
                 f"stored content (uncompressed canonical JSON) {rl['store_unique_content_bytes']:,} B")
    lines.append(f"- reads: session read p99 {r['session_read_p99_ms']:.2f} ms; conversations equal to the "
                 f"workload's for {r['conversations_checked'] - len(r['conversations_bad'])}/"
                 f"{r['conversations_checked']} sessions (bad: {r['conversations_bad']}); "
                 f"list {r['list_queries']} (model, day) queries p99 {r['list_p99_ms']:.2f} ms, "
                 f"wrong {r['list_wrong']}; "
                 f"search terms {r['search_terms']} p99 {r['search_p99_ms']:.2f} ms, wrong {r['search_wrong']}")
    lines.append(f"- (a) total {a['total_s']:.2f} s, {a['bytes_on_disk']:,} B on disk (no fsync)")
    if b is not None:
        lines.append(f"- (b) total {b['total_s']:.2f} s, {b['bytes_on_disk']:,} B; journal_mode={b['journal_mode']},"
                     f" synchronous={b['synchronous']} (2 = FULL)")
    lines.append(f"- (c) total {c['total_s']:.2f} s (serialize+dedupe {c['serialize_dedupe_s']:.2f} s, SQL "
                 f"{c['sql_s']:.2f} s), {c['unique_rows']} unique rows, {c['bytes_on_disk']:,} B")
    if rl.get("price_note"):
        lines.append(f"- NOTE: {rl['price_note']}")
    return "\n".join(lines)


def ratios(results: dict) -> tuple[str, dict]:
    m, lg = results["medium"], results["large"]
    out = {
        "calls_ratio": lg["calls"] / m["calls"],
        "logical_bytes_ratio": lg["logical_bytes"] / m["logical_bytes"],
        "unique_bytes_ratio": lg["unique_content_bytes"] / m["unique_content_bytes"],
        "durable_time_ratio": lg["reasonlog"]["durable_s"] / m["reasonlog"]["durable_s"],
        "bytes_per_unique_medium": m["reasonlog"]["bytes_on_disk"] / m["unique_content_bytes"],
        "bytes_per_unique_large": lg["reasonlog"]["bytes_on_disk"] / lg["unique_content_bytes"],
    }
    out["bytes_per_unique_ratio"] = out["bytes_per_unique_large"] / out["bytes_per_unique_medium"]
    rows = [
        ["large/medium durable time", lg["reasonlog"]["durable_s"], m["reasonlog"]["durable_s"],
         out["durable_time_ratio"], "<= 7", "PASS" if out["durable_time_ratio"] <= 7 else "FAIL"],
        ["bytes per unique byte, large vs medium", out["bytes_per_unique_large"], out["bytes_per_unique_medium"],
         out["bytes_per_unique_ratio"], "about equal (0.9-1.1)",
         "PASS" if 0.9 <= out["bytes_per_unique_ratio"] <= 1.1 else "FAIL"],
    ]
    out["pass"] = all(r[-1] == "PASS" for r in rows)
    text = ("## large / medium\n"
            f"calls x{out['calls_ratio']:.1f}, logical bytes x{out['logical_bytes_ratio']:.1f}, "
            f"unique content x{out['unique_bytes_ratio']:.1f}\n\n"
            + table(rows, ["figure", "large", "medium", "ratio", "target", "verdict"]))
    return text, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(workload.SIZES), help="one workload size")
    ap.add_argument("--sizes", help="comma-separated sizes, e.g. medium,large (prints large/medium ratios)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout (progress on stderr)")
    ap.add_argument("--profile-writer", action="store_true", help="cProfile the recorder's writer thread")
    ap.add_argument("--keep", type=Path, help="copy the reasonlog database written to this path")
    ap.add_argument("--reads-from", type=Path, help="only the reads, on this database (written by --keep), each"
                                                    " --repeat times; prints the medians of their CPU p50s as JSON")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-b", action="store_true", help="skip baseline (b) (minutes of fsync; for before/after runs)")
    ap.add_argument("--src", type=Path, help="the reasonlog source folder measured (default: this tree's src),"
                                             " e.g. an older checkout's, for a before/after in turns")
    args = ap.parse_args(argv)
    sizes = args.sizes.split(",") if args.sizes else [args.size or "medium"]
    for s in sizes:
        if s not in workload.SIZES:
            ap.error(f"unknown size {s!r}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.reads_from:
        print(json.dumps(reads_only(args.reads_from, sizes[0], args.repeat)))
        return 0
    results = {}
    for s in sizes:
        results[s] = run_size(s, args.profile_writer, log, with_b=not args.no_b, keep=args.keep)
        if not args.json:
            print(report(results[s]), flush=True)
            if args.profile_writer:
                print("\n### writer thread profile\n" + results[s]["reasonlog"]["writer_profile"])
            print()
    out = {"sizes": results}
    if "medium" in results and "large" in results:
        text, out["large_vs_medium"] = ratios(results)
        if not args.json:
            print(text)
    if args.json:
        for r in results.values():
            r["reasonlog"].pop("writer_profile", None) if not args.profile_writer else None
        print(json.dumps(out, indent=1, default=str))
    ok = (all(x["pass"] for r in results.values() for x in r["rows"])
          and out.get("large_vs_medium", {}).get("pass", True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
