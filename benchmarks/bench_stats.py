"""`reasonlog stats --by day` against ccusage re-parsing the same Claude Code transcripts, start-up included.

    .venv/bin/python benchmarks/bench_stats.py                  # the spotter samples replicated to ~211 MB
    .venv/bin/python benchmarks/bench_stats.py --mb 50 --runs 5
    .venv/bin/python benchmarks/bench_stats.py --baseline-src ../old/src   # and an older tree's `stats`, interleaved

The transcripts are bench_import.py's (the spotter samples copied to --mb, each copy with its own ids),
written once into benchmarks/out/stats-<mb>/ with the database `reasonlog import` makes of them, and kept
for later runs. Then, interleaved --runs times, each in a fresh process, and the median of each printed:

- ccusage 20.0.24 `claude daily --json --offline --timezone UTC` (the baseline);
- `reasonlog stats --by day --json` over the imported database;
- the floor of any Python command: `python -c pass` (`-S`: no site packages) and `python -c pass` as the
  console script starts it, `python -c "import reasonlog.cli.entry"` (what `reasonlog` imports first), and
  `python -c "import reasonlog.cli.quick_stats"` (the entry's quick path: it loads store/usage_sql.py, which
  imports nothing, by its path).

The ratio `stats / ccusage` of wall times is the issue's figure (target <= 0.1); CPU times are printed beside
them, since on a loaded machine a process waits for a core for longer than it runs.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_import import replicate
from compare_ccusage import install_ccusage

ROOT = Path(__file__).resolve().parents[1]


def prepare(folder: Path, megabytes: int, cache: Path) -> tuple[list[str], list[str], dict]:
    """The transcripts and their database (made once), and the two commands with ccusage's environment."""
    config, db = folder / "claude", folder / "r.db"
    if not db.exists():
        shutil.rmtree(folder, ignore_errors=True)
        size = replicate(config / "projects", megabytes)
        print(f"  {size / 1e6:.1f} MB of transcripts written; importing", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "import", str(config / "projects")],
                       check=True, capture_output=True)
    (folder / "home").mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(folder / "home"), "CLAUDE_CONFIG_DIR": str(config)}
    ccusage = [str(install_ccusage(cache)), "claude", "daily", "--json", "--offline", "--timezone", "UTC"]
    stats = [sys.executable, "-m", "reasonlog", "--db", str(db), "stats", "--by", "day", "--json"]
    return ccusage, stats, env


def seconds(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the child's and its children's) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr.decode()}")
    return took, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="total size of the replicated transcripts")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "out" / "ccusage")
    parser.add_argument("--baseline-src", type=Path, help="also time `stats` with this `src` folder (git archive)")
    args = parser.parse_args()
    folder = ROOT / "benchmarks" / "out" / f"stats-{args.mb}"
    ccusage, stats, env = prepare(folder, args.mb, args.cache)
    # As installed: bytecode compiled once and kept (a shell that sets PYTHONDONTWRITEBYTECODE recompiles
    # every module of every command, 0.4 s of reasonlog's here).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    sources = [ROOT / "src", *([args.baseline_src.resolve()] if args.baseline_src else [])]
    for src in sources:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, capture_output=True)
    size = sum(p.stat().st_size for p in (folder / "claude").rglob("*.jsonl"))
    here = {**os.environ, "PYTHONPATH": str(sources[0])}  # this tree's reasonlog, whatever the venv installed
    quick = "import reasonlog.cli.quick_stats"
    commands = {"ccusage claude daily": (ccusage, env), "reasonlog stats --by day": (stats, here),
                "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], None),
                "python -c pass": ([sys.executable, "-c", "pass"], None),
                "python -c 'import reasonlog.cli.entry'": ([sys.executable, "-c", "import reasonlog.cli.entry"], here),
                f"python -c '{quick}'": ([sys.executable, "-c", quick], here)}
    if args.baseline_src:
        commands["reasonlog stats, baseline src"] = (stats, {**os.environ, "PYTHONPATH": str(sources[1])})
    took: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (cmd, cmd_env) in commands.items():
            took[name].append(seconds(cmd, cmd_env))
    wall = {name: statistics.median(w for w, _ in values) for name, values in took.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in took.items()}
    base = "ccusage claude daily"
    print(f"{size / 1e6:.1f} MB of transcripts; medians of {args.runs} interleaved runs (wall, and CPU time:"
          f" user + system), each with its ratio to ccusage's:")
    for name in commands:
        print(f"  {name:<40} wall {wall[name] * 1000:7.1f} ms ({wall[name] / wall[base]:.3f})"
              f"  CPU {cpu[name] * 1000:7.1f} ms ({cpu[name] / cpu[base]:.3f})")
    ratio = wall["reasonlog stats --by day"] / wall[base]
    print(f"  stats / ccusage (wall) {ratio:.3f}, target <= 0.1: {'met' if ratio <= 0.1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
