"""A read-only database (issue 18 item 5): every reading command and page works on it as it is, and every writing
command says in one line why it cannot.

The tests run as root in CI, where `chmod a-w` stops nothing, so a read-only file or folder is made immutable with
`chattr +i` (which stops root too; the test undoes it); run as another user, `chmod a-w` does the same."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from serving import get, serving

import reasonlog
from reasonlog.cli.main import cli

TRANSCRIPT = FIXTURES / "claude-code-transcripts" / "spotter" / "short.jsonl"

AS_ROOT = os.geteuid() == 0
if AS_ROOT and shutil.which("chattr") is None:
    pytest.skip("running as root needs chattr to make a file read-only (e2fsprogs)", allow_module_level=True)


@contextlib.contextmanager
def read_only(path: Path):
    """`path` (a file or a folder) cannot be written, even by root, until the block ends."""
    if AS_ROOT:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        yield
    finally:
        if AS_ROOT:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(path.stat().st_mode | 0o200)


def reasonlog_cli(*args: str, db: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}
    return subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *args], capture_output=True, text=True,
                          timeout=120, env=env, input=stdin)


def in_process(*args: str, db: Path):
    """The command run in this process (quicker than a subprocess; an exception escapes and fails the test)."""
    return CliRunner().invoke(cli, ["--db", str(db), *args], env={"REASONLOG_DB": None}, catch_exceptions=False)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """A database with one session of two calls and a reasoning record, summarised; nothing beside it."""
    folder = tmp_path_factory.mktemp("ro-source")
    db = folder / "ro.db"
    with reasonlog.Recorder(db, writer="sync") as rec, rec.session(agent="reader", run="r", model="gpt-5") as s:
        with s.exchange("hello there") as ex:
            s.call(messages=[{"role": "user", "content": "hello there"}], response="hi, how can I help?",
                   usage=reasonlog.Usage(input_tokens=5, output_tokens=2))
            s.call(messages=[{"role": "user", "content": "hello there"},
                             {"role": "assistant", "content": "hi, how can I help?"},
                             {"role": "user", "content": "nothing"}], response="fine")
            ex.end("fine")
        s.reason("approach", compact={"summary": "greet first"})
    reasonlog_cli("summarize", "--summarizer", "offline", "--yes", db=db)
    session = reasonlog.open_store(db, read_only=True).get_session(s.id)
    return {"db": db, "session": s.id, "calls": [c["id"] for c in session["calls"]]}


@pytest.fixture(params=["file", "folder"])
def locked(request, recorded, tmp_path) -> Path:
    """The recorded database, read-only as a file, or as a file in a read-only folder."""
    folder = tmp_path / "locked"
    folder.mkdir()
    db = folder / "ro.db"
    shutil.copy(recorded["db"], db)
    before = digest(db)
    with read_only(db if request.param == "file" else folder):
        yield db
    assert digest(db) == before  # not a byte written (a reader may make its -shm beside a file it cannot write)


def test_every_reading_command_works(locked, recorded, tmp_path):
    sid, (a, b) = recorded["session"], recorded["calls"]
    for args in (["sessions"], ["sessions", "--json"], ["show", sid], ["show", sid, "--json"], ["stats"],
                 ["search", "hello"], ["replay", a], ["diff", a, b], ["export"], ["db", "status"], ["db", "path"],
                 ["db", "check"], ["keys", "list"], ["reason", "show", "--session", sid],
                 ["export", "--format", "html", sid, "-o", str(tmp_path / "s.html")]):
        result = in_process(*args, db=locked)
        assert result.exit_code == 0, (args, result.output)
    assert "greet first" in in_process("reason", "show", "--session", sid, db=locked).output
    assert json.loads(in_process("show", sid, "--json", db=locked).output)["session"]["summary"]
    assert "<html" in (tmp_path / "s.html").read_text()
    backup = reasonlog_cli("db", "backup", str(tmp_path / "copy.db"), db=locked)
    assert backup.returncode == 0, backup.stderr
    assert len(reasonlog.open_store(tmp_path / "copy.db", read_only=True).list_sessions(reasonlog.SessionFilter())) == 1


@pytest.mark.parametrize("command", ["serve", "ui"])
@pytest.mark.slow
def test_serve_and_ui_answer_every_page(locked, recorded, command):
    sid, (a, b) = recorded["session"], recorded["calls"]
    args = ["--db", str(locked), command, *(["--no-browser"] if command == "ui" else [])]
    with serving(*args) as base:
        for page in ("/", f"/sessions/{sid}", f"/calls/{a}", "/usage", "/usage.csv", "/readyz", "/v1/runs",
                     "/v1/sessions", f"/v1/sessions/{sid}", f"/v1/calls/{a}", f"/v1/calls/{a}/request",
                     f"/v1/diff?a={a}&b={b}", "/v1/outcomes", "/v1/stats", f"/v1/reasoning-records?session={sid}"):
            status, body = get(base + page)
            assert status == 200, (page, status, body[:500])
        ingest = post(base + "/v1/ingest", b'{"$reasonlog": "batch", "id": "b1", "counters": {}}\n')
    assert ingest[0] == 503 and "read-only" in ingest[1], ingest


def post(url: str, body: bytes) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_every_writing_command_says_in_one_line_why_it_cannot(locked, recorded, tmp_path):
    content = tmp_path / "compact.json"
    content.write_text('{"summary": "x"}')
    sid = recorded["session"]
    for args in (["reason", "save", "--session", sid, "--phase", "completion", "--content-file", str(content)],
                 ["summarize", "--summarizer", "offline", "--yes", "--stale"], ["import", str(TRANSCRIPT)],
                 ["keys", "create", "--scope", "read"], ["keys", "revoke", "rlk_x"], ["prune", "--run", "r", "--yes"],
                 ["demo"], ["db", "upgrade"]):
        ran = in_process(*args, db=locked)
        said_in_one_line_why_it_cannot(locked, args, ran.exit_code, ran.stderr)
    process = reasonlog_cli("demo", db=locked)  # and a real process: no traceback, exit code 1
    said_in_one_line_why_it_cannot(locked, ["demo"], process.returncode, process.stderr)


def said_in_one_line_why_it_cannot(locked: Path, args: list[str], code: int, stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and "Traceback" not in stderr, (args, stderr)
    assert len(lines) == 1 and lines[0].startswith(f"error: {locked}: read-only"), (args, stderr)
