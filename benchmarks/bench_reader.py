"""The import's reading side alone: the Claude Code reader and the import loop over a folder of transcripts, with a
store that keeps nothing but checks each event as the store does first (`check_event`, a call's instant).

    python benchmarks/bench_reader.py PROJECTS --baseline-src ../base/src --runs 5       # CPU s, in turns
    python benchmarks/bench_reader.py PROJECTS --baseline-src ../base/src --instructions  # valgrind's count

Each run is a fresh process; its CPU (user + system) is measured around the reading alone, after the imports. The two
checkouts run in turns, and the medians and their ratio are printed. With `--instructions`, each is counted once by
callgrind (the whole process, and the same process over one small file: the difference is the reading's).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import gc, resource, sys
from pathlib import Path
from reasonlog import model
from reasonlog.io.formats.claude_code import importer
from reasonlog.io.import_file import EVENT_KINDS, import_file
from reasonlog.io.importer import Report

class Checking:
    events = 0
    def write_batch(self, events, counters=None, *, batch_id=None):
        self.events += len(events)
        for event in events:
            model.check_event(event)
            if isinstance(event, model.CallRecorded):
                event.started_at = model.format_instant(event.started_at)
    def existing_ids(self, kind, ids): return set()
    def is_store_failure(self, exc): return False
    def last_call_id(self, session_id): return None
    def import_file(self, path): return None
    def import_files(self): return []

files = list(importer.sources(Path(sys.argv[1])))
gc.set_threshold(50_000, 10, 10)  # as an import runs (io/importing.py)
store, report = Checking(), Report()
emitted = {kind: set() for kind, _ in EVENT_KINDS.values()}
before = resource.getrusage(resource.RUSAGE_SELF)
for path in files:
    import_file(store, path, importer, report, emitted)
after = resource.getrusage(resource.RUSAGE_SELF)
print(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, store.events, len(report.skipped))
"""


def run(src: Path, folder: Path, valgrind: bool = False) -> float:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0")
    if not valgrind:
        out = subprocess.run([sys.executable, "-c", CHILD, str(folder)], env=env, check=True, capture_output=True,
                             text=True).stdout.split()
        return float(out[0])
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg", sys.executable, "-c",
                               CHILD, str(folder)], env=env, check=True, capture_output=True, text=True)
    return float(re.search(r"Collected : (\d+)", done.stderr).group(1))  # type: ignore[union-attr]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="a folder of Claude Code transcripts (~/.claude/projects's shape)")
    p.add_argument("--baseline-src", type=Path, required=True, help="the src/ of the checkout to compare with")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--instructions", action="store_true", help="count instructions with valgrind instead")
    args = p.parse_args()
    trees = {"baseline": args.baseline_src.resolve(), "this": ROOT / "src"}
    for src in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, capture_output=True)
    if args.instructions:
        with tempfile.TemporaryDirectory() as tmp:
            small = Path(tmp) / "project"
            small.mkdir()
            first = next(iter(sorted(args.folder.rglob("*.jsonl"))))
            (small / first.name).write_bytes(b"".join(first.open("rb").readlines()[:50]))
            counts = {name: run(src, args.folder, True) - run(src, small, True) for name, src in trees.items()}
        for name, n in counts.items():
            print(f"{name}: {n:,.0f} instructions reading {args.folder}")
        print(f"this / baseline: {counts['this'] / counts['baseline']:.3f}")
        return
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(args.runs):
        for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
            cpu[name].append(run(trees[name], args.folder))
    for name, values in cpu.items():
        print(f"{name}: CPU s {' '.join(f'{v:.3f}' for v in values)}  median {statistics.median(values):.3f}")
    print(f"this / baseline: {statistics.median(cpu['this']) / statistics.median(cpu['baseline']):.3f}"
          f"  (pairs {' '.join(f'{t / b:.2f}' for t, b in zip(cpu['this'], cpu['baseline'], strict=True))})")


if __name__ == "__main__":
    main()
