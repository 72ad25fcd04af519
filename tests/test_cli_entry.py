"""The `reasonlog` entry point loads only the module of the command asked for (issue 34: a search from the CLI spent a
third of its CPU importing every other command's module), and the whole CLI for anything else; a search that prints
JSON loads neither the write path, nor rich, nor `importlib.metadata` (the CPU they cost: docs/performance.md)."""
from __future__ import annotations

import json
import subprocess
import sys

import reasonlog
from reasonlog.cli.entry import MODULE_OF
from reasonlog.cli.main import cli

LOADED = """
import atexit, sys
sys.argv = ["reasonlog", *sys.argv[1:]]
shown = ("reasonlog.", "rich", "importlib.metadata")
atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith(shown)), file=sys.stderr))
from reasonlog.cli.entry import main
main()
"""


def _run(*argv: str) -> tuple[int, str, list[str]]:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, json.loads(done.stderr.splitlines()[-1].replace("'", '"'))


def test_every_command_of_the_cli_is_mapped_to_the_module_that_adds_it():
    assert MODULE_OF == {name: command.callback.__module__.rsplit(".", 1)[1] for name, command in cli.commands.items()}


def _recorded(db) -> str:
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": "where is the phoenix server started?"}], response=None)
    rec.close()
    return s.id


def test_a_search_loads_its_own_command_only_and_answers_as_before(tmp_path):
    session = _recorded(tmp_path / "e.db")
    code, out, loaded = _run("--db", str(tmp_path / "e.db"), "search", "phoenix", "--json")
    assert code == 0
    assert [(h["session_id"], h["message_idx"], h["mode"]) for h in json.loads(out)] == [(session, 0, "text")]
    assert [m for m in loaded if m.startswith("reasonlog.cli.")] == [
        "reasonlog.cli.entry", "reasonlog.cli.filters", "reasonlog.cli.group", "reasonlog.cli.searching"]
    assert {"reasonlog.store.writing", "reasonlog.store.contents", "reasonlog.redact"} & set(loaded) == set()
    assert [m for m in loaded if m.startswith(("rich", "importlib.metadata"))] == []


def test_a_search_printed_for_a_person_loads_rich(tmp_path):
    session = _recorded(tmp_path / "e.db")
    code, out, loaded = _run("--db", str(tmp_path / "e.db"), "search", "phoenix")
    assert code == 0 and out.splitlines()[0] == f"{session}  at 0  message  user"
    assert "rich.console" in loaded and "reasonlog.store.writing" not in loaded


def test_help_and_a_mistyped_command_get_the_whole_cli(tmp_path):
    code, out, loaded = _run("--help")
    assert code == 0 and "reasonlog.cli.main" in loaded
    assert all(f"  {name} " in out for name in MODULE_OF)
    code, _, loaded = _run("--db", str(tmp_path / "x.db"), "serach", "x")
    assert code == 2 and "reasonlog.cli.main" in loaded
