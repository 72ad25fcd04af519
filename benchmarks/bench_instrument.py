"""What instrumenting an SDK client adds to each call, against a local server that answers at once.

An instrumented client and the same client bare call the same 127.0.0.1 server, interleaved (so
drift in the machine hits both alike), with the default background writer. Prints p50 of each,
the added time per call at p50 in µs and as a share of the bare call.

    python benchmarks/bench_instrument.py [--calls 3000]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import anthropic  # noqa: E402
import openai  # noqa: E402

import reasonlog  # noqa: E402
from reasonlog.capture.anthropic import instrument_anthropic  # noqa: E402
from reasonlog.capture.openai import instrument_openai  # noqa: E402
from sdk_server import FixtureServer, Reply, load_json  # noqa: E402

HISTORY = [{"role": "user", "content": "Hello"}]


def anthropic_pair(url: str):
    make = lambda: anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)  # noqa: E731
    call = lambda c: c.messages.create(model="claude-test", max_tokens=64, messages=HISTORY)  # noqa: E731
    return make(), make(), instrument_anthropic, call, load_json("anthropic-messages", "anthropic-text.json")


def openai_pair(url: str):
    make = lambda: openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)  # noqa: E731
    call = lambda c: c.chat.completions.create(model="gpt-test", messages=HISTORY)  # noqa: E731
    return make(), make(), instrument_openai, call, load_json("openai-chat", "openai-text.json")


def measure(server: FixtureServer, recorder, pair, calls: int) -> tuple[float, float]:
    bare, instrumented, instrument, call, payload = pair(server.url)
    server.default = Reply(200, json.dumps(payload).encode(), "application/json")
    instrument(instrumented, recorder)
    times = {"bare": [], "instrumented": []}
    for i in range(calls + 200):
        order = (("bare", bare), ("instrumented", instrumented))
        for name, client in order if i % 2 else order[::-1]:
            start = time.perf_counter_ns()
            call(client)
            if i >= 200:  # the first calls warm connections, caches and the writer
                times[name].append(time.perf_counter_ns() - start)
    return statistics.median(times["bare"]) / 1000, statistics.median(times["instrumented"]) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per client and SDK (default 3000)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, FixtureServer() as server:
        recorder = reasonlog.Recorder(Path(tmp) / "bench.db")  # the default background writer
        for label, pair in (("anthropic messages.create", anthropic_pair),
                            ("openai chat.completions.create", openai_pair)):
            bare, inst = measure(server, recorder, pair, args.calls)
            rows.append((label, bare, inst, inst - bare, (inst - bare) / bare * 100))
        recorder.close()
        stats = recorder.stats()
    print(f"{'call':32} {'bare p50 µs':>12} {'instr. p50 µs':>14} {'added µs':>9} {'added %':>8}")
    for label, bare, inst, added, pct in rows:
        print(f"{label:32} {bare:12.0f} {inst:14.0f} {added:9.1f} {pct:7.1f}%")
    print(f"calls per client: {args.calls}; recorder: {stats}")


if __name__ == "__main__":
    main()
