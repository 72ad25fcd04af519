"""`reasonlog embed` of this tree against another checkout's, on the same texts in the same run (issue 34).

    .venv/bin/python benchmarks/bench_embed.py --baseline ../wt-base/src              # the spotter transcripts
    .venv/bin/python benchmarks/bench_embed.py --baseline ../wt-base/src --runs 2 --fixtures \\
        claude-code-transcripts/spotter pycatan-ai-logs/session_20260109_170804

Imports the real transcripts (`--fixtures`, relative to ../shared/fixtures/real) once into a SQLite file with each
tree's `reasonlog import` (a baseline older than the schema reads only its own), then, `--runs` times and interleaved
(baseline, this tree, baseline, ...), copies that tree's file and runs `python -m reasonlog --db COPY embed --json`
with PYTHONPATH set to each tree's src: the whole command, the model's loading and the cutting into units included,
with the local model (all-MiniLM-L6-v2). It prints each run's CPU seconds (user + system, all threads, of the child)
and wall seconds, the median of each, their ratio baseline ÷ this tree, and how far the two trees' vectors of the same
texts are apart (the largest cosine distance: the order texts are batched in changes float rounding only).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "real"


def run_embed(src: Path, db: Path) -> tuple[float, float, dict]:
    """CPU seconds, wall seconds and the JSON report of `reasonlog embed` run by the code in `src` on `db`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "embed", "--json"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode:
        raise SystemExit(f"reasonlog embed with {src} exited {child.returncode}")
    return usage.ru_utime + usage.ru_stime, wall, json.loads(out)


def imported(src: Path, db: Path, fixtures: list[str]) -> Path:
    """`db` with the fixtures imported by the code in `src` (each tree its own: an older tree reads no newer schema)."""
    paths = [str(FIXTURES / f) for f in fixtures]
    subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "import", *paths], check=True,
                   env={**os.environ, "PYTHONPATH": str(src)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return db


def vectors_of(db: Path) -> dict[bytes, np.ndarray]:
    """Each embedded text's hash and its vector."""
    import sqlite3

    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT t.hash, v.vector FROM unit_vectors v JOIN unit_texts t ON t.id = v.text_id").fetchall()
    conn.close()
    return {h: np.frombuffer(v, dtype="<f4") for h, v in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the src folder of the checkout to compare with")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--fixtures", nargs="*", default=["claude-code-transcripts/spotter"])
    args = parser.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT / "src"}
    with tempfile.TemporaryDirectory() as folder:
        sources = {name: imported(src, Path(folder) / f"imported-{n}.db", args.fixtures)
                   for n, (name, src) in enumerate(trees.items())}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        kept: dict[str, Path] = {}
        for n in range(args.runs):
            for name, src in trees.items():
                db = Path(folder) / f"{name.replace(' ', '-')}-{n}.db"
                shutil.copy(sources[name], db)
                cpu, wall, report = run_embed(src, db)
                figures[name].append((cpu, wall))
                kept[name] = db
                print(f"run {n + 1}, {name}: {report['embedded']} texts ({report['units_cut']} units) embedded:"
                      f" CPU {cpu:.1f} s, wall {wall:.1f} s", flush=True)
        base, ours = (vectors_of(kept[name]) for name in trees)
        shared = set(base) & set(ours)  # a tree that cuts units otherwise embeds other texts (issue 34)
        apart = max(1.0 - float(base[h] @ ours[h]) for h in shared)
    cpu = {name: statistics.median(c for c, _ in runs) for name, runs in figures.items()}
    wall = {name: statistics.median(w for _, w in runs) for name, runs in figures.items()}
    print(f"median CPU: baseline {cpu['baseline']:.1f} s, this tree {cpu['this tree']:.1f} s:"
          f" {cpu['baseline'] / cpu['this tree']:.2f} × faster")
    print(f"median wall: baseline {wall['baseline']:.1f} s, this tree {wall['this tree']:.1f} s:"
          f" {wall['baseline'] / wall['this tree']:.2f} × faster")
    print(f"texts embedded: baseline {len(base)}, this tree {len(ours)}, both {len(shared)}; the largest cosine"
          f" distance between the two trees' vectors of one text: {apart:.2e}")


if __name__ == "__main__":
    main()
