"""Kilo Code's CLI (`@kilocode/cli` 7.x, a fork of OpenCode): the database `kilo.db` Kilo CLI 7.7.7 wrote against a
local upstream (tests/fixtures/kilo, see its NOTICE.md), read by the OpenCode importer as Kilo's, to the token and
the cost, equal to Kilo's own session totals."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from reasonlog.io.formats.opencode import importer as opencode
from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

KILO = Path(__file__).resolve().parent / "fixtures" / "kilo" / "v7.7.7"
SID = "ses_de3125122ffeo1BLCh2mQ4du6N"


def test_the_database_kilo_wrote_imports_as_kilos_with_its_tokens_and_cost(db, tmp_path):
    folder = tmp_path / "kilo"
    shutil.copytree(KILO, folder)
    store = open_store(db)
    report = run_import(store, plan([folder]))
    assert (report.failed, report.skipped) == ([], [])
    assert report.added == {"sessions": 1, "calls": 3, "messages": 6, "tool_results": 1, "outcomes": 0}
    session = store.get_session(SID)
    assert (session["agent"], session["model"]) == ("kilo", "deepseek-reasoner")
    assert session["labels"] == {"source": "kilo", "cwd": "/tmp/h22real/kproj", "version": "7.7.7",
                                 "title": "New session - 2026-11-27T12:14:28.573Z"}
    calls = session["calls"]
    # Kilo's output leaves out the reasoning (44 + 39): reasonlog's includes it.
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"], c["cost_usd"],
             c["provider"]) for c in calls] == [(19, 320, 83, 39, 0.00004914, "local"),
                                                (16, 0, 300, 0, 0.00013048, "local"),
                                                (16, 0, 300, 0, 0.00013048, "local")]
    # Kilo's own totals for the session, in its `session` table.
    with sqlite3.connect(f"file:{folder / 'kilo.db'}?mode=ro", uri=True) as kilo:
        own = kilo.execute("SELECT tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, cost"
                           " FROM session").fetchone()
    assert own == (sum(c["input_tokens"] for c in calls),
                   sum(c["output_tokens"] - c["reasoning_tokens"] for c in calls),
                   sum(c["reasoning_tokens"] for c in calls), sum(c["cache_read_tokens"] for c in calls),
                   round(sum(c["cost_usd"] for c in calls), 10)) == (51, 644, 39, 320, 0.0003101)
    assert [e["input"] for e in session["exchanges"]] == ['"Please run the shell command: echo hello"',
                                                          '"Thanks, that is all"']  # Kilo quoted them
    assert [(t["name"], t["input"], t["is_error"], t["content"]) for t in session["tool_results"]] == [
        ("bash", {"command": "echo hello"}, False, "hello\n")]
    assert run_import(store, plan([folder])).unchanged == 1


def test_kilos_data_folder_is_a_default_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert opencode.default_folders() == [tmp_path / "opencode", tmp_path / "kilo"]
    assert opencode.detect(KILO) and opencode.detect(KILO / "kilo.db")
