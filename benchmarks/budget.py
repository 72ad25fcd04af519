"""The CPU budget of the durable write and of the import, in instructions: the same count on every run, whatever
the machine's load.

    python benchmarks/budget.py                       # measure, compare with benchmarks/budget.json, exit 1 if over
    python benchmarks/budget.py --record "why"        # measure and write the figures into budget.json, with the reason
    python benchmarks/budget.py --figures other.json  # compare with another file's figures (what the test does)
    python benchmarks/budget.py --only write --size medium   # the write of another workload (~10 min; not recorded)
    python benchmarks/budget.py --only write --src ../base/src   # another checkout's code (a baseline; not recorded)

Each figure is the number of instructions valgrind's callgrind counts in one thread of a fresh Python process:
- `write`: `store.write_batch` of the `small` workload of `../shared/bench/workload.py` (240 calls of 20
  sessions, 0.8 MB of unique content, made into events by a `Recorder` beforehand), batches of 100 events,
  into a new SQLite database: masking, contents, the timeline, costs, the text index and the commits;
- `import`: `run_import` of a fixed slice of the real Claude Code transcripts in
  `../shared/fixtures/real/claude-code-transcripts/spotter` into a new database.
Everything else (Python's start, imports, making the workload, a first small write and import that compile the
patterns and load what is loaded lazily) runs in the process's main thread, which is not counted
(`--separate-threads=yes`). PYTHONHASHSEED, the redaction key, HOME and the time zone are fixed, so the count
repeats to well under 1 %.

The check fails when a figure is more than `TOLERANCE` over the recorded one. A change that needs more records
the new figure in the same commit (`--record "the reason"`), and the reason stays in budget.json's history.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SPOTTER = SHARED / "fixtures" / "real" / "claude-code-transcripts" / "spotter"
FIGURES = ROOT / "benchmarks" / "budget.json"
TOLERANCE = 0.10
NAMES = ("write", "import")
IMPORT_LINES = 1_200  # the first lines of the main spotter transcript, beside its small files and sub-agents


# ------------------------------------------------------------------ the child, under valgrind


def events_of(size: str) -> list:
    """The workload's calls as the events a recorder hands its writer (collected by a sink of our own)."""
    sys.path.insert(0, str(SHARED / "bench"))
    import workload

    import reasonlog

    class Collect:
        def __init__(self) -> None:
            self.events: list = []

        def write_batch(self, events, counters=None):
            self.events += events

        def add_counters(self, counters):
            return None

        def close(self):
            return None

    sink = Collect()
    rec = reasonlog.Recorder(sink=sink, writer="sync")
    sessions: dict = {}
    calls = list(workload.generate(size))
    last = {c["session_id"]: c["call_id"] for c in calls}
    for c in calls:
        s = sessions.get(c["session_id"])
        if s is None:
            s = sessions[c["session_id"]] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                                        labels={"user": c["user_id"]}, external_id=c["session_id"],
                                                        started_at=c["ts_start"])
        r = c["response"]
        s.call(request=c["request"], response={"role": "assistant", "content": r["content"]}, model=c["model"],
               provider=c["provider"], stop_reason=r["stop_reason"], usage=reasonlog.Usage.from_anthropic(r["usage"]),
               latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=r["id"], raw=r)
        if last[c["session_id"]] == c["call_id"]:
            sessions.pop(c["session_id"]).end()
    rec.close()
    return sink.events


def write_events(db: Path, events: list) -> None:
    from reasonlog.store import open_store

    store = open_store(db)
    for start in range(0, len(events), 100):
        store.write_batch(events[start:start + 100])
    store.close()


def transcripts(folder: Path, lines: int) -> Path:
    """The spotter's small transcripts and sub-agents, and the first `lines` lines of its main transcript."""
    shutil.copytree(SPOTTER, folder)
    main = next(folder.glob("*-*-*-*-*.jsonl"))
    head = main.read_bytes().splitlines(keepends=True)[:lines]
    main.chmod(0o644)
    main.write_bytes(b"".join(head))
    return folder


def import_folder(db: Path, folder: Path) -> None:
    from reasonlog.io.importing import plan, run_import
    from reasonlog.store import open_store

    store = open_store(db)
    run_import(store, plan([folder]))
    store.close()


def child(what: str, work: Path, size: str = "small") -> None:
    """Warm up in the main thread, then do the measured work in a thread of its own (the one counted)."""
    if what == "write":
        write_events(work / "warm.db", events_of("small")[:40])
        events = events_of(size)
        job = threading.Thread(target=write_events, args=(work / "w.db", events), name="measured")
    else:
        import_folder(work / "warm.db", transcripts(work / "warm", 50))
        folder = transcripts(work / "spotter", IMPORT_LINES)
        job = threading.Thread(target=import_folder, args=(work / "i.db", folder), name="measured")
    before = set(sys.modules)
    job.start()
    job.join()
    if set(sys.modules) - before:  # compiling a module is not the work measured, and its count varies (.pyc or not)
        raise SystemExit(f"budget: the measured {what} imported {sorted(set(sys.modules) - before)}: warm them up")


# ------------------------------------------------------------------ the parent


def environment(work: Path, src: Path = ROOT / "src") -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    return {**keep, "PYTHONHASHSEED": "0", "PYTHONPATH": str(src), "HOME": str(work),
            "XDG_DATA_HOME": str(work / "data"), "REASONLOG_REDACTION_KEY": "budget", "TZ": "UTC",
            "PYTHONUTF8": "1"}


def measure(what: str, size: str = "small", src: Path = ROOT / "src") -> int:
    """Instructions of the measured thread (and any thread it starts), counted by callgrind."""
    with tempfile.TemporaryDirectory(prefix="reasonlog-budget-") as tmp:
        work = Path(tmp)
        (work / "job").mkdir()
        out = work / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
               "--dump-instr=no", "--compress-strings=no", sys.executable,
               str(Path(__file__).resolve()), "--child", what, str(work / "job"), "--size", size]
        run = subprocess.run(cmd, capture_output=True, text=True, env=environment(work, src), cwd=work)
        if run.returncode != 0:
            raise SystemExit(f"budget: the {what} run failed under valgrind:\n{run.stderr[-3000:]}")
        counted = [_instructions(p) for p in sorted(work.glob("callgrind.out-*")) if not p.name.endswith("-01")]
        if not counted:
            raise SystemExit(f"budget: callgrind wrote no file per thread for {what} (is --separate-threads on?)")
        return sum(counted)


def _instructions(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"budget: {path} holds no instruction total")


def over_budget(measured: dict[str, int], recorded: dict[str, int], tolerance: float = TOLERANCE) -> list[str]:
    """What grew more than `tolerance` over its recorded figure, said in a sentence each."""
    return [f"{name}: {measured[name]:,} instructions, {measured[name] / recorded[name] - 1:+.1%} over the recorded"
            f" {recorded[name]:,} (the budget allows {tolerance:.0%}; a change that needs more records the figure"
            f" with its reason: benchmarks/budget.py --record \"why\")"
            for name in NAMES if measured[name] > recorded[name] * (1 + tolerance)]


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"budget: cannot read {path}: {exc}") from None


def record(path: Path, measured: dict[str, int], reason: str) -> None:
    data = load(path) if path.exists() else {"figures": {}, "history": []}
    data["figures"] = measured
    data["history"].append({"date": datetime.date.today().isoformat(), "figures": measured, "reason": reason})
    path.write_text(json.dumps(data, indent=1) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--figures", type=Path, default=FIGURES, help="the recorded figures to compare with")
    p.add_argument("--record", metavar="REASON", help="write the measured figures into --figures, with this reason")
    p.add_argument("--only", choices=NAMES, action="append", help="measure only this figure (repeatable)")
    p.add_argument("--size", choices=("small", "medium", "large"), default="small",
                   help="the workload the write figure records (the recorded figure is small's)")
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the code to measure (another checkout's src)")
    p.add_argument("--child", nargs=2, metavar=("WHAT", "DIR"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child[0], Path(a.child[1]), a.size)
        return 0
    if (a.size != "small" or a.src != ROOT / "src") and (a.record is not None or a.only != ["write"]):
        raise SystemExit("budget: --size and --src measure the write alone (--only write), never recorded")
    if shutil.which("valgrind") is None:
        raise SystemExit("budget: valgrind is needed (apt-get install valgrind)")
    names = a.only or list(NAMES)
    recorded = load(a.figures)["figures"] if a.record is None else {}
    measured = {name: measure(name, a.size, a.src.resolve()) for name in names}
    if a.size != "small" or a.src != ROOT / "src":  # not the recorded measure: its figure alone
        print(f"write ({a.size}, {a.src}): {measured['write']:,} instructions", flush=True)
        return 0
    for name in names:
        ratio = f"  ({measured[name] / recorded[name]:.3f} of the recorded {recorded[name]:,})" if recorded else ""
        print(f"{name}: {measured[name]:,} instructions{ratio}", flush=True)
    if a.record is not None:
        record(a.figures, {**(load(a.figures)["figures"] if a.figures.exists() else {}), **measured}, a.record)
        return 0
    failures = over_budget({**recorded, **measured}, recorded)
    for line in failures:
        print("OVER BUDGET " + line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
