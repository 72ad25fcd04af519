"""What `reasonlog proxy` adds to a model call, against calling the same upstream directly in the same run.

The upstream (tests/proxy_upstream.py: recorded Anthropic payloads, streamed when asked) and the proxy (`reasonlog
proxy`, recording into a temporary database) each run in their own process; the client calls both, interleaved,
so drift in the machine hits both alike. Measures:

- added latency per request, p50 and p99 (unstreamed Messages call; targets: <= 1 ms and <= 5 ms);
- time to the first byte of a stream's body (target: within 1 ms of direct, at p50);
- 100 streams at once through the proxy, each compared byte for byte with what the upstream sends;
- the proxy's resident memory after each fifth of 10,000 requests, and that every call was recorded. RSS grows
  with SQLite's page cache (32 MiB per connection, store/sqlite.py) as the database grows, so the Python heap of
  a proxy run in this process is measured too (tracemalloc, after a warm-up): the target "flat" is about it.

    python benchmarks/bench_proxy.py [--requests 3000] [--memory-requests 10000] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from proxy_upstream import ANSWERS  # noqa: E402

import reasonlog  # noqa: E402

BODY = json.dumps({"model": "claude-opus-4-5", "max_tokens": 64,
                   "messages": [{"role": "user", "content": "Hello, how are you?"}]}).encode()
STREAM_BODY = json.dumps({"model": "claude-opus-4-5", "max_tokens": 64, "stream": True,
                          "messages": [{"role": "user", "content": "Hello, how are you?"}]}).encode()
HEADERS = {"content-type": "application/json", "x-api-key": "sk-ant-bench", "anthropic-version": "2023-06-01"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process exited: {proc.stderr.read() if proc.stderr else ''}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


@contextlib.contextmanager
def processes(db: Path):
    """The upstream and the proxy, each in its own process; yields (upstream port, proxy port, proxy pid)."""
    up_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    upstream = subprocess.Popen([sys.executable, str(ROOT / "tests" / "proxy_upstream.py"), str(up_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    proxy = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "proxy", "--port", str(proxy_port),
                              "--upstream", f"http://127.0.0.1:{up_port}"], stderr=subprocess.PIPE, text=True,
                             env=env)
    try:
        wait_for(up_port, upstream)
        wait_for(proxy_port, proxy)
        yield up_port, proxy_port, proxy.pid
    finally:
        for proc in (proxy, upstream):
            proc.terminate()
            proc.wait(30)


def timed_call(conn: http.client.HTTPConnection, body: bytes) -> tuple[float, float, bytes]:
    """(seconds to the whole answer, seconds to the first body byte, the body)."""
    start = time.perf_counter()
    conn.request("POST", "/v1/messages", body=body, headers=HEADERS)
    response = conn.getresponse()
    first = response.read(1)
    first_at = time.perf_counter() - start
    rest = response.read()
    return time.perf_counter() - start, first_at, first + rest


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(up_port: int, proxy_port: int, n: int) -> dict:
    direct, proxied = (http.client.HTTPConnection("127.0.0.1", p) for p in (up_port, proxy_port))
    d_total, p_total, d_first, p_first = [], [], [], []
    for i in range(n + 200):
        d, p = timed_call(direct, BODY), timed_call(proxied, BODY)
        ds, ps = timed_call(direct, STREAM_BODY), timed_call(proxied, STREAM_BODY)
        assert p[2] == d[2] == ANSWERS["anthropic"][0] and ps[2] == ds[2] == ANSWERS["anthropic"][1]
        if i >= 200:  # warm-up: connections, caches, the writer's first batches
            d_total.append(d[0]), p_total.append(p[0]), d_first.append(ds[1]), p_first.append(ps[1])
    ms = 1000
    return {"requests": n,
            "direct_p50_ms": percentile(d_total, .5) * ms, "proxy_p50_ms": percentile(p_total, .5) * ms,
            "direct_p99_ms": percentile(d_total, .99) * ms, "proxy_p99_ms": percentile(p_total, .99) * ms,
            "added_p50_ms": (percentile(p_total, .5) - percentile(d_total, .5)) * ms,
            "added_p99_ms": (percentile(p_total, .99) - percentile(d_total, .99)) * ms,
            "ratio_p50": percentile(p_total, .5) / percentile(d_total, .5),
            "ttfb_direct_p50_ms": percentile(d_first, .5) * ms, "ttfb_proxy_p50_ms": percentile(p_first, .5) * ms,
            "ttfb_added_p50_ms": (percentile(p_first, .5) - percentile(d_first, .5)) * ms}


def concurrent_streams(proxy_port: int, streams: int = 100) -> dict:
    def one(_: int) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=60)
        return timed_call(conn, STREAM_BODY)[2] == ANSWERS["anthropic"][1]

    start = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        same = sum(pool.map(one, range(streams)))
    return {"streams": streams, "identical": same, "seconds": time.perf_counter() - start}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def memory(proxy_port: int, pid: int, n: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", proxy_port)
    marks, every = [], max(n // 5, 1)
    for i in range(1, n + 1):
        timed_call(conn, STREAM_BODY if i % 2 else BODY)
        if i % every == 0:
            marks.append(rss_kib(pid))
    return {"requests": n, f"rss_kib_every_{every}": marks, "growth_after_first_mark_kib": marks[-1] - marks[0]}


def python_heap(up_port: int, db: Path, n: int) -> dict:
    """The Python heap of a proxy run in this process (tracemalloc), after a warm-up of 1,000 calls and after
    `n` more: what RSS cannot tell apart from SQLite's page cache filling as the database grows."""
    import gc
    import tracemalloc

    from reasonlog.capture.proxy import Proxy, Running
    from reasonlog.capture.proxy_record import Recording
    from reasonlog.capture.proxy_sessions import Sessions

    recorder = reasonlog.Recorder(db)
    recording = Recording(Sessions(recorder))
    running = Running(Proxy({name: f"http://127.0.0.1:{up_port}" for name in ("anthropic", "openai", "google")},
                            recording))
    conn = http.client.HTTPConnection("127.0.0.1", running.port)

    def send(count: int) -> int:
        for i in range(count):
            timed_call(conn, STREAM_BODY if i % 2 else BODY)
        while recording.count < sent + count:
            time.sleep(0.01)
        recorder.flush()
        gc.collect()
        return sent + count

    sent = 0
    sent = send(1000)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    sent = send(n)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    running.stop()
    recording.close()
    recorder.close()
    return {"requests": n, "heap_growth_bytes": after - before, "per_request_bytes": (after - before) / n}


def recorded_calls(db: Path) -> int:
    store = reasonlog.open_store(db, read_only=True)
    return sum(s["call_count"] for s in store.list_sessions(reasonlog.SessionFilter(limit=None)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--memory-requests", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reasonlog-bench-proxy-") as folder:
        db = Path(folder) / "proxy.db"
        with processes(db) as (up_port, proxy_port, pid):
            result = {"latency": latency(up_port, proxy_port, args.requests),
                      "concurrent": concurrent_streams(proxy_port),
                      "memory": memory(proxy_port, pid, args.memory_requests),
                      "python_heap": python_heap(up_port, Path(folder) / "heap.db", args.memory_requests)}
        sent = 2 * (args.requests + 200) + 100 + args.memory_requests
        result["recorded"] = {"sent_through_proxy": sent, "calls_recorded": recorded_calls(db)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for section, values in result.items():
        print(section + ": " + ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in values.items()))


if __name__ == "__main__":
    main()
