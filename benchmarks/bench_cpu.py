"""CPU seconds (all threads) of the durable write and of the Claude Code import, against their floors and against
another checkout's code, in the same run, interleaved.

    python benchmarks/bench_cpu.py write --size medium --runs 3 [--baseline-src /path/to/main/src]
    python benchmarks/bench_cpu.py import --mb 200 --runs 3 [--baseline-src /path/to/main/src]

`write`: the medium workload of `../shared/bench/workload.py` (5,000 calls, 18 MB of unique content) recorded
by a `Recorder` with the default background writer until `flush()` and `close()` return, in a fresh process; its CPU
beside `../shared/bench/sketch_dedup.py`'s (the floor: a dedup store with no text index, masking or costs).
`import`: the spotter transcripts replicated to --mb (as `bench_import.py` does) imported by `reasonlog import`
into a new database, then again with nothing changed, beside ccusage 20.0.24 `claude daily --json` re-reading
the files; CPU is user + system of the child and its threads, peak memory its maximum resident set. Each checkout's
modules are compiled to bytecode first, as `pip install` does: with PYTHONDONTWRITEBYTECODE set (as on this machine)
every `reasonlog import` would otherwise compile the ~100 modules it imports (about 0.2 s of CPU each run).
Each figure is the median of --runs; the runs of every program alternate, so load moves them alike.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench"

# The child that records the workload: its CPU is counted from after the workload is generated.
WRITE_CHILD = r"""
import json, os, resource, sys, tempfile
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import workload, reasonlog
calls = list(workload.generate(sys.argv[3]))
last = {c["session_id"]: c["call_id"] for c in calls}
first = {}
for c in calls:
    first.setdefault(c["session_id"], c["ts_start"])
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
def user_text(messages):
    c = messages[-1]["content"]
    return c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c if b.get("type") == "text")
with tempfile.TemporaryDirectory() as d:
    t0 = cpu()
    rec = reasonlog.Recorder(d + "/w.db", max_queue=len(calls) * 2 + 2000)
    sessions, exchanges = {}, {}
    for c in calls:
        sid = c["session_id"]
        s = sessions.get(sid)
        if s is None:
            s = sessions[sid] = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"],
                                            labels={"user": c["user_id"]}, external_id=sid, started_at=first[sid])
        if c["iteration"] == 0:
            exchanges[sid] = s.exchange(input=user_text(c["request"]["messages"]))
        r = c["response"]
        s.call(request=c["request"], response={"role": "assistant", "content": r["content"]}, model=c["model"],
               provider=c["provider"], stop_reason=r["stop_reason"], usage=reasonlog.Usage.from_anthropic(r["usage"]),
               latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=r["id"], raw=r)
        if c["iteration"] == c["n_iterations"] - 1:
            exchanges.pop(sid).end()
        if last[sid] == c["call_id"]:
            sessions.pop(sid).end()
    rec.flush(timeout=None)
    rec.close(timeout=None)  # counted: a store may leave work for its close (text waiting to be indexed, schema 25)
    t1 = cpu()
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))
print(json.dumps({"cpu_s": round(t1 - t0, 3), "bytes": size}))
"""


def child_cpu(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """CPU seconds and peak MiB of one command run in a fresh probe process (maxrss of children is a running max)."""
    probe = [sys.executable, "-c", "import resource,subprocess,sys;r=subprocess.run(sys.argv[1:],capture_output=True,"
             "text=True);u=resource.getrusage(resource.RUSAGE_CHILDREN);"
             "print(u.ru_utime+u.ru_stime, u.ru_maxrss/1024);sys.stderr.write(r.stdout+r.stderr);"
             "sys.exit(r.returncode)", *cmd]
    out = subprocess.run(probe, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    cpu, mib = map(float, out.stdout.split()[:2])
    return cpu, mib, out.stderr


def write_once(src: Path, size: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", WRITE_CHILD, str(src), str(BENCH), size],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(src)})
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    done = json.loads(out.stdout.splitlines()[-1])
    return float(done["cpu_s"]), int(done["bytes"])


def sketch_once(size: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, str(BENCH / "sketch_dedup.py"), "--size", size],
                         capture_output=True, text=True, check=True)
    done = json.loads(out.stdout)
    return float(done["cpu_s"]), int(done["bytes"])


def bench_write(args) -> dict:
    """CPU seconds of each, and the bytes of the database each left (its files after close: `*_bytes`)."""
    runs: dict[str, list[float]] = {k: [] for k in ("sketch", "this", "baseline", "sketch_bytes", "this_bytes",
                                                    "baseline_bytes")}
    measured = [("sketch", lambda: sketch_once(args.size)), ("this", lambda: write_once(ROOT / "src", args.size))]
    if args.baseline_src:
        measured.append(("baseline", lambda: write_once(args.baseline_src, args.size)))
    for _ in range(args.runs):
        for name, once in measured:
            cpu, size = once()
            runs[name].append(cpu)
            runs[name + "_bytes"].append(size)
    return _summary(runs, "sketch")


def import_once(src: Path, projects: Path, db: Path) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    cli = [sys.executable, "-m", "reasonlog", "--db", str(db), "import", str(projects)]
    first, mib, _ = child_cpu(cli, env)
    again, _, _ = child_cpu(cli, env)
    return first, again, mib


def bench_import(args) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_import import replicate
    from compare_ccusage import install_ccusage
    exe = install_ccusage(args.cache)
    for src in (ROOT / "src", args.baseline_src):
        if src:
            compileall.compile_dir(str(src), quiet=1)  # as pip install does (see the module's docstring)
    runs: dict[str, list[float]] = {k: [] for k in ("ccusage", "this", "this_again", "this_peak_mib", "baseline",
                                                     "baseline_again", "baseline_peak_mib")}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        work = Path(tmp)
        projects = work / "claude" / "projects"
        size = replicate(projects, args.mb)
        env = {**os.environ, "HOME": str(work), "CLAUDE_CONFIG_DIR": str(work / "claude")}
        for _ in range(args.runs):
            runs["ccusage"].append(child_cpu([str(exe), "claude", "daily", "--json", "--offline", "--timezone",
                                              "UTC"], env)[0])
            for name, src in (("this", ROOT / "src"), ("baseline", args.baseline_src)):
                if src:
                    first, again, mib = import_once(src, projects, work / f"{name}.db")
                    runs[name].append(first)
                    runs[f"{name}_again"].append(again)
                    runs[f"{name}_peak_mib"].append(mib)
    out = _summary(runs, "ccusage")
    out["transcripts_mb"] = round(size / 1e6, 1)
    for name in ("this", "baseline"):
        if runs[name]:
            out[f"{name}_again_vs_first"] = round(out[f"{name}_again"] / out[name], 4)
    return out


def _summary(runs: dict[str, list[float]], floor: str) -> dict:
    out: dict = {k: round(statistics.median(v), 3) for k, v in runs.items() if v}
    out["runs"] = {k: v for k, v in runs.items() if v}
    for name in ("this", "baseline"):
        if name in out:
            out[f"{name}_vs_{floor}"] = round(out[name] / out[floor], 2)
            out[f"{name}_vs_{floor}_paired"] = _paired(runs[name], runs[floor], 2)
    if "baseline" in out:
        out["this_vs_baseline"] = round(out["this"] / out["baseline"], 3)
        out["this_vs_baseline_paired"] = _paired(runs["this"], runs["baseline"], 3)
    return out


def _paired(a: list[float], b: list[float], digits: int) -> float:
    """The median of each run's own ratio: the runs alternate, so a run's figures share the machine's state (its
    speed moved by ±20 % between runs here, which the ratio of two medians keeps and a run's ratio does not)."""
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), digits)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["write", "import"])
    p.add_argument("--size", default="medium", choices=["small", "medium", "large"])
    p.add_argument("--mb", type=int, default=200)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--baseline-src", type=Path, help="another checkout's src/, measured in the same run")
    p.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "out" / "ccusage")
    args = p.parse_args()
    result = bench_write(args) if args.what == "write" else bench_import(args)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
