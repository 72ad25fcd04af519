"""The longest session's page served by this tree and by other versions of reasonlog at once, asked in turns (issue
34: is the page slower than it was?).

    python benchmarks/bench_session_page.py --home DIR --version filed=../wt-old/src --version start=../wt-base/src

DIR is a HOME that compare_agentsview.py filled (`--home`): the transcripts in DIR/.claude/projects. Each version
imports them into a database of its own (DIR/page-NAME.db, kept for the next run: an older reasonlog refuses a newer
schema), then all of them serve at once (`reasonlog serve --no-embed`), and each address is asked of each in turn,
`--requests` times after one request that is not kept, the order reversed every other turn, so that all meet the same
load. The addresses: the dashboard's page of the session with the most messages (`/sessions/ID`) and the whole
session as JSON (`/v1/sessions/ID?limit=1000`). It prints each version's median wall time, its server's mean CPU per
request (/proc, all its threads), the answer's bytes, and the ratios to this tree.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare_agentsview import Server, free_port, get, in_turns, wait_for  # noqa: E402


def imported(home: Path, name: str, src: Path) -> Path:
    """The database `src`'s reasonlog imported the transcripts of `home` into (imported now if it is missing)."""
    db = home / f"page-{name}.db"
    if not db.exists():
        projects = home / ".claude" / "projects"
        done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "import", str(projects)],
                              env=environment(home, src), capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{name}'s import of {projects} failed: {done.stderr.strip()[-500:]}")
    return db


def environment(home: Path, src: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "PYTHONPATH": str(src)}


def longest_session(db: Path) -> str:
    conn = sqlite3.connect(db)
    (session,) = conn.execute("SELECT session_id FROM messages GROUP BY session_id ORDER BY COUNT(*) DESC, session_id"
                              " LIMIT 1").fetchone()
    conn.close()
    return session


def measure(home: Path, versions: dict[str, Path], paths: list[str], requests: int) -> None:
    procs, servers = [], {}
    try:
        for name, src in versions.items():
            port = free_port()
            procs.append(subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(imported(home, name, src)),
                                           "serve", "--port", str(port), "--no-embed"], env=environment(home, src),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            servers[name] = Server(port, procs[-1].pid)
        for server in servers.values():
            wait_for(server.port, "/readyz")
        for path in paths:
            views = in_turns([server.viewer(path) for server in servers.values()], requests)
            report(path, {name: views[n] for n, name in enumerate(servers)},
                   {name: get(s.port, path)[1] for name, s in servers.items()})
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)


def report(path: str, views: dict[str, list[tuple[float, float]]], sizes: dict[str, int]) -> None:
    wall = {name: statistics.median(w for w, _ in seen) for name, seen in views.items()}
    cpu = {name: statistics.fmean(c for _, c in seen) for name, seen in views.items()}
    print(f"GET {path}, {len(next(iter(views.values())))} requests each:")
    for name in views:
        print(f"  {name:<10} wall {wall[name] * 1000:7.1f} ms (median), server CPU {cpu[name] * 1000:6.1f} ms a request"
              f" (mean), {sizes[name]:,} bytes; this ÷ it: wall {wall['this'] / wall[name]:.2f},"
              f" CPU {cpu['this'] / cpu[name]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a HOME compare_agentsview.py --home filled")
    parser.add_argument("--version", action="append", default=[], metavar="NAME=SRC",
                        help="another version's src folder (repeat for more)")
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    versions = {"this": HERE.parent / "src"}
    for given in args.version:
        name, sep, src = given.partition("=")
        if not sep or not name or not Path(src, "reasonlog").is_dir():
            parser.error(f"--version {given}: expected NAME=SRC, SRC a folder holding reasonlog/")
        versions[name] = Path(src).resolve()
    home = args.home.resolve()
    session = longest_session(imported(home, "this", versions["this"]))
    measure(home, versions, [f"/sessions/{session}", f"/v1/sessions/{session}?limit=1000"], args.requests)


if __name__ == "__main__":
    main()
