"""`reasonlog import` without PATH and `reasonlog watch` find Qwen Code, Aider, Copilot CLI, Kimi CLI, Cursor and Amp
in their default folders (under a HOME in tmp_path, never the user's), say what they found per agent, and
`stats --by agent` then shows each agent, with no tokens or cost where the format has none."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonlog.cli.main import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ENV = ("QWEN_HOME", "QWEN_RUNTIME_DIR", "AIDER_CHAT_HISTORY_FILE", "COPILOT_HOME", "KIMI_SHARE_DIR",
       "CURSOR_CONFIG_DIR", "AMP_DATA_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR", "PI_CODING_AGENT_DIR")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home where each of the six agents left its files where it keeps them, and a repository aider ran in."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    shutil.copytree(FIXTURES / "qwen" / "v0.15.10" / "projects", tmp_path / ".qwen" / "projects")
    shutil.copytree(FIXTURES / "copilot" / "v1.0.102" / "session-state", tmp_path / ".copilot" / "session-state")
    shutil.copytree(FIXTURES / "kimi" / "v1.51.0", tmp_path / ".kimi")
    shutil.copytree(FIXTURES / "cursor" / "projects", tmp_path / ".cursor" / "projects")
    shutil.copytree(FIXTURES / "amp" / "threads", tmp_path / ".local" / "share" / "amp" / "threads")
    shutil.copytree(FIXTURES / "aider" / "v0.86.2" / "repo", tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")
    return tmp_path


def invoke(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", str(home / "r.db"), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


EXPECTED = {  # agent: (calls, input, output, cache read, cost); None: the format has no tokens or cost
    "aider": (2, 0, 0, 0, None), "amp": (4, 397, 300, 18450, 0.0454735), "copilot-cli": (3, 51, 683, 320, 0.0002863),
    "cursor": (4, 0, 0, 0, None), "kimi-cli": (3, 51, 683, 320, None), "qwen-code": (3, 51, 683, 320, 0.0002863),
    "managed-auto-memory-extractor": (1, 16, 300, 0, 0.0001216)}  # Qwen Code's memory sub-agent


def test_import_without_a_path_finds_the_six_agents_and_stats_shows_each(home):
    out = invoke(home, "import")
    for name, folder, added in (
            ("qwen", ".qwen/projects", "2 sessions, 4 calls"), ("aider", "repo/.aider.chat.history.md",
                                                               "2 sessions, 2 calls"),
            ("copilot", ".copilot/session-state", "1 sessions, 3 calls"), ("kimi", ".kimi/sessions",
                                                                          "1 sessions, 3 calls"),
            ("cursor", ".cursor/projects", "1 sessions, 4 calls"), ("amp", ".local/share/amp/threads",
                                                                  "1 sessions, 4 calls")):
        assert f"{name}: {home / folder}\nImported 1 file(s): {added}" in out
    assert "note: aider: its chat history has no token counts" in out
    assert "note: cursor: its agent transcripts have no token counts" in out
    assert "note: kimi: its session files do not name the model" in out
    rows = {r["agent"]: r for r in json.loads(invoke(home, "stats", "--by", "agent", "--json"))}
    assert {a: (r["calls"], r["input_tokens"], r["output_tokens"], r["cache_read_tokens"],
                None if r["cost_usd"] is None else round(r["cost_usd"], 7)) for a, r in rows.items()} == EXPECTED
    again = json.loads(invoke(home, "import", "--json"))
    assert {k: (v["unchanged"], v["added"]["calls"]) for k, v in again.items()} == {
        "qwen": (1, 0), "aider": (1, 0), "copilot": (1, 0), "kimi": (1, 0), "cursor": (1, 0), "amp": (1, 0)}
    for path in home.rglob("*"):
        if path.is_file() and path.name != "r.db" and not path.name.startswith("r.db"):
            path.touch()  # changed in time only: read again from where it stopped, and nothing is added
    touched = json.loads(invoke(home, "import", "--json"))
    assert {k: sum(v["added"].values()) for k, v in touched.items()} == dict.fromkeys(again, 0)


def test_watch_without_a_path_follows_the_same_folders(home):
    result = CliRunner().invoke(cli, ["--db", str(home / "r.db"), "watch", "--once", "--interval", "0.2"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for name, folder in (("qwen", ".qwen/projects"), ("aider", "repo/.aider.chat.history.md"),
                         ("copilot", ".copilot/session-state"), ("kimi", ".kimi/sessions"),
                         ("cursor", ".cursor/projects"), ("amp", ".local/share/amp/threads")):
        assert f"{name}: {home / folder}" in result.output
    rows = json.loads(invoke(home, "stats", "--by", "agent", "--json"))
    assert sorted((r["agent"], r["calls"]) for r in rows) == sorted((a, e[0]) for a, e in EXPECTED.items())
