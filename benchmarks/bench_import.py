"""Importing Claude Code transcripts, against ccusage on the same files, in one run.

    .venv/bin/python benchmarks/bench_import.py                 # the spotter samples replicated to ~200 MB
    .venv/bin/python benchmarks/bench_import.py --mb 50         # smaller
    .venv/bin/python benchmarks/bench_import.py --single-gb 1   # also one transcript file of 1 GB

The spotter samples (../shared/fixtures/real/claude-code-transcripts/spotter) are copied until the
total reaches --mb, each copy with its own session ids, message ids, request ids and uuids, so no two
copies share a call. Then, each in its own process:

- ccusage 20.0.24 `claude daily --json --offline --timezone UTC` (best of 3), the baseline;
- `reasonlog import` into a new database: the first import;
- `reasonlog import` again with nothing changed;
- 1 % more lines appended to every file (new ids), then `reasonlog import` again;
- `reasonlog stats --by day --json` on the result (best of 3).

Peak memory is the import process's maximum resident set. Bytes on disk are the database files
after the imports (WAL checkpointed) against the transcripts' size. With --single-gb, the main sample
is repeated inside one file (one session that compacts each time round, as a long session does) to
that size and imported alone: its time and peak memory.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare_ccusage import install_ccusage

ROOT = Path(__file__).resolve().parents[1]
SPOTTER = ROOT.parent / "shared" / "fixtures" / "real" / "claude-code-transcripts" / "spotter"
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROVIDER_ID = re.compile(rb"\b(msg_|req_|toolu_)([0-9A-Za-z]+)")


def renamed(data: bytes, k: int) -> bytes:
    """The same transcript with every uuid and provider id made unique to copy `k`."""
    data = UUID.sub(lambda m: m.group(0)[:-6] + b"%06x" % k, data)
    return PROVIDER_ID.sub(lambda m: m.group(1) + m.group(2) + b"c%d" % k, data)


def replicate(target: Path, megabytes: int) -> int:
    files = sorted(p for p in SPOTTER.rglob("*.jsonl"))
    size, k = 0, 0
    while size < megabytes << 20:
        for f in files:
            rel = f.relative_to(SPOTTER)
            out = target / f"proj{k:03d}" / Path(*(renamed(part.encode(), k).decode() for part in rel.parts))
            out.parent.mkdir(parents=True, exist_ok=True)
            data = renamed(f.read_bytes(), k)
            out.write_bytes(data)
            size += len(data)
        k += 1
    return size


def append_one_percent(target: Path) -> int:
    added = 0
    for f in sorted(target.rglob("*.jsonl")):
        lines = f.read_bytes().splitlines(keepends=True)
        tail = lines[-max(1, len(lines) // 100):]
        extra = PROVIDER_ID.sub(lambda m: m.group(1) + m.group(2) + b"x1", b"".join(tail))
        extra = UUID.sub(lambda m: m.group(0)[:-7] + b"e" + m.group(0)[-6:], extra)
        with open(f, "ab") as out:
            out.write(extra)
        added += len(extra)
    return added


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (MB) of the child, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return took, (peak if peak > before else 0) // 1024, out.stdout


def peak_of(cmd: list[str]) -> tuple[float, float, str]:
    """Time and peak memory of one command, measured by a fresh process (maxrss of children is a running max)."""
    probe = [sys.executable, "-c", "import resource,subprocess,sys,time;t=time.perf_counter();"
             "r=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
             "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024);"
             "sys.stderr.write(r.stdout+r.stderr);sys.exit(r.returncode)", *cmd]
    out = subprocess.run(probe, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    took, mb = map(float, out.stdout.split())
    return took, mb, out.stderr


def db_bytes(db: Path) -> int:
    code = f"from reasonlog.store import open_store; open_store({str(db)!r}).checkpoint()"
    subprocess.run([sys.executable, "-c", code], check=True)
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def best(n: int, cmd: list[str], env: dict | None = None) -> float:
    return min(timed(cmd, env)[0] for _ in range(n))


def run(work: Path, megabytes: int, cache: Path) -> list[tuple]:
    exe = install_ccusage(cache)
    config = work / "claude"
    projects = config / "projects"
    size = replicate(projects, megabytes)
    home = work / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    cc = best(3, [str(exe), "claude", "daily", "--json", "--offline", "--timezone", "UTC"], env)
    db = work / "r.db"
    cli = [sys.executable, "-m", "reasonlog", "--db", str(db)]
    first, first_mb, _ = peak_of([*cli, "import", str(projects)])
    second, _, _ = peak_of([*cli, "import", str(projects)])
    append_one_percent(projects)
    third, _, _ = peak_of([*cli, "import", str(projects)])
    stats = best(3, [*cli, "stats", "--by", "day", "--json"])
    stored = db_bytes(db)
    return [
        ("transcripts (MB)", f"{size / 1e6:.1f}", "", "", ""),
        ("ccusage claude daily (s)", f"{cc:.2f}", "", "", ""),
        ("first import (s), vs ccusage", f"{first:.2f}", f"{first / cc:.1f}", "<= 8", _ok(first / cc <= 8)),
        ("second import, unchanged (s), vs first", f"{second:.2f}", f"{second / first:.3f}", "<= 1/20",
         _ok(second / first <= 1 / 20)),
        ("import after 1 % appended (s), vs first", f"{third:.2f}", f"{third / first:.3f}", "<= 1/10",
         _ok(third / first <= 1 / 10)),
        ("stats --by day (s), vs ccusage", f"{stats:.2f}", f"{stats / cc:.2f}", "<= 1/10", _ok(stats / cc <= 0.1)),
        ("bytes on disk vs transcripts", f"{stored:,}", f"{stored / size:.3f}", "<= 0.5", _ok(stored / size <= 0.5)),
        ("peak memory of the first import (MB)", f"{first_mb:.0f}", "", "< 300", _ok(first_mb < 300)),
    ]


def single(work: Path, gigabytes: float) -> list[tuple]:
    main = (SPOTTER / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl").read_bytes()
    target = work / "one" / "projects" / "p" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    target.parent.mkdir(parents=True)
    size, k = 0, 0
    with open(target, "wb") as out:
        while size < gigabytes * (1 << 30):
            # One session (the same sessionId), new message ids and uuids each time round.
            data = PROVIDER_ID.sub(lambda m: m.group(1) + m.group(2) + b"r%d" % k, main)  # noqa: B023
            out.write(data)
            size += len(data)
            k += 1
    took, mb, _ = peak_of([sys.executable, "-m", "reasonlog", "--db", str(work / "one.db"), "import", str(target)])
    return [("one transcript (MB)", f"{size / 1e6:.0f}", "", "", ""),
            ("its import (s)", f"{took:.1f}", "", "", ""),
            ("peak memory of its import (MB)", f"{mb:.0f}", "", "< 300", _ok(mb < 300))]


def _ok(passed: bool) -> str:
    return "pass" if passed else "FAIL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="total size of the replicated transcripts")
    parser.add_argument("--single-gb", type=float, default=0.0, help="also import one transcript of this size")
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "out" / "ccusage")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        rows = run(Path(tmp), args.mb, args.cache)
        if args.single_gb:
            rows += single(Path(tmp), args.single_gb)
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'value':>14}  {'ratio':>7}  {'target':>8}  verdict")
    for name, value, ratio, target, verdict in rows:
        print(f"{name:<{width}}  {value:>14}  {ratio:>7}  {target:>8}  {verdict}")
    return 0 if all(r[4] != "FAIL" for r in rows) else 1


if __name__ == "__main__":
    shutil.which("npm") or sys.exit("npm is needed to install ccusage")
    sys.exit(main())
