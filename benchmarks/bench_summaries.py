"""The offline summarizer over the demo and the imported trading logs: every session summarised, and how long.

    .venv/bin/python benchmarks/bench_summaries.py [--repeats 5]

Builds one database in a temporary folder: `reasonlog demo` (2 sessions) plus the AI-Trader logs from
`../shared/fixtures/real/ai-trader-agent-log` (100 model-days). Then, five times each (the fastest counts: the
machine is shared), it times
- the baseline: reading every session whole (`list_sessions` + `get_session`), which summarising must do anyway;
- summarising every session and exchange with the offline summarizer (plan + summarise + store), from empty;
- the same with every assistant message too (`--messages`).
It prints seconds and the ratio to the baseline, and exits 1 if summarising sessions and exchanges takes 1 s or more.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from reasonlog.demo import run_demo
from reasonlog.io.importing import plan as import_plan
from reasonlog.io.importing import run_import
from reasonlog.store import SessionFilter, open_store
from reasonlog.summaries import runner
from reasonlog.summaries.offline import OfflineSummarizer

TRADING = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "ai-trader-agent-log" / "agent_data"
ALL = SessionFilter(limit=None)
TARGET_S = 1.0


def build(folder: Path) -> Path:
    db = folder / "bench.db"
    run_demo(db)
    store = open_store(db)
    run_import(store, import_plan([TRADING]))
    store.checkpoint()  # the copies below take the main file alone
    store.close()
    return db


def read_all(db: Path) -> float:
    store = open_store(db)
    start = time.perf_counter()
    for s in store.list_sessions(ALL):
        store.get_session(s["id"])
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def summarise_all(db: Path, kinds: tuple[str, ...]) -> tuple[float, int]:
    store = open_store(db)
    start = time.perf_counter()
    summarizer = OfflineSummarizer()
    work = runner.plan(store, ALL, summarizer, kinds)
    report = runner.run(store, work, summarizer)
    elapsed = time.perf_counter() - start
    store.close()
    if report.failed:
        raise SystemExit(f"{report.failed} summaries failed: {report.errors[:3]}")
    return elapsed, report.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reasonlog-bench-summaries-") as tmp:
        pristine = build(Path(tmp))
        sessions = len(open_store(pristine, read_only=True).list_sessions(ALL))
        baseline = min(read_all(pristine) for _ in range(args.repeats))
        rows = [("read every session (baseline)", baseline, sessions)]
        for label, kinds in (("offline: sessions + exchanges", ("session", "exchange")),
                             ("offline: + assistant messages", ("session", "exchange", "message"))):
            best, made = float("inf"), 0
            for n in range(args.repeats):
                copy = Path(tmp) / f"copy-{label[:12].strip(':')}-{n}.db"
                copy.write_bytes(pristine.read_bytes())
                elapsed, made = summarise_all(copy, kinds)
                best = min(best, elapsed)
            rows.append((label, best, made))
    print(f"{sessions} sessions (demo + AI-Trader logs), fastest of {args.repeats}")
    print(f"{'what':<32} {'seconds':>8} {'items':>6} {'x baseline':>10}")
    for label, seconds, items in rows:
        print(f"{label:<32} {seconds:8.3f} {items:6d} {seconds / baseline:10.1f}")
    return 0 if rows[1][1] < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
