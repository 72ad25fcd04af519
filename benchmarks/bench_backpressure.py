"""Back-pressure costs no throughput: the default policy against an unbounded queue, in one run.

    python benchmarks/bench_backpressure.py --size large      # the figure issue 7 names (~5 min)
    python benchmarks/bench_backpressure.py --size medium     # quicker
    python benchmarks/bench_backpressure.py --size medium --json

Each variant runs in its own process (so its memory is its own) on the shared workload
(`../shared/bench/workload.py`), generated up front, then recorded flat out through the public API:

- `default`: `Recorder(db)` as a user gets it: the queue holds about one second of the writer's
  measured work, a full queue makes `s.call` wait (at most 100 ms), the overflow past twice the
  bound spills.
- `unbounded`: the policy before back-pressure, for comparison only: the queue's time bound is
  lifted (the module constant `QUEUE_SECONDS` set to 1e9 s in that process) and `max_queue`
  holds every event, so nothing ever waits.

Printed per variant: time until everything is durable (first call to `flush()` returning), the
recorder's memory (peak resident set while recording minus the resident set once the calls were
generated, sampled every 10 ms), dropped events, events that went through spill files, and the
caller's p50/p99/max per `s.call`. Then a run at an agent's pace (50 calls/s for 10 s) with the
default policy: `s.call` p50 and p99 on the caller's thread, beside a reference that involves no
reasonlog (serialising the last 8 messages) timed in the same loop: between calls the CPU's caches
go cold, and on a VM that alone makes any few-microsecond operation cost about 100 us.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".." / "shared" / "bench"))
sys.path.insert(0, str(REPO / "src"))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples the resident set every 10 ms on a thread of its own."""

    def __init__(self):
        self.peak, self._stop = rss_bytes(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_bytes())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, rss_bytes())


def record(calls: list[dict], rec) -> list[int]:
    """Record the workload the way an agent loop would; returns each `s.call`'s time in ns."""
    import reasonlog

    sessions, exchanges, lat = {}, {}, []
    last = {}
    for c in calls:
        last[c["session_id"]] = c["call_id"]
    perf = time.perf_counter_ns
    for c in calls:
        sid = c["session_id"]
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                            external_id=sid, started_at=c["ts_start"])
        if c["iteration"] == 0:
            exchanges[sid] = s.exchange()
        resp = c["response"]
        t = perf()
        s.call(request=c["request"], response={"role": "assistant", "content": resp["content"]},
               stop_reason=resp["stop_reason"], usage=reasonlog.Usage.from_anthropic(resp["usage"]),
               latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=resp["id"], raw=resp)
        lat.append(perf() - t)
        if c["iteration"] == c["n_iterations"] - 1:
            exchanges.pop(sid).end()
        if c["call_id"] == last[sid]:
            sessions.pop(sid).end()
    return lat


def pct(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] / 1000


def run_variant(size: str, variant: str) -> dict:
    import workload

    import reasonlog
    from reasonlog.capture import writer

    calls = list(workload.generate(size))
    # The generated calls are the harness's, not the agent's: an agent does not hold 1.7 GB of finished
    # calls for the garbage collector to walk each time the recorder's allocations trigger a collection.
    gc.freeze()
    n_events = len(calls) * 2 + 4 * len({c["session_id"] for c in calls})
    options: dict = {}
    if variant == "unbounded":
        writer.QUEUE_SECONDS = 1e9  # no time bound: max_queue alone, as before back-pressure
        options["max_queue"] = n_events + 1000
    with tempfile.TemporaryDirectory(prefix="reasonlog-bp-") as tmp:
        base = rss_bytes()
        sampler = PeakRSS()
        rec = reasonlog.Recorder(Path(tmp) / "bp.db", **options)
        t0 = time.perf_counter()
        lat = record(calls, rec)
        recorded = time.perf_counter() - t0
        rec.flush()
        durable = time.perf_counter() - t0
        peak = sampler.stop()
        stats = rec.stats()
        rec.close()
        stored = reasonlog.open_store(Path(tmp) / "bp.db", read_only=True).status()["counts"]["calls"]
    return {"variant": variant, "calls": len(calls), "stored_calls": stored, "record_loop_s": round(recorded, 2),
            "durable_s": round(durable, 2), "recorder_memory_mb": round((peak - base) / 2**20, 1),
            "dropped": stats["dropped"], "spilled_events": stats["spilled_events"],
            "caller_p50_us": round(pct(lat, 50), 1), "caller_p99_us": round(pct(lat, 99), 1),
            "caller_max_ms": round(max(lat) / 1e6, 1)}


def run_paced(rate: float = 50.0, seconds: float = 10.0) -> dict:
    """An agent's pace: one call every 1/rate s, each with a history that grows, timed on the caller's thread."""
    import orjson

    import reasonlog

    with tempfile.TemporaryDirectory(prefix="reasonlog-bp-") as tmp:
        rec = reasonlog.Recorder(Path(tmp) / "paced.db")
        history: list[dict] = []
        lat, ref = [], []
        with rec.session(agent="paced", model="claude-sonnet-4-5") as s:
            start = time.perf_counter()
            for i in range(int(rate * seconds)):
                history.append({"role": "user", "content": f"question {i}"})
                t = time.perf_counter_ns()
                orjson.dumps({"model": "m", "messages": history[-8:]})  # the reference: no reasonlog at all
                ref.append(time.perf_counter_ns() - t)
                t = time.perf_counter_ns()
                s.call(messages=history, response=f"answer {i}",
                       usage=reasonlog.Usage(input_tokens=10, output_tokens=3))
                lat.append(time.perf_counter_ns() - t)
                history.append({"role": "assistant", "content": f"answer {i}"})
                time.sleep(max(0.0, start + (i + 1) / rate - time.perf_counter()))
        rec.close()
    return {"variant": f"default at {rate:g} calls/s", "calls": len(lat), "caller_p50_us": round(pct(lat, 50), 1),
            "caller_p99_us": round(pct(lat, 99), 1), "caller_mean_us": round(statistics.fmean(lat) / 1000, 1),
            "reference_p50_us": round(pct(ref, 50), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="medium", choices=["small", "medium", "large"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # the child process's own run
    args = ap.parse_args()
    if args.variant:
        result = run_paced() if args.variant == "paced" else run_variant(args.size, args.variant)
        print(json.dumps(result))
        return 0
    rows = []
    for variant in ("default", "unbounded", "paced"):
        print(f"[{args.size}] {variant} ...", file=sys.stderr)
        out = subprocess.run([sys.executable, __file__, "--size", args.size, "--variant", variant],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    default, unbounded, paced = rows
    ratio = default["durable_s"] / unbounded["durable_s"]
    if args.json:
        print(json.dumps({"rows": rows, "durable_ratio": ratio}, indent=2))
    else:
        keys = ("variant", "calls", "stored_calls", "durable_s", "recorder_memory_mb", "dropped", "spilled_events",
                "caller_p50_us", "caller_p99_us", "caller_max_ms")
        print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
        for row in rows[:2]:
            print("| " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
        print(f"\ndurable time, default / unbounded: {ratio:.2f} (target <= 1.1)")
        print(f"agent pace ({paced['variant']}): s.call p50 {paced['caller_p50_us']} us, "
              f"p99 {paced['caller_p99_us']} us; in the same loop, orjson.dumps of the last 8 messages "
              f"(no reasonlog): p50 {paced['reference_p50_us']} us")
    ok = ratio <= 1.1 and default["dropped"] == 0 and default["recorder_memory_mb"] < 300
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
