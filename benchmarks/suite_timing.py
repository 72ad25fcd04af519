"""Where the test suite's time goes, per test, in wall time and in CPU (issue 33).

A pytest plugin: `PYTHONPATH=benchmarks pytest -p suite_timing ...` appends one line per test to
`benchmarks/out/suite-times.<worker>.tsv` (node id, wall s, CPU s of the worker, CPU s of the processes it started and
waited for, quick or slow), as each test ends, so a run stopped half-way has its figures too. On a loaded machine the
CPU columns are what to compare: the wall time grows with everyone else's load, the CPU much less.
`python benchmarks/suite_timing.py [FILE.tsv ...]` sums them per module, slowest first, and in all.
"""
from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

OUT = Path(os.environ.get("SUITE_TIMING_DIR", Path(__file__).resolve().parent / "out"))


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started, (own, children) = time.perf_counter(), _cpu()
    yield
    wall, (own_after, children_after) = time.perf_counter() - started, _cpu()
    kind = "slow" if item.get_closest_marker("slow") else "quick"
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / f"suite-times.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv", "a") as out:
        out.write(f"{item.nodeid}\t{wall:.3f}\t{own_after - own:.3f}\t{children_after - children:.3f}\t{kind}\n")


def summary(files: list[Path]) -> list[str]:
    """Per module: tests, wall s, CPU s (worker and children), slowest module first; then the totals."""
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for line in (ln for f in files for ln in f.read_text().splitlines() if ln):
        node, wall, own, children, _ = line.split("\t")
        row = modules[node.split("::")[0]]
        row[0], row[1], row[2] = row[0] + 1, row[1] + float(wall), row[2] + float(own) + float(children)
    rows = sorted(modules.items(), key=lambda kv: -kv[1][2])
    total = [sum(r[i] for _, r in rows) for i in range(3)]
    return [f"{m:60} {int(n):5} {w:9.1f} {c:8.1f}" for m, (n, w, c) in rows] + \
        [f"{'all':60} {int(total[0]):5} {total[1]:9.1f} {total[2]:8.1f}"]


if __name__ == "__main__":
    given = [Path(a) for a in sys.argv[1:]] or sorted(OUT.glob("suite-times.*.tsv"))
    print(f"{'module':60} {'tests':>5} {'wall s':>9} {'CPU s':>8}")
    print("\n".join(summary(given)))
