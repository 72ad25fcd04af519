"""A folder of several agents' data (issue 31 item 6): every file is imported as itself, as it is when named alone,
and every JSONL file no importer reads is named with why; with --format, the files not of that format are named."""
from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from reasonlog.cli.main import cli
from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

HERE = Path(__file__).resolve().parent / "fixtures"
CODEX = HERE / "codex" / "sessions" / "2025" / "10" / "29" / \
    "rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl"
CLAUDE = HERE / "claude_code" / "current" / "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61.jsonl"
PI = sorted((HERE / "pi" / "v0.73.1" / "sessions" / "--tmp-h22-run-piproj--").glob("*.jsonl"))
GEMINI = HERE / "gemini" / "tmp" / "9f3c2b" / "chats" / "session-2025-11-20T09-00-5c1e0b3a.jsonl"
ALL = SessionFilter(limit=None)


def _mixed(folder: Path) -> Path:
    folder.mkdir()
    for f in (CODEX, CLAUDE, *PI, GEMINI):
        shutil.copyfile(f, folder / f.name)
    (folder / "notes.jsonl").write_text('{"event": "hello", "n": 1}\n')
    (folder / "settings.json").write_text('{"theme": "dark"}\n')
    return folder


def _alone(files: list[Path], tmp_path: Path) -> dict[str, int]:
    """What importing each file named alone adds, summed."""
    store = open_store(tmp_path / "alone.db")
    report = run_import(store, plan(files))
    assert (report.failed, report.skipped) == ([], [])
    return report.added


def test_a_folder_of_several_agents_imports_each_file_as_itself(tmp_path):
    folder = _mixed(tmp_path / "mixed")
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([folder]))
    assert report.failed == []
    assert report.skipped == [(str(folder / "notes.jsonl"), "no importer recognises it: its first record (keys event,"
                               " n) is not of a format reasonlog reads (reasonlog import --list-formats)")]
    assert report.added == _alone([CODEX, CLAUDE, *PI, GEMINI], tmp_path) == {
        "sessions": 6, "calls": 14, "messages": 33, "tool_results": 4, "outcomes": 14}
    agents = sorted({s["labels"].get("source") for s in store.list_sessions(ALL)})
    assert agents == ["claude-code", "codex", "gemini", "pi"]
    again = run_import(store, plan([folder]))
    assert (again.unchanged, again.skipped, sum(again.added.values())) == (6, [], 0)


def test_a_codex_rollout_in_a_plain_folder_imports_as_when_named(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    shutil.copyfile(CODEX, folder / "codex-session.jsonl")  # not named rollout-*: refused on main
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([folder]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == _alone([CODEX], tmp_path)


def test_a_folder_read_as_one_format_names_the_files_of_others(tmp_path):
    folder = _mixed(tmp_path / "mixed")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "t.db"), "import", "--format", "pi", str(folder)])
    assert result.exit_code == 0, result.output
    assert "Imported 6 file(s): 2 sessions, 3 calls" in result.output
    for name in (CODEX.name, CLAUDE.name, GEMINI.name, "notes.jsonl"):
        assert f"{folder / name}: not read as pi: its first record (keys " in result.output


def test_the_projects_own_fixture_folder_is_read_file_by_file_each_as_itself():
    """tests/fixtures holds sixteen agents' and formats' files side by side (Qwen's chats, which Claude Code's
    folder sniffing would take, among them): each file gets the importer that reads it named alone."""
    planned = plan([HERE])
    assert sorted({imp.name for _, imp in planned}) == [
        "aider", "amp", "claude-agent-sdk", "claude-code", "cline", "codex", "copilot", "cursor", "exchange-jsonl",
        "gemini", "interactions", "kimi", "opencode", "pi", "qwen", "reasonlog-jsonl"]
    for path, imp in planned:
        assert [i.name for _, i in plan([path])] == [imp.name], path
