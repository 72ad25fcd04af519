"""A recording process for fault tests: records an agent-like session and reports what it did.

    python tests/recording_child.py --db X --tag T --calls N [--rate R] [--recorders K] [--progress]

Each recorder k keeps one session (agent `T-k`) whose history grows by a question and an answer per
call, as an agent loop's does; call i can be rebuilt by `faultkit.expected_request(T, k, i)`.
With --progress it prints `sent k i` after each `s.call` returns (for SIGKILL tests). At the end
it prints one JSON line: the longest and median time `s.call` took, and each recorder's stats.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import faultkit  # noqa: E402

import reasonlog  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--calls", type=int, required=True)
    p.add_argument("--rate", type=float, default=0.0, help="calls per second per recorder; 0: flat out")
    p.add_argument("--recorders", type=int, default=1)
    p.add_argument("--busy-ms", type=int, default=None)
    p.add_argument("--close-timeout", type=float, default=None)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--pad", type=int, default=0, help="characters of filler in each question")
    a = p.parse_args()
    options = {"busy_timeout_ms": a.busy_ms} if a.busy_ms is not None else {}
    recs = [reasonlog.Recorder(a.db, store_options=options) for _ in range(a.recorders)]
    sessions = [r.session(agent=f"{a.tag}-{k}", run=a.tag) for k, r in enumerate(recs)]
    waits = []
    start = time.perf_counter()
    for i in range(a.calls):
        for k, s in enumerate(sessions):
            request, response = faultkit.expected_request(a.tag, k, i, a.pad), faultkit.answer(a.tag, k, i)
            t0 = time.perf_counter()
            s.call(request=request, response=response, usage=reasonlog.Usage(input_tokens=10 + i, output_tokens=5))
            waits.append(time.perf_counter() - t0)
            if a.progress:
                sys.stdout.write(f"sent {k} {i}\n")
                sys.stdout.flush()
        if a.rate:
            time.sleep(max(0.0, start + (i + 1) / a.rate - time.perf_counter()))
    for s in sessions:
        s.end()
    t0 = time.perf_counter()
    closed = [r.close(timeout=a.close_timeout) for r in recs]
    close_s = time.perf_counter() - t0
    waits.sort()
    print(json.dumps({"max_wait_ms": waits[-1] * 1000, "p50_wait_ms": waits[len(waits) // 2] * 1000,
                      "close_s": close_s, "closed": closed, "stats": [r.stats() for r in recs]}), flush=True)


if __name__ == "__main__":
    main()
