"""`reasonlog reason save` from the shell, end to end: it sits on an agent's critical path.

    python benchmarks/bench_reason_save.py            # 30 runs of each, p50 and p95
    python benchmarks/bench_reason_save.py --runs 60

Each run is the real command in a new process (`.venv/bin/reasonlog`, as an agent would call it) saving a
compact record and a long form into a SQLite file, read back before the receipt is printed. Baselines in the
same run: `python -c pass` (the interpreter's start-up, which no Python CLI can beat) and
`reasonlog --version` (click and the whole command tree). Target: p50 under 150 ms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).with_name("reasonlog")


def timed(argv: list[str], runs: int, env: dict) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env)
        out.append((time.perf_counter() - t) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "c.json").write_text('{"summary": "Split the job by day; days are independent.",'
                                     ' "key_decisions": ["split by day"], "files_modified": ["jobs.py"]}')
        (work / "d.md").write_text("Why: the days share no state. " * 40)
        env = {**os.environ, "REASONLOG_DB": str(work / "t.db"), "XDG_DATA_HOME": str(work / "data")}
        save = [str(EXE), "reason", "save", "--session", "bench", "--agent", "a", "--group", "G", "--phase",
                "approach", "--content-file", str(work / "c.json"), "--details-file", str(work / "d.md")]
        timed(save, 3, env)  # the database and the artifact folder exist from here on
        results = {"python -c pass": timed([sys.executable, "-c", "pass"], args.runs, env),
                   "reasonlog --version": timed([str(EXE), "--version"], args.runs, env),
                   "reasonlog reason save": timed(save, args.runs, env)}
    for name, ms in results.items():
        p50, p95 = statistics.median(ms), statistics.quantiles(ms, n=20)[18]
        print(f"  {name:<24} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    p50 = statistics.median(results["reasonlog reason save"])
    base = statistics.median(results["python -c pass"])
    print(f"reason save p50 {p50:.1f} ms = {p50 / base:.1f} x python start-up; target < 150 ms:"
          f" {'met' if p50 < 150 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
