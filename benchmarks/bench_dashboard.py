"""The dashboard's server-side render times, against the JSON API over the same data in the same run.

    python benchmarks/bench_dashboard.py                                  # SQLite
    python benchmarks/bench_dashboard.py --db postgresql://postgres@127.0.0.1:55432/postgres

Data: the 10,000 sessions of bench_server.py (built there and cached), plus two long sessions written once:
one of 1,000 timeline messages and one of 50,000 (calls that each add a question and an answer). A
`reasonlog serve` process answers; each page is fetched once (its first view, Markdown not yet rendered), then
30 times after a warm-up, and its p50 printed:

- the sessions list over 10,000 sessions (target < 100 ms), beside `GET /v1/sessions` (JSON, same filters);
- a session page with 1,000 messages, all on one page (target p50 < 200 ms);
- the first page of the 50,000-message session (target < 300 ms), beside `GET /v1/sessions/{id}?limit=200`;
  its calls send a sliding window of their last 400 messages;
- the usage page (target < 200 ms), beside `GET /v1/stats?by=day` (which also reads every call's latency for
  the median);
- the timeline of the 50,000-message session (25,000 calls), its first page of 200 calls (target < 300 ms).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_server import Server, build, targets, timed  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.model import CallRecorded, SessionStarted, Usage, stable_id  # noqa: E402


def long_session(target, messages: int, window: int | None = None) -> str:
    """A session of `messages` timeline messages (each call adds a question and its answer), written once.
    `window`: each call sends only its last `window` messages, as an agent with a sliding context does (no model
    takes 50,000 messages in one request)."""
    sid = stable_id("2024-06-01T00:00:00Z", "bench-dashboard", messages, window)
    store = reasonlog.open_store(target)
    if store.existing_ids("session", [sid]):
        store.close()
        return sid
    events: list = [SessionStarted(session_id=sid, started_at="2024-06-01T00:00:00Z", agent=f"long-{messages}",
                                   model="claude-sonnet-4-5", labels={"date": "2024-06-01"})]
    history: list = []
    for c in range(messages // 2):
        history.append({"role": "user", "content": f"step {c}: what next for **item {c}**?"})
        reply = {"role": "assistant", "content": [{"type": "text", "text": f"For item {c}, I will `run` it and "
                                                   f"then check.\n\n- done {c}\n- next {c + 1}"}]}
        at = f"2024-06-01T{(c // 3600) % 24:02d}:{(c // 60) % 60:02d}:{c % 60:02d}Z"
        events.append(CallRecorded(call_id=stable_id(at, "bench-dashboard", sid, c), session_id=sid, exchange_id=None,
                                   started_at=at, request={"model": "claude-sonnet-4-5",
                                                           "messages": history[-window:] if window else list(history)},
                                   response=reply, model="claude-sonnet-4-5",
                                   usage=Usage(input_tokens=20, output_tokens=30, cache_read_tokens=100 * c),
                                   latency_ms=900.0, stable_history=window is None))
        history.append(reply)
        if len(events) >= 2000:
            store.write_batch(events)
            events = []
    store.write_batch(events)
    store.close()
    return sid


def p50(url: str, n: int) -> float:
    return statistics.median(timed(url, n))


def first_view(url: str) -> float:
    """One fetch of a page not shown before (its Markdown not yet rendered), in ms."""
    t = time.perf_counter()
    urllib.request.urlopen(url, timeout=60).read()
    return (time.perf_counter() - t) * 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", help="a PostgreSQL URL (default: SQLite in benchmarks/out)")
    ap.add_argument("--requests", type=int, default=30)
    args = ap.parse_args(argv)
    target, _ = targets(args.db, 10_000)
    build(target, 10_000)
    one_k, fifty_k = long_session(target, 1_000), long_session(target, 50_000, window=400)
    server = Server(target)
    n = args.requests
    try:
        rows = [
            ("sessions list, 10,000 sessions", "/", 100, "/v1/sessions"),
            ("session page, 1,000 messages (one page)", f"/sessions/{one_k}?limit=1000", 200,
             f"/v1/sessions/{one_k}?limit=1000"),
            ("first page of a 50,000-message session", f"/sessions/{fifty_k}", 300,
             f"/v1/sessions/{fifty_k}?limit=200"),
            ("usage page (day, model, agent, source)", "/usage", 200, "/v1/stats?by=day"),
            ("timeline, first 200 of 25,000 calls", f"/sessions/{fifty_k}/timeline", 300,
             f"/v1/sessions/{fifty_k}?limit=200"),
        ]
        print(f"{'PostgreSQL' if args.db else 'SQLite'}: dashboard pages, p50 of {n}")
        for name, page, target_ms, api in rows:
            first = first_view(server.base + page)
            html, json_ = p50(server.base + page, n), p50(server.base + api, n)
            print(f"  {name:<42} {html:7.1f} ms  (JSON API {json_:7.1f} ms, ratio {html / json_:.2f}; first view"
                  f" {first:7.1f} ms)  target < {target_ms} ms: {'met' if html < target_ms else 'NOT met'}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
