"""`reasonlog search` from the command line at 500,000 messages: what a person waits for, by mode.

    python benchmarks/bench_cli_search.py                    # the database bench_server.py built (benchmarks/out)
    python benchmarks/bench_cli_search.py --runs 5 --db PATH

Each run is a new `python -m reasonlog search QUERY --mode M --limit 10` process on the database bench_server.py
keeps (10,000 sessions, 500,000 messages, 500,000 units with synthetic vectors of the local model's name), timed
from start to exit. `text` needs neither the model nor the vectors: it is the baseline of the same run, and each
mode's median is printed with its ratio to it. `semantic` and `hybrid` load the local model (PyTorch) and read the
500,000 vector codes into memory: a server does both once, a command each time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERY = "cash left after the portfolio decision"


def timed(db: Path, mode: str) -> float:
    env = {**os.environ, "REASONLOG_DB": str(db)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "reasonlog", "search", QUERY, "--mode", mode, "--limit", "10"],
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"reasonlog search --mode {mode} failed: {done.stderr.strip()}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=REPO / "benchmarks" / "out" / "server-10000.db")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if not args.db.exists():
        raise SystemExit(f"{args.db}: no such database; build it with `python benchmarks/bench_server.py`")
    print(f"reasonlog search {QUERY!r} --limit 10 on {args.db.name}, {args.runs} runs a mode (a new process each)")
    medians: dict[str, float] = {}
    for mode in ("text", "keywords", "semantic", "hybrid"):
        runs = [timed(args.db, mode) for _ in range(args.runs)]
        medians[mode] = statistics.median(runs)
        print(f"  --mode {mode:<9} median {medians[mode]:6.2f} s  (min {min(runs):.2f}, max {max(runs):.2f})"
              f"  {medians[mode] / medians['text']:5.2f} x text")


if __name__ == "__main__":
    main()
