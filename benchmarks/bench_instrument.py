"""What instrumenting an SDK client adds to each call, against a local server that answers at once.

An instrumented client and the same client bare call the same 127.0.0.1 server, interleaved (so
drift in the machine hits both alike), with the default background writer. Prints p50 of each,
the added time per call at p50 in µs and as a share of the bare call.

    python benchmarks/bench_instrument.py [--calls 3000]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
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

SERVER = Path(__file__).resolve().parents[1] / "tests" / "sdk_server.py"

HISTORY = [{"role": "user", "content": "Hello"}]


@contextlib.contextmanager
def local_server(fixture: str):
    """A server in its own process (like a real API, it shares no GIL with the client)."""
    proc = subprocess.Popen([sys.executable, str(SERVER), fixture], stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def anthropic_pair(url: str):
    make = lambda: anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)  # noqa: E731
    call = lambda c: c.messages.create(model="claude-test", max_tokens=64, messages=HISTORY)  # noqa: E731
    return make(), make(), instrument_anthropic, call


def openai_pair(url: str):
    make = lambda: openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)  # noqa: E731
    call = lambda c: c.chat.completions.create(model="gpt-test", messages=HISTORY)  # noqa: E731
    return make(), make(), instrument_openai, call


SDKS = (("anthropic messages.create", anthropic_pair, "anthropic-messages/anthropic-text.json"),
        ("openai chat.completions.create", openai_pair, "openai-chat/openai-text.json"))


def measure(url: str, recorder, pair, calls: int) -> tuple[float, float]:
    bare, instrumented, instrument, call = pair(url)
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
    rows, stats = [], []
    # "default": the background writer as shipped, writing while the next calls run; with a server
    # that answers at once it competes with them for the GIL. "deferred": the same writer holding
    # its batch until the end, which isolates what the adapter itself costs the agent's thread.
    writers = {"default": {}, "deferred": {"flush_interval": 3600.0, "batch_size": 10**7, "max_queue": 10**7}}
    with tempfile.TemporaryDirectory() as tmp:
        for writer, options in writers.items():
            recorder = reasonlog.Recorder(Path(tmp) / f"{writer}.db", **options)
            for label, pair, fixture in SDKS:
                with local_server(fixture) as url:
                    bare, inst = measure(url, recorder, pair, args.calls)
                rows.append((f"{label} [{writer}]", bare, inst, inst - bare, (inst - bare) / bare * 100))
            recorder.close(timeout=120)
            stats.append(recorder.stats())
    print(f"{'call [writer]':43} {'bare p50 µs':>12} {'instr. p50 µs':>14} {'added µs':>9} {'added %':>8}")
    for label, bare, inst, added, pct in rows:
        print(f"{label:43} {bare:12.0f} {inst:14.0f} {added:9.1f} {pct:7.1f}%")
    print(f"calls per client and SDK: {args.calls}")
    for writer, st in zip(writers, stats, strict=True):  # one stats per writer
        print(f"{writer} writer: written {st['written']}, dropped {st['dropped']}, rejected {st['rejected']}")


if __name__ == "__main__":
    main()
