"""`reasonlog mcp`'s tools at 500,000 messages (issue 37): each tool's answer time through the MCP SDK, and the size
of its answers, beside the same question asked of the `reasonlog` command.

    python benchmarks/bench_mcp.py                   # the bench_server.py database (built once, cached in out/)
    python benchmarks/bench_mcp.py --sessions 1000   # a quicker, smaller run

The database is bench_server.py's (10,000 trading model-days, 500,000 messages). The server is `reasonlog mcp`'s
own (`reasonlog.mcp.server.build`), asked by the SDK's client in the same process over its in-memory transport, so
the figures are the tools' and the protocol's, not a pipe's. Each tool is asked `--requests` times (queries in turn,
after a warm-up): p50 and p95 in ms, and its answers' mean size in characters and in tokens (characters / 4, the
documented estimate; no tokenizer's files can be fetched here). Beside: the same question through the command
(`reasonlog search`, `show`, `stats --by day`), each a process, best of 3 wall time: what an agent would pay
running the CLI instead.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_server  # noqa: E402

import reasonlog  # noqa: E402

QUERIES = ["position buy", "NVDA price", "cash after", "sell signal", "model-07 decision"]


def questions(session_id: str, call_ref: str) -> list[tuple[str, list[dict], list[str]]]:
    """(tool, its arguments in turn, the same question as a command's arguments)."""
    return [
        ("search_history", [{"query": q} for q in QUERIES], ["search", QUERIES[0], "--mode", "keywords", "--json"]),
        ("tool_history", [{"subject": q} for q in QUERIES], ["search", QUERIES[1], "--json"]),
        ("get_session", [{"session": session_id}], ["show", session_id]),
        ("get_call", [{"call": call_ref}], ["replay", call_ref]),
        ("usage", [{"by": "day"}, {"by": "model"}], ["stats", "--by", "day", "--json"]),
    ]


async def ask(server, tool: str, arguments: list[dict], requests: int) -> tuple[list[float], list[int]]:
    from mcp import Client

    times, sizes = [], []
    async with Client(server) as client:
        await client.call_tool(tool, arguments[0])  # warm-up
        for n in range(requests):
            t0 = time.perf_counter()
            result = await client.call_tool(tool, arguments[n % len(arguments)])
            times.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result.content
            sizes.append(len(json.dumps(result.structured_content)))
    return times, sizes


def command_seconds(db: Path, args: list[str]) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    from reasonlog.mcp.server import build
    from reasonlog.mcp.tools import Archive

    db, _ = bench_server.targets(None, args.sessions)
    bench_server.build(db, args.sessions)
    store = reasonlog.open_store(db, read_only=True)
    (session,) = store.list_sessions(reasonlog.SessionFilter(limit=1))
    server = build(Archive(store))
    print(f"reasonlog mcp at {args.sessions:,} sessions ({args.sessions * 50:,} messages), load"
          f" {os.getloadavg()[0]:.1f}; {args.requests} requests a tool")
    print("| tool | p50 ms | p95 ms | answer chars | ≈ tokens | the command | command s |")
    print("|---|--:|--:|--:|--:|---|--:|")
    for tool, arguments, command in questions(session["id"], f"{session['id']}#2"):
        times, sizes = asyncio.run(ask(server, tool, arguments, args.requests))
        times.sort()
        mean = statistics.mean(sizes)
        cli = command_seconds(db, command)
        print(f"| {tool} | {statistics.median(times):.1f} | {times[int(0.95 * (len(times) - 1))]:.1f} |"
              f" {mean:,.0f} | {mean / 4:,.0f} | `reasonlog {' '.join(command[:2])}…` | {cli:.2f} |")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
