"""What the tables look like at 80 columns (issue 18 item 9): ids whole, the room used, and a start for newcomers."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

import reasonlog
from reasonlog.cli.main import cli

CLAUDE_CODE = FIXTURES / "claude-code-transcripts" / "spotter"


def at_80(db, *args, ok=True, fits=True):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], env={"COLUMNS": "80"}, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    assert not fits or "--json" in args or max(len(line) for line in result.output.splitlines()) <= 80, result.output
    return result.output


@pytest.fixture(scope="module")
def claude_code(tmp_path_factory):
    db = tmp_path_factory.mktemp("tables") / "cc.db"
    at_80(db, "import", str(CLAUDE_CODE), fits=False)
    return db


def test_sessions_of_claude_code_keep_their_columns_and_whole_ids(claude_code):
    listed = json.loads(at_80(claude_code, "sessions", "--json"))
    out = at_80(claude_code, "sessions")
    lines = out.splitlines()
    assert lines[0] == "session"
    assert lines[1].split() == ["started", "(UTC)", "title", "agent", "calls", "cost"]  # issue 39: the title stays
    for s in listed:  # each id on its own line, whole, then its row
        at = lines.index(s["id"])
        row = lines[at + 1].split()
        assert (row[-3], row[-2], row[-1]) == (s["agent"], str(s["call_count"]), f"${s['cost_usd']:,.4f}")
    assert len(lines) == 3 + 2 * len(listed)


def test_search_gives_whole_ids_in_two_lines_a_hit(claude_code):
    hits = json.loads(at_80(claude_code, "search", "Ash.read_one", "--json"))
    assert len(hits) == 3
    lines = at_80(claude_code, "search", "Ash.read_one").splitlines()
    assert len(lines) == 2 * 3 + 1 and lines[-1] == "3 matches"
    for hit, (where, snippet) in zip(hits, zip(lines[0:-1:2], lines[1:-1:2], strict=True), strict=True):
        assert where.split()[:3] == [hit["session_id"], "at", str(hit["message_idx"])]
        assert snippet.startswith(f"  call {hit['call_id']}: ")


def test_keys_list_shows_whole_ids_and_a_prefix_that_revokes(tmp_path):
    db = tmp_path / "keys.db"
    made = [at_80(db, "keys", "create", "--scope", scope, "--name", f"key {scope}", fits=False).splitlines()[0]
            for scope in ("read", "admin")]
    listed = json.loads(at_80(db, "keys", "list", "--json"))
    rows = at_80(db, "keys", "list").splitlines()[2:]
    assert [row.split()[:3] for row in rows] == [[k["id"], k["prefix"], k["scope"]] for k in listed]
    assert [k["prefix"] for k in listed] == [secret.strip()[:12] for secret in made]
    assert at_80(db, "keys", "revoke", rows[0].split()[1]).strip() == f"revoked {listed[0]['prefix']}"
    assert at_80(db, "keys", "revoke", rows[1].split()[0]).strip() == f"revoked {listed[1]['id']}"
    assert all(k["revoked_at"] for k in json.loads(at_80(db, "keys", "list", "--json")))


def test_without_a_database_sessions_and_ui_say_how_to_start(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "REASONLOG_DB"}, "COLUMNS": "80"}
    for command in (["sessions"], ["ui", "--no-browser"]):
        result = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(tmp_path / "none.db"), *command],
                                capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "no database yet" in result.stderr and "`reasonlog demo`" in result.stderr
        assert "`reasonlog import ~/.claude/projects`" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_empty_database_says_how_to_start_and_a_filter_says_none_match(tmp_path):
    db = tmp_path / "empty.db"
    reasonlog.open_store(db).close()
    assert "no sessions yet. Start with `reasonlog demo`" in at_80(db, "sessions")
    assert "no sessions match" in at_80(db, "sessions", "--agent", "nobody")
