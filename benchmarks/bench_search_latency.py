"""Text search on the medium store, this tree against another checkout's, and with 1 MB of text waiting (issue 34).

    .venv/bin/python benchmarks/bench_search_latency.py --baseline-src ../wt-base/src [--repeats 15]

Each tree, in a fresh process, writes the medium workload of `../shared/bench/workload.py` (5,000 calls) with
`store.write_batch` in batches of 32 calls' events (the background writer's smallest batch) into a new SQLite file,
closes it, opens it again and times `store.search(Q, limit=20)` and `store.search(Q, limit=None)` for each query (CPU,
the median of --repeats, after one warm-up). This tree then writes the `small` workload of another seed (240 calls,
about 0.8 MB of new text), which waits for a block (store/search_pending.py, the threshold raised for it), and times
the same searches with that text waiting: what a search costs on a live store at worst. Prints each
median in milliseconds and this tree ÷ the baseline; the hits of the two trees must be the same.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench"
QUERIES = ["the", "rror", "laacbuen_async", "the scheduler never checks", "日本語"]

CHILD = r"""
import json, statistics, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import workload
from reasonlog.model import CallRecorded, SessionStarted
from reasonlog.store import SessionFilter, open_store
queries, repeats, waiting = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
calls = list(workload.generate("medium"))
def events(calls, prefix=""):
    out, started = [], set()
    for c in calls:
        sid = prefix + c["session_id"]
        if sid not in started:
            started.add(sid)
            out.append(SessionStarted(session_id=sid, started_at=c["ts_start"], agent=c["agent"]))
        out.append(CallRecorded(call_id=prefix + c["call_id"], session_id=sid, exchange_id=None,
                                started_at=c["ts_start"], model=c["model"], request=c["request"],
                                response={"role": "assistant", "content": c["response"]["content"]}))
    return out
def timed(store):
    out = {}
    for q in queries:
        for limit in (20, None):
            store.search(q, SessionFilter(limit=None), limit=limit)
            times, hits = [], None
            for _ in range(repeats):
                t = time.process_time()
                hits = store.search(q, SessionFilter(limit=None), limit=limit)
                times.append(time.process_time() - t)
            out[f"{q}|{limit}"] = [round(statistics.median(times) * 1000, 3),
                                   [(h["session_id"], h["message_idx"], h["kind"]) for h in hits]]
    return out
with tempfile.TemporaryDirectory() as d:
    store = open_store(d + "/m.db")
    every = events(calls)
    for k in range(0, len(every), 64):
        store.write_batch(every[k:k + 64])
    store.close()
    store = open_store(d + "/m.db")
    result = {"at_rest": timed(store)}
    if waiting:
        try:
            from reasonlog.store import search_pending as pending  # schema 26
        except ImportError:  # a baseline tree from before it
            from reasonlog.store import fts_pending as pending  # type: ignore[no-redef]
        pending.CHARS, pending.ROWS = 10 ** 9, 10 ** 9
        again = events(workload.generate("small", seed=7), prefix="w-")  # 240 calls, all their texts new
        for k in range(0, len(again), 64):
            store.write_batch(again[k:k + 64])
        import sqlite3
        db = sqlite3.connect(d + "/m.db")
        rows = db.execute("SELECT COUNT(*) FROM search_pending").fetchone()[0]
        result["waiting_rows"] = rows
        result["waiting"] = timed(store)
print(json.dumps(result))
"""


def child(src: Path, repeats: int, waiting: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(BENCH), json.dumps(QUERIES), str(repeats),
                           "1" if waiting else "0"], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    base = child(args.baseline_src.resolve(), args.repeats, False)["at_rest"]
    this = child(ROOT / "src", args.repeats, True)
    print(f"store.search on the medium store, CPU ms (median of {args.repeats}); {this['waiting_rows']:,} rows waiting"
          " in the last column")
    print(f"{'query':34s} {'limit':>5s} {'baseline':>9s} {'this':>9s} {'ratio':>6s} {'waiting':>9s}  same hits")
    for key, (ms, hits) in this["at_rest"].items():
        query, limit = key.split("|")
        b_ms, b_hits = base[key]
        print(f"{query!r:34s} {limit:>5s} {b_ms:9.2f} {ms:9.2f} {ms / b_ms:6.2f} {this['waiting'][key][0]:9.2f}"
              f"  {'yes' if hits == b_hits else 'NO'}")


if __name__ == "__main__":
    main()
