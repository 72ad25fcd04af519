"""The re-sync with nothing changed: `reasonlog import` of a set it has already imported, against agentsview's
`sync` and against another checkout's code, in the same run, interleaved (issue 34).

    .venv/bin/python benchmarks/bench_resync.py --mb 211 --runs 5 --baseline-src /tmp/main/src
    .venv/bin/python benchmarks/bench_resync.py --work /tmp/resync --runs 9     # keep the set and databases

The spotter transcripts are copied to `--mb` MB as bench_import.py copies them into ~/.claude/projects of a HOME
(a temporary one, or `--work`, kept between runs so the first imports are paid once). Each tree imports the set into
its own database once, agentsview (compare_agentsview.py's install) syncs it into its own data folder once; then
`--runs` rounds of the same three commands again, nothing changed, one after the other in each round. CPU is user +
system of the child (all threads), from wait4; the median of the rounds is printed with the ratios, and each
command's output must be the same in every round (a re-sync that prints something else is not the same work).
Each tree's modules are compiled to bytecode first (as `pip install` does): with PYTHONDONTWRITEBYTECODE set, every
run would compile its modules again, and the start-up this measures would be mostly that.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_import import replicate  # noqa: E402
from compare_agentsview import QUIET, install, run  # noqa: E402


def commands(work: Path, exe: Path, trees: dict[str, Path]) -> dict[str, tuple[list[str], dict]]:
    """Each contender's re-sync command and environment."""
    projects = work / ".claude" / "projects"
    out = {name: ([sys.executable, "-m", "reasonlog", "--db", str(work / f"{name}.db"), "import", str(projects)],
                  {**os.environ, "HOME": str(work), "PYTHONPATH": str(src)}) for name, src in trees.items()}
    out["agentsview"] = ([str(exe), "sync"], {**os.environ, **QUIET, "HOME": str(work), "AGENTSVIEW_NO_DAEMON": "1"})
    return out


def prepare(work: Path, mb: int) -> None:
    projects = work / ".claude" / "projects"
    if not projects.exists():
        size = replicate(projects, mb)
        print(f"{size / 1e6:.1f} MB of Claude Code transcripts in {projects}", flush=True)


def measure(cmds: dict[str, tuple[list[str], dict]], runs: int) -> dict:
    for name, (cmd, env) in cmds.items():  # the first import (or sync) of each, once, when not done yet
        if not (Path(cmd[4]).exists() if name != "agentsview" else (Path(env["HOME"]) / ".agentsview").exists()):
            print(f"{name}: first import {run(cmd, env)[0]:.2f} CPU s", flush=True)
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    said: dict[str, set[str]] = {name: set() for name in cmds}
    for _ in range(runs):
        for name, (cmd, env) in cmds.items():
            seconds, _, _, out = run(cmd, env)
            cpu[name].append(seconds)
            said[name].add(out)
    changed = [name for name, outs in said.items() if len(outs) != 1 and name != "agentsview"]
    if changed:
        raise SystemExit(f"{', '.join(changed)}: printed something else from one round to the next")
    result: dict = {name: round(statistics.median(v), 3) for name, v in cpu.items()}
    for name in cmds:
        if name != "agentsview":
            result[f"{name}_vs_agentsview"] = round(result[name] / result["agentsview"], 2)
    if "baseline" in cmds:
        result["this_vs_baseline"] = round(result["this"] / result["baseline"], 3)
    result["runs"] = cpu
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=211)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--baseline-src", type=Path, help="another checkout's src/, measured in the same run")
    p.add_argument("--work", type=Path, help="a folder kept between runs (the set, the databases)")
    p.add_argument("--venv", type=Path, default=HERE / "out" / "agentsview")
    args = p.parse_args()
    exe = install(args.venv)
    trees = {"this": HERE.parent / "src", **({"baseline": args.baseline_src} if args.baseline_src else {})}
    for src in trees.values():
        compileall.compile_dir(str(src), quiet=1)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        prepare(work, args.mb)
        print(json.dumps(measure(commands(work, exe, trees), args.runs), indent=1))


if __name__ == "__main__":
    main()
