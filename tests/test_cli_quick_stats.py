"""`reasonlog stats --json` answers without importing click or the other commands, and says exactly what the full
command line says (issue 20: a usage question of a local archive faster than re-reading the transcripts)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import reasonlog
from reasonlog.cli import quick_stats

ENTRY = """
import sys, runpy
sys.argv = ["reasonlog", *sys.argv[1:]]
try:
    runpy.run_module("reasonlog", run_name="__main__")
except SystemExit as end:
    code = end.code
loaded = sorted(m for m in ("click", "rich", "reasonlog.cli.main", "reasonlog.io.importing") if m in sys.modules)
print(code, *loaded, file=sys.stderr)
"""


def reasonlog_cli(*args: str, env: dict | None = None) -> tuple[str, str]:
    """stdout, and the exit code with the heavy modules the command loaded."""
    done = subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    return done.stdout, done.stderr.splitlines()[-1]


@pytest.fixture
def recorded(db):
    """Two sessions on two days and models, on SQLite and on PostgreSQL."""
    rec = reasonlog.Recorder(db, writer="sync")
    for day, model in (("2025-03-01", "gpt-5"), ("2025-03-02", "claude-haiku-4-5")):
        with rec.session(agent=f"agent-{model}", started_at=f"{day}T10:00:00Z") as s:
            s.call(messages=[{"role": "user", "content": "hi"}], response="ok", model=model,
                   usage=reasonlog.Usage(input_tokens=120, output_tokens=30), latency_ms=800.0,
                   started_at=f"{day}T10:00:01Z")
    rec.close()
    return db


@pytest.mark.parametrize("by", ["day", "model", "agent", "source"])
def test_stats_json_prints_what_the_full_command_prints_without_loading_it(recorded, by):
    quick, loaded = reasonlog_cli("--db", str(recorded), "stats", "--by", by, "--json")
    full, loaded_full = reasonlog_cli("--db", str(recorded), "stats", "--by", by, "--json", "--limit", "0")
    assert quick == full and quick.startswith("[\n")
    assert (loaded, loaded_full) == ("0", "0 click reasonlog.cli.main reasonlog.io.importing rich")


def test_the_database_comes_from_the_environment_or_a_db_after_the_command(recorded, tmp_path):
    by_env, loaded = reasonlog_cli("stats", "--json", env={"REASONLOG_DB": str(recorded)})
    by_option, _ = reasonlog_cli("--db", str(tmp_path / "other.db"), "stats", "--json", "--db", str(recorded))
    full, _ = reasonlog_cli("--db", str(recorded), "stats", "--json", "--limit", "0")
    assert by_env == by_option == full and loaded == "0"


def test_what_the_quick_path_does_not_answer_the_full_command_explains(tmp_path):
    out, loaded = reasonlog_cli("--db", str(tmp_path / "none.db"), "stats", "--json")
    assert (out, loaded) == ("", "1 click reasonlog.cli.main reasonlog.io.importing rich")


@pytest.mark.parametrize(("argv", "parsed"), [
    (["stats", "--json"], (None, "day")),
    (["--db", "a.db", "stats", "--by", "model", "--json"], ("a.db", "model")),
    (["--db=a.db", "stats", "--json", "--by=agent", "--db", "b.db"], ("b.db", "agent")),
    (["stats"], None), (["stats", "--json", "--since", "2025-01-01"], None), (["--by", "day", "stats", "--json"], None),
    (["sessions", "--json"], None), (["stats", "--json", "--by"], None), (["--db=", "stats", "--json"], None),
    (["stats", "--json", "--help"], None), (["--json", "stats"], None),
])
def test_only_the_plain_form_is_taken_from_click(argv, parsed):
    assert quick_stats.parse(argv) == parsed
