"""The fault matrix of docs/reliability.md: each fault on purpose, and what survived it.

    python benchmarks/fault_matrix.py            # a Markdown table on stdout
    python benchmarks/fault_matrix.py --json     # the rows as JSON

Runs the scenarios of tests/test_fault_matrix.py (tests/faultkit.py) with more records, in a temporary
folder. The read-only and full-disk rows need root (chattr, bind and tmpfs mounts) and are left out
otherwise. Exit status 0 only when every row lost nothing and duplicated nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

import faultkit  # noqa: E402

COLUMNS = ("scenario", "written", "found", "lost", "duplicates", "wrong_replays", "longest_wait_ms", "integrity",
           "note")


def scenarios(root: bool):
    yield "many", lambda tmp: faultkit.many_processes(tmp, processes=8, recorders=2, calls=250)
    yield "lock", lambda tmp: faultkit.lock_held(tmp, hold_s=3.0, calls=300, rate=50, busy_ms=100)
    if root:
        yield "rofile", lambda tmp: faultkit.read_only_file(tmp, calls=300, rate=100)
        yield "rodir", lambda tmp: faultkit.read_only_folder(tmp, calls=300, rate=100)
    if faultkit.can_mount_tmpfs():
        yield "full", lambda tmp: faultkit.full_disk(tmp, calls=400, rate=200, size_kib=3072)
    for rate in (50.0, 0.0):
        yield f"kill{rate:g}", lambda tmp, rate=rate: faultkit.killed(tmp, rate=rate, kill_after_s=2.0)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for name, run in scenarios(os.geteuid() == 0):
        with tempfile.TemporaryDirectory(prefix=f"reasonlog-fault-{name}-") as tmp:
            out = run(Path(tmp))
        rows.append(out.row())
        print(f"{out.scenario}: written {out.written}, lost {out.lost}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        for row in rows:
            print("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    bad = [r for r in rows if r["duplicates"] or r["wrong_replays"] or (r["lost"] and "SIGKILL" not in r["scenario"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
