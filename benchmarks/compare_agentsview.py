"""reasonlog against agentsview (the Go archive on PyPI) on the same Claude Code transcripts, interleaved (issue 34).

    .venv/bin/python benchmarks/compare_agentsview.py                    # the spotter samples copied to 211 MB
    .venv/bin/python benchmarks/compare_agentsview.py --mb 20 --runs 3

agentsview 0.46.1 is installed from PyPI with pip into a virtual environment of its own (benchmarks/out/agentsview,
once; never into reasonlog's). The spotter transcripts are copied to `--mb` MB as bench_import.py copies them (every
copy with its own ids) into ~/.claude/projects/ of a temporary HOME, which both read: agentsview with
AGENTSVIEW_NO_DAEMON=1 (telemetry and the update check off), reasonlog with `--db` in the same folder. Each figure is
taken for both in turn, `--runs` times, and the median kept; CPU is user + system of the child process (all its
threads), taken from wait4, or for a server from /proc/PID/stat before and after:

- first import: `reasonlog import DIR` into a new file against `agentsview sync` into a new data folder;
- re-sync with nothing changed: the same commands again;
- usage by day: `reasonlog stats --by day --json` against `agentsview usage daily --json --all --offline --no-sync`;
- a search from the CLI, one process per query: `reasonlog search Q --json --limit 10` against `agentsview session
  search Q --limit 10`, which asks its running server (started for this: its CLI reads no database itself), so its
  figure is the client's CPU plus what the server spent meanwhile;
- a search over HTTP, both servers on 127.0.0.1 (`reasonlog serve --no-embed`, `agentsview serve --no-sync`):
  `GET /v1/search?q=Q&limit=10` against `GET /api/v1/search/content?pattern=Q&limit=10` (the same substring search
  of messages and tool output that its CLI asks), wall time per request, median over the queries and runs;
- (each server having answered one search and the page below once first, to load what they use)
- the session page of the session with the most messages: reasonlog's dashboard page `/sessions/ID` against
  agentsview's `/api/v1/sessions/ID/messages` (the JSON its browser page is drawn from), wall time;
- disk: the database files after the import (with their -wal); memory: the import's peak RSS.

It prints each figure and the ratio reasonlog ÷ agentsview (below 1: reasonlog is ahead).
"""
from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSION = "agentsview==0.46.1"
QUERIES = ("phoenix", "xterm.js", "mix phx.server", "OTEL instrumentation", "migration", "LiveView")
QUIET = {"DO_NOT_TRACK": "1", "AGENTSVIEW_TELEMETRY_ENABLED": "0", "AGENTSVIEW_DISABLE_UPDATE_CHECK": "1"}


def install(venv: Path) -> Path:
    """agentsview's binary, installed with pip into `venv` once."""
    exe = venv / "bin" / "agentsview"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", VERSION], check=True)
    return exe


def _cpu_of(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _rss_of(usage) -> int:
    return usage.ru_maxrss // 1024


class Child:
    """A command run and reaped by wait4 (so that its own CPU and peak RSS are known)."""

    def __init__(self, cmd: list[str], env: dict):
        self.cmd, self.started = cmd, time.perf_counter()
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait(self) -> tuple[float, float, int, str]:
        out = self.proc.stdout.read() if self.proc.stdout else b""
        err = self.proc.stderr.read() if self.proc.stderr else b""
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        if self.proc.returncode:
            raise SystemExit(f"{' '.join(self.cmd)} exited {self.proc.returncode}: {err.decode()[-500:]}")
        return _cpu_of(usage), time.perf_counter() - self.started, _rss_of(usage), out.decode()


def run(cmd: list[str], env: dict) -> tuple[float, float, int, str]:
    return Child(cmd, env).wait()


def process_cpu(pid: int) -> float:
    """User + system seconds a running process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, path: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            get(port, path)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"nothing answered on 127.0.0.1:{port}{path} within {seconds:.0f} s")


def get(port: int, path: str) -> tuple[float, int]:
    """Wall seconds of one GET on a new connection, and the bytes of the answer (a status other than 200 stops)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    if answer.status != 200:
        raise OSError(f"GET {path}: HTTP {answer.status}")
    return time.perf_counter() - started, len(body)


def sizes(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


class Pair:
    """The two tools on one HOME: each measurement is a pair (reasonlog, agentsview) of runs of figures."""

    def __init__(self, home: Path, exe: Path):
        self.home, self.exe = home, exe
        self.db = home / "reasonlog.db"
        self.projects = home / ".claude" / "projects"
        self.ours = {**os.environ, "HOME": str(home), "PYTHONPATH": str(HERE.parent / "src")}
        self.theirs = {**os.environ, **QUIET, "HOME": str(home), "AGENTSVIEW_NO_DAEMON": "1"}
        self.figures: dict[str, tuple[list[float], list[float]]] = {}

    def reasonlog(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "reasonlog", "--db", str(self.db), *args]

    def agentsview(self, *args: str) -> list[str]:
        return [str(self.exe), *args]

    def add(self, name: str, ours: float, theirs: float) -> None:
        self.figures.setdefault(name, ([], []))
        self.figures[name][0].append(ours)
        self.figures[name][1].append(theirs)

    def imports(self) -> None:
        for path in (self.db, Path(f"{self.db}-wal"), Path(f"{self.db}-shm")):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.home / ".agentsview", ignore_errors=True)
        ours = run(self.reasonlog("import", str(self.projects)), self.ours)
        theirs = run(self.agentsview("sync"), self.theirs)
        self.add("first import, CPU s", ours[0], theirs[0])
        self.add("first import, wall s", ours[1], theirs[1])
        self.add("first import, peak RSS MiB", ours[2], theirs[2])
        ours, theirs = run(self.reasonlog("import", str(self.projects)), self.ours), run(self.agentsview("sync"),
                                                                                         self.theirs)
        self.add("re-sync, nothing changed, CPU s", ours[0], theirs[0])
        self.add("re-sync, nothing changed, wall s", ours[1], theirs[1])
        data = self.home / ".agentsview"
        self.add("disk, MB", sizes(self.db, Path(f"{self.db}-wal")) / 1e6,
                 sizes(data / "sessions.db", data / "sessions.db-wal") / 1e6)

    def usage_by_day(self) -> None:
        ours = run(self.reasonlog("stats", "--by", "day", "--json"), self.ours)
        theirs = run(self.agentsview("usage", "daily", "--json", "--all", "--offline", "--no-sync"), self.theirs)
        self.add("usage by day, CPU s", ours[0], theirs[0])

    def servers(self, queries: tuple[str, ...]) -> None:
        """Both servers up; CLI searches (agentsview's asks its server), HTTP searches and the session page."""
        mine, theirs_port = free_port(), free_port()
        ours = subprocess.Popen(self.reasonlog("serve", "--port", str(mine), "--no-embed"), env=self.ours,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        served = {k: v for k, v in self.theirs.items() if k != "AGENTSVIEW_NO_DAEMON"}
        theirs = subprocess.Popen(self.agentsview("serve", "--port", str(theirs_port), "--no-sync", "--no-browser"),
                                  env=served, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(mine, "/readyz")
            wait_for(theirs_port, "/api/v1/sessions?limit=1")
            session = self._longest_session()
            for path in ("/v1/search?q=warm&limit=10", f"/sessions/{session}"):  # first requests load what they use
                get(mine, path)
            for path in ("/api/v1/search/content?pattern=warm&limit=10", f"/api/v1/sessions/{session}/messages"):
                get(theirs_port, path)
            for q in queries:
                self._cli_search(q, theirs.pid, served)
                quoted = urllib.parse.quote(q)
                self.add("search over HTTP, wall s", get(mine, f"/v1/search?q={quoted}&limit=10")[0],
                         get(theirs_port, f"/api/v1/search/content?pattern={quoted}&limit=10")[0])
            self.add("session page, wall s", get(mine, f"/sessions/{session}")[0],
                     get(theirs_port, f"/api/v1/sessions/{session}/messages?limit=1000")[0])
        finally:
            for server in (ours, theirs):
                server.terminate()
                server.wait(30)

    def _cli_search(self, q: str, server_pid: int, served: dict) -> None:
        ours = run(self.reasonlog("search", q, "--json", "--limit", "10"), self.ours)
        before = process_cpu(server_pid)
        theirs = run(self.agentsview("session", "search", q, "--limit", "10"), served)
        self.add("search from the CLI, CPU s", ours[0], theirs[0] + process_cpu(server_pid) - before)
        self.add("search from the CLI, wall s", ours[1], theirs[1])

    def _longest_session(self) -> str:
        import sqlite3

        conn = sqlite3.connect(self.db)
        row = conn.execute("SELECT session_id FROM messages GROUP BY session_id ORDER BY COUNT(*) DESC LIMIT 1"
                           ).fetchone()
        conn.close()
        return row[0]

    def report(self) -> None:
        print(f"{'figure':40} {'reasonlog':>10} {'agentsview':>10} {'ratio':>7}")
        for name, (ours, theirs) in self.figures.items():
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"{name:40} {a:10.3f} {b:10.3f} {a / b if b else float('nan'):7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=211, help="the spotter transcripts copied to this many MB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=HERE / "out" / "agentsview")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_import import replicate

    exe = install(args.venv)
    with tempfile.TemporaryDirectory() as folder:
        pair = Pair(Path(folder), exe)
        copied = replicate(pair.projects, args.mb)
        print(f"{copied / 1e6:.1f} MB of Claude Code transcripts in {pair.projects}; agentsview"
              f" {subprocess.run([str(exe), 'version'], capture_output=True, text=True).stdout.split()[1:2]}",
              flush=True)
        for n in range(args.runs):
            pair.imports()
            pair.usage_by_day()
            pair.servers(QUERIES)
            print(f"run {n + 1} of {args.runs} done", flush=True)
        pair.report()


if __name__ == "__main__":
    main()
