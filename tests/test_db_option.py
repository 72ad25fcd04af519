"""`--db` before or after a command's name (issue 18 item 4): every command that opens a database takes it."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from click.testing import CliRunner
from serving import get, serving

import reasonlog
from reasonlog.cli.main import cli


def _leaves(group, prefix=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _leaves(command, (*prefix, name))
        else:
            yield (*prefix, name), command


@pytest.mark.parametrize("path", [p for p, _ in _leaves(cli)], ids=" ".join)
def test_every_command_takes_db_after_its_name(path):
    command = dict(_leaves(cli))[path]
    assert "--db" in [opt for p in command.params for opt in getattr(p, "opts", [])]


@pytest.fixture
def recorded(tmp_path):
    db = tmp_path / "mine.db"
    with reasonlog.Recorder(db, writer="sync") as rec, rec.session(agent="after", run="r") as s:
        s.call(messages=[{"role": "user", "content": "hello"}], response="hi")
    return db


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def reasonlog_cli(*args: str) -> Ran:
    """The command run in this process (an exception escaping it fails the test)."""
    result = CliRunner().invoke(cli, list(args), env={"REASONLOG_DB": None}, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def test_db_after_the_command_reads_that_database(recorded, tmp_path):
    for args in (["sessions", "--json", "--db", str(recorded)], ["sessions", "--db", str(recorded), "--json"],
                 ["--db", str(recorded), "sessions", "--json"],
                 ["--db", str(tmp_path / "other.db"), "sessions", "--db", str(recorded), "--json"]):
        result = reasonlog_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert [s["agent"] for s in json.loads(result.stdout)] == ["after"]
    status = reasonlog_cli("db", "status", "--json", "--db", str(recorded))
    assert json.loads(status.stdout)["path"] == str(recorded)
    assert reasonlog_cli("db", "path", "--db", str(recorded)).stdout.strip() == str(recorded)
    assert reasonlog_cli("keys", "list", "--json", "--db", str(recorded)).stdout.strip() == "[]"


@pytest.mark.slow
def test_serve_with_db_after_its_name_serves_that_database(recorded):
    with serving("serve", "--db", str(recorded)) as base:
        status, body = get(base + "/v1/sessions")
    assert status == 200 and [s["agent"] for s in json.loads(body)["sessions"]] == ["after"]
