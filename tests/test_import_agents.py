"""`reasonlog import` without PATH and `reasonlog watch`: every agent's default folder that exists, said per agent,
under a HOME and XDG folders in tmp_path (never the user's); then `stats --by source` answers what each agent cost."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonlog.cli.main import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home with OpenCode's database and Pi's sessions in their default folders, and nothing else."""
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    shutil.copytree(FIXTURES / "opencode" / "v1.18.33", tmp_path / ".local" / "share" / "opencode")
    shutil.copytree(FIXTURES / "pi" / "v0.73.1" / "sessions", tmp_path / ".pi" / "agent" / "sessions")
    return tmp_path


def invoke(home: Path, *args: str):
    result = CliRunner().invoke(cli, ["--db", str(home / "r.db"), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_import_without_a_path_reads_each_agents_default_folder_and_says_so(home):
    out = invoke(home, "import")
    assert f"opencode: {home / '.local/share/opencode'}\nImported 1 file(s): 3 sessions, 6 calls" in out
    assert f"pi: {home / '.pi/agent/sessions'}\nImported 2 file(s): 2 sessions, 3 calls" in out
    rows = {r["source"]: r for r in json.loads(invoke(home, "stats", "--by", "source", "--json"))}
    assert {k: (r["calls"], round(r["cost_usd"], 9)) for k, r in rows.items()} == {
        "opencode": (6, 0.031314), "pi": (3, 0.015657)}
    again = json.loads(invoke(home, "import", "--json"))
    assert {k: (v["unchanged"], v["added"]["calls"]) for k, v in again.items()} == {"opencode": (1, 0), "pi": (2, 0)}


def test_watch_without_a_path_follows_the_same_folders(home):
    result = CliRunner().invoke(cli, ["--db", str(home / "r.db"), "watch", "--once", "--interval", "0.2"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"opencode: {home / '.local/share/opencode'}" in result.output
    assert f"pi: {home / '.pi/agent/sessions'}" in result.output
    rows = json.loads(invoke(home, "stats", "--by", "source", "--json"))
    assert sorted((r["source"], r["calls"]) for r in rows) == [("opencode", 6), ("pi", 3)]
