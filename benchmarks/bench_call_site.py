"""What `s.call` costs on the agent's thread, in the default mode and with `strict=True`.

    python benchmarks/bench_call_site.py [--calls 5000] [--window 20] [--chars 400]

Each call sends a sliding window of the last `window` messages (`chars` characters each) and gets
a short answer, as an agent loop does, paced at 200 calls/s so that the writer thread keeps up and
the figure is the call site's own. Strict mode serialises each record on the caller's thread (to
raise there what the store would reject); the default mode leaves that to the writer thread.
Prints p50 and p99 per mode, in microseconds.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import reasonlog  # noqa: E402


def measure(strict: bool, calls: int, window: int, chars: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="reasonlog-site-") as tmp:
        rec = reasonlog.Recorder(Path(tmp) / "site.db", strict=strict)
        history: list[dict] = []
        lat = []
        with rec.session(agent="call site", model="claude-sonnet-4-5") as s:
            start = time.perf_counter()
            for i in range(calls):
                history.append({"role": "user", "content": f"question {i} ".ljust(chars, "x")})
                t0 = time.perf_counter_ns()
                s.call(messages=history[-window:], response=f"answer {i}",
                       usage={"input_tokens": 100 + i, "output_tokens": 20})
                lat.append(time.perf_counter_ns() - t0)
                history.append({"role": "assistant", "content": f"answer {i}"})
                time.sleep(max(0.0, start + (i + 1) / 200 - time.perf_counter()))
        rec.close()
    lat.sort()
    return {"mode": "strict" if strict else "default", "p50_us": round(lat[len(lat) // 2] / 1000, 1),
            "p99_us": round(lat[int(len(lat) * 0.99)] / 1000, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--chars", type=int, default=400)
    a = p.parse_args()
    for strict in (False, True):
        print(measure(strict, a.calls, a.window, a.chars), flush=True)


if __name__ == "__main__":
    main()
