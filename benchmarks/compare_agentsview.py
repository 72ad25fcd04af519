"""reasonlog against agentsview (the Go archive on PyPI) on the same Claude Code transcripts, interleaved (issue 34).

    .venv/bin/python benchmarks/compare_agentsview.py                    # the spotter samples copied to 211 MB
    .venv/bin/python benchmarks/compare_agentsview.py --mb 20 --runs 3
    .venv/bin/python benchmarks/compare_agentsview.py --home DIR --runs 1          # keeps the HOME for the next line
    .venv/bin/python benchmarks/compare_agentsview.py --home DIR --servers-only --browser --requests 9

agentsview 0.46.1 is installed from PyPI with pip into a virtual environment of its own (benchmarks/out/agentsview,
once; never into reasonlog's). The spotter transcripts are copied to `--mb` MB as bench_import.py copies them (every
copy with its own ids) into ~/.claude/projects of a temporary HOME (or `--home`, copied only when it holds none),
which both read: agentsview with AGENTSVIEW_NO_DAEMON=1 (telemetry and the update check off), reasonlog with `--db`
in the same folder. Each figure is taken for both in turn, `--runs` times, and the median kept; CPU is user + system
of the child process (all its threads), taken from wait4, or for a server from /proc/PID/stat before and after.
reasonlog's modules are compiled to bytecode first, as `pip install` does: with PYTHONDONTWRITEBYTECODE set (as on
this machine) each command would otherwise compile every module it imports, about 0.09 s of a CLI search.

- first import: `reasonlog import DIR` into a new file against `agentsview sync` into a new data folder;
- re-sync with nothing changed: the same commands again;
- usage by day: `reasonlog stats --by day --json` against `agentsview usage daily --json --all --offline --no-sync`;
- a search from the CLI, one process per query: `reasonlog search Q --json --limit 10` against `agentsview session
  search Q --limit 10`, which asks its running server (started for this: its CLI reads no database itself), so its
  figure is the client's CPU plus what the server spent meanwhile;
- disk: the database files after the import (with their -wal); memory: the import's peak RSS.

The figures over HTTP, both servers on 127.0.0.1 (`reasonlog serve --no-embed`, `agentsview serve --no-sync`): each
is `--requests` requests a side after one that is not kept (the first loads what it uses), taken in turns (who goes
first swapped every turn); it reports the median wall time of each side and its server's mean CPU per request
(/proc, all threads):

- a search: `GET /v1/search?q=Q&limit=10` against `GET /api/v1/search/content?pattern=Q&limit=10` (the same
  substring search of messages and tool output that its CLI asks), for each query; the median over the queries;
- the session with the most messages (217 calls, 439 messages at 211 MB), three ways. Its page as each server sends
  it: reasonlog's dashboard page `/sessions/ID` (HTML, the first 200 entries of its timeline rendered) against
  agentsview's `/api/v1/sessions/ID/messages?from=0&limit=1000&direction=asc` (the JSON its page is drawn from; its
  page itself is a script): not the same work. The whole session as JSON from each: `/v1/sessions/ID?limit=1000`
  (calls, exchanges, outcomes and every message) against the two reads agentsview's page makes for it,
  `/api/v1/sessions/ID` then the messages above. With `--browser`, the page drawn in Chromium (headless, a new tab
  a view, the browser's cache warm after the first): from the start of the navigation until the session's first
  words are in the page, by the page's clock (`performance.now()`, looked for every 10 ms), with each server's CPU
  meanwhile (for agentsview, every request its page made by then).

It prints each figure and the ratio reasonlog ÷ agentsview (below 1: reasonlog is ahead).
"""
from __future__ import annotations

import argparse
import compileall
import html
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent
VERSION = "agentsview==0.46.1"
QUERIES = ("phoenix", "xterm.js", "mix phx.server", "OTEL instrumentation", "migration", "LiveView")
T = TypeVar("T")
View = Callable[[], tuple[float, float]]  # wall seconds of a view, and its server's CPU seconds meanwhile
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
    body = body_of(port, path)
    return time.perf_counter() - started, len(body)


def body_of(port: int, path: str) -> bytes:
    """The answer to one GET on a new connection; OSError for a status other than 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    if answer.status != 200:
        raise OSError(f"GET {path}: HTTP {answer.status}")
    return body


@dataclass(frozen=True)
class Server:
    """A server on 127.0.0.1:`port` in process `pid`."""

    port: int
    pid: int

    def viewer(self, *paths: str) -> View:
        """A view of `paths` (GETs one after the other, as a page asks them): its wall seconds, and the server's
        CPU seconds meanwhile."""
        def view() -> tuple[float, float]:
            before = process_cpu(self.pid)
            wall = sum(get(self.port, path)[0] for path in paths)
            return wall, process_cpu(self.pid) - before
        return view


def in_turns(sides: Sequence[Callable[[], T]], requests: int) -> list[list[T]]:
    """`requests` measures of each side, after one that is not kept (the first loads what it uses), taken in turns,
    the order reversed every other turn, so that all meet the same load."""
    for side in sides:
        side()
    kept: list[list[T]] = [[] for _ in sides]
    for n in range(requests):
        for k in (range(len(sides)) if n % 2 == 0 else reversed(range(len(sides)))):
            kept[k].append(sides[k]())
    return kept


def first_words(theirs: int, ours: int, session: str, words: int = 4) -> str:
    """The first words of the session's first message as agentsview answers them (the text to wait for), checked to
    be in reasonlog's page as sent (a page drawn differently would never be seen as drawn)."""
    first = json.loads(body_of(theirs, f"/api/v1/sessions/{session}/messages?from=0&limit=1&direction=asc"))
    text = " ".join(first["messages"][0]["content"].split()[:words])
    if text not in html.unescape(body_of(ours, f"/sessions/{session}").decode()):
        raise SystemExit(f"reasonlog's page of {session} does not show {text!r}, the first words agentsview shows")
    return text


class Chromium:
    """Debian's Chromium through Playwright (headless); a page is drawn when `text` is in it."""

    ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]

    def __enter__(self) -> Chromium:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path="/usr/bin/chromium", args=self.ARGS)
        self._context = self._browser.new_context(viewport={"width": 1366, "height": 900})
        self._views = 0
        return self

    def __exit__(self, *exc: object) -> None:
        self._browser.close()
        self._playwright.stop()

    def viewer(self, server: Server, path: str, text: str) -> View:
        """From the address typed in a new tab until `text` is in the page (by the page's own clock, from the start
        of its navigation; looked for every 10 ms): seconds, and the server's CPU meanwhile (every request the page
        made until then; the browser's own CPU is not counted). The tabs share the browser's cache (scripts and
        styles load once); each address is new (`?_=N`), so reasonlog's cache of pages that live pages keep open
        is never what answers."""
        def view() -> tuple[float, float]:
            self._views += 1
            tab = self._context.new_page()
            before = process_cpu(server.pid)
            tab.goto(f"http://127.0.0.1:{server.port}{path}?_={self._views}", wait_until="commit")
            found = tab.wait_for_function("t => document.body?.textContent.includes(t) && performance.now()",
                                          arg=text, polling=10, timeout=60_000)
            seen = found.json_value() / 1000, process_cpu(server.pid) - before
            tab.close()
            return seen
        return view


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

    def servers(self, queries: tuple[str, ...], requests: int, browser: bool) -> None:
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
            a, b = Server(mine, ours.pid), Server(theirs_port, theirs.pid)
            for q in queries:
                self._cli_search(q, theirs.pid, served)
            for q in queries:
                quoted = urllib.parse.quote(q)
                self.add_views("search over HTTP", a.viewer(f"/v1/search?q={quoted}&limit=10"),
                               b.viewer(f"/api/v1/search/content?pattern={quoted}&limit=10"), requests)
            self._session_page(a, b, requests, browser)
        finally:
            for server in (ours, theirs):
                server.terminate()
                server.wait(30)

    def add_views(self, name: str, mine: View, theirs: View, requests: int) -> None:
        """One figure: `requests` views of each side in turns (`in_turns`), the median wall time of each and its
        server's mean CPU per view."""
        ours, theirs = in_turns((mine, theirs), requests)
        self.add(f"{name}, wall s (median)", *(statistics.median(w for w, _ in side) for side in (ours, theirs)))
        self.add(f"{name}, server CPU s", *(statistics.fmean(c for _, c in side) for side in (ours, theirs)))

    def _session_page(self, a: Server, b: Server, requests: int, browser: bool) -> None:
        """The longest session three ways: the page as each server sends it, the whole session as JSON from each,
        and (`browser`) the page drawn in Chromium."""
        session = self._longest_session()
        their_page = (f"/api/v1/sessions/{session}", f"/api/v1/sessions/{session}/messages?from=0&limit=1000"
                      "&direction=asc")  # what its page asks for the session and its messages (limit 1000)
        self.add_views("session page as sent (HTML ÷ JSON)", a.viewer(f"/sessions/{session}"),
                       b.viewer(their_page[1]), requests)
        self.add_views("whole session as JSON", a.viewer(f"/v1/sessions/{session}?limit=1000"),
                       b.viewer(*their_page), requests)
        if browser:
            first = first_words(b.port, a.port, session)
            with Chromium() as chromium:
                self.add_views("session page drawn in Chromium", chromium.viewer(a, f"/sessions/{session}", first),
                               chromium.viewer(b, f"/sessions/{session}", first), requests)

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
        print(f"{'figure':52} {'reasonlog':>10} {'agentsview':>10} {'ratio':>7}")
        for name, (ours, theirs) in self.figures.items():
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"{name:52} {a:10.3f} {b:10.3f} {a / b if b else float('nan'):7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=211, help="the spotter transcripts copied to this many MB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=7, help="timed requests a side for each HTTP figure")
    parser.add_argument("--browser", action="store_true", help="also the session page drawn in Chromium")
    parser.add_argument("--home", type=Path, help="a HOME kept for the next run (default: a temporary one)")
    parser.add_argument("--servers-only", action="store_true",
                        help="no import: the searches and the session page on the databases --home holds")
    parser.add_argument("--venv", type=Path, default=HERE / "out" / "agentsview")
    args = parser.parse_args()
    if args.servers_only and args.home is None:
        parser.error("--servers-only needs --home, the folder a run without it imported into")
    exe = install(args.venv)
    compileall.compile_dir(str(HERE.parent / "src"), quiet=1)  # as pip install does (see PYTHONDONTWRITEBYTECODE)
    with tempfile.TemporaryDirectory() as folder:
        pair = Pair(args.home.resolve() if args.home else Path(folder), exe)
        print(f"{transcripts(pair.projects, args.mb) / 1e6:.1f} MB of Claude Code transcripts in {pair.projects};"
              f" agentsview {subprocess.run([str(exe), 'version'], capture_output=True, text=True).stdout.split()[1]}",
              flush=True)
        for n in range(args.runs):
            if not args.servers_only:
                pair.imports()
                pair.usage_by_day()
            pair.servers(QUERIES, args.requests, args.browser)
            print(f"run {n + 1} of {args.runs} done", flush=True)
        pair.report()


def transcripts(projects: Path, megabytes: int) -> int:
    """Bytes of the transcripts in `projects`, the spotter samples copied there to `megabytes` MB first if empty."""
    if not projects.exists() or not any(projects.iterdir()):
        sys.path.insert(0, str(HERE))
        from bench_import import replicate

        replicate(projects, megabytes)
    return sum(f.stat().st_size for f in projects.rglob("*.jsonl"))


if __name__ == "__main__":
    main()
