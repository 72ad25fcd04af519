"""Every call of one long session read back: `get_call` of each against `call_details` of all, in the same run.

    python benchmarks/bench_call_details.py --calls 2000

The session is an agent with a sliding window (the last 10 exchanges, then the question), as the fault tests'
recorders send: each call's context is stored as runs into the previous call's, so `get_call` of call k decodes
calls 0..k, and reading every call one by one is quadratic; `call_details` decodes the session once. Both answers
are checked equal before the times are printed (CPU of this process, SQLite in a temporary folder).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import reasonlog

WINDOW = 10


def record(db: Path, calls: int) -> list[str]:
    rec = reasonlog.Recorder(db, writer="sync")
    s = rec.session(agent="long")
    history: list[dict] = []
    for i in range(calls):
        history.append({"role": "user", "content": f"question {i}: what next?"})
        s.call(request={"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": history[-2 * WINDOW - 1:]},
               response={"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
    s.end()
    rec.close()
    store = reasonlog.open_store(db)
    try:
        return [c["id"] for c in store.get_session(s.id)["calls"]]
    finally:
        store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ids = record(Path(tmp) / "long.db", args.calls)
        store = reasonlog.open_store(Path(tmp) / "long.db")
        try:
            started = time.process_time()
            one_by_one = [store.get_call(i) for i in ids]
            each = time.process_time() - started
            started = time.process_time()
            at_once = store.call_details(ids)
            once = time.process_time() - started
        finally:
            store.close()
    assert at_once == one_by_one
    print(f"{len(ids):,} calls of one session: get_call of each {each:.2f} s CPU, call_details of all {once:.2f} s"
          f" ({each / once:.1f} x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
