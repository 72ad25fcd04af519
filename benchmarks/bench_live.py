"""The server's cost of open live pages (issue 38): CPU time and memory of `reasonlog serve` with 0, 1 and 100 pages
listening to /live while a recorder in another process writes, and with 100 pages and no writes.

    python benchmarks/bench_live.py [--seconds 20] [--pages 100] [--rate 2] [--db postgresql://…]

Each phase runs `--seconds`: the recorder (this process, its own store connection) writes `--rate` calls a second
into an open session, and each page is what live.js does: an open `/live` stream that, when a change event says a
session of the list moved, fetches the sessions list again (`/`). Prints, per phase, the server's CPU seconds
(its /proc utime + stime over the phase), that per minute, its resident memory at the end, the pages fetched, and
the CPU ratio to the phase without pages (the baseline, measured in the same run). `events` counts the change
events the pages were sent, `fetched` the pages they fetched again, `calls` what the recorder wrote; on a loaded
machine the pages fetch fewer than the changes (a page busy fetching reads its stream later, and its queue keeps
the newest digest only), so CPU per fetch is the figure that carries to other loads.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", db, "serve", "--port", str(port),
                             "--no-embed"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz").status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def writer(db: str, rate: float, stop: threading.Event, written: list[int]) -> None:
    import reasonlog

    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="bench-live") as s:
        n = 0
        while not stop.wait(1 / rate if rate else 3600):
            s.call(messages=[{"role": "user", "content": f"question {n}"}], response=f"answer {n}", model="gpt-5",
                   usage=reasonlog.Usage(input_tokens=100, output_tokens=10))
            n += 1
            written[0] = n
    rec.close()


async def page(client: httpx.AsyncClient, base: str, fetched: list[int], stop: asyncio.Event) -> None:
    """One open sessions list: its /live stream, and the list fetched again when a change event moves it."""
    last = None
    async with client.stream("GET", base + "/live") as response:
        event = None
        async for line in response.aiter_lines():
            if stop.is_set():
                return
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "change":
                digest = json.loads(line[6:])["sessions"]
                fetched[1] += 1
                if last is not None and digest != last:
                    (await client.get(base + "/")).raise_for_status()
                    fetched[0] += 1
                last = digest


async def open_pages(base: str, n: int, seconds: float) -> int:
    fetched, stop = [0, 0], asyncio.Event()
    limits = httpx.Limits(max_connections=2 * n + 10)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        tasks = [asyncio.create_task(page(client, base, fetched, stop)) for _ in range(n)]
        await asyncio.sleep(seconds)
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return fetched[0], fetched[1]


def phase(name: str, pid: int, base: str, db: str, pages: int, rate: float, seconds: float) -> dict:
    stop, written = threading.Event(), [0]
    thread = threading.Thread(target=writer, args=(db, rate, stop, written), daemon=True)
    thread.start()
    time.sleep(1.0)  # the session is open and the first call written before the clock starts
    before = cpu_s(pid)
    fetched, events = asyncio.run(open_pages(base, pages, seconds)) if pages else (time.sleep(seconds) or (0, 0))
    spent = cpu_s(pid) - before
    stop.set()
    thread.join(timeout=30)
    time.sleep(1.0)
    return {"phase": name, "pages": pages, "calls_per_s": rate, "cpu_s": round(spent, 2),
            "cpu_s_per_min": round(spent * 60 / seconds, 2), "rss_mb": round(rss_mb(pid), 1), "events": events,
            "fetched": fetched, "calls": written[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--rate", type=float, default=2.0, help="calls a second the recorder writes")
    ap.add_argument("--db", help="a PostgreSQL URL (default: a new SQLite file)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    from reasonlog.demo import run_demo

    folder = tempfile.mkdtemp(prefix="bench-live-")
    db = args.db or str(Path(folder) / "live.db")
    run_demo(db, exchanges=2)  # a list of sessions to show
    proc, base = start_server(db)
    try:
        httpx.get(base + "/").raise_for_status()  # the first page render's imports and caches, before measuring
        rows = [phase("no page (baseline)", proc.pid, base, db, 0, args.rate, args.seconds),
                phase("1 page", proc.pid, base, db, 1, args.rate, args.seconds),
                phase(f"{args.pages} pages", proc.pid, base, db, args.pages, args.rate, args.seconds),
                phase(f"{args.pages} pages, no writes", proc.pid, base, db, args.pages, 0, args.seconds)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    base_cpu = rows[0]["cpu_s"] or 0.01
    for r in rows:
        r["cpu_ratio_to_baseline"] = round(r["cpu_s"] / base_cpu, 1)
        r["cpu_ms_per_fetch"] = round(r["cpu_s"] * 1000 / r["fetched"], 1) if r["fetched"] else None
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
