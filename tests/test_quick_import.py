"""`reasonlog import FOLDER` with nothing changed since the last import answers before click, the store and the
importers are loaded (issue 34: a re-sync cost 2.4 × agentsview's CPU, most of it imports), and says exactly what
the whole command says; anything changed, or any form it does not know, goes to the whole command."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.cli import quick_import
from reasonlog.cli.main import cli
from reasonlog.io import FILE_FORMATS, builtin_importers
from reasonlog.io.importer import BaseImporter

SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"
SMALL = ("short.jsonl", "subagent.jsonl", "tool_heavy.jsonl")
SUMMARY = "Imported 3 file(s) (3 unchanged): 0 sessions, 0 calls, 0 messages, 0 tool results, 0 outcomes added.\n"


def _imported(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of three real Claude Code transcripts, imported once into a new database."""
    folder = tmp_path / "projects" / "spotter"
    folder.mkdir(parents=True)
    for name in SMALL:
        shutil.copy(SPOTTER / name, folder / name)
    db = tmp_path / "q.db"
    first = CliRunner().invoke(cli, ["--db", str(db), "import", str(folder.parent)], catch_exceptions=False)
    assert first.exit_code == 0 and first.output.startswith("Imported 3 file(s): 4 sessions")
    return db, folder.parent


def _quick(db: Path, *args: str) -> tuple[tuple[int, str, str], set[str]]:
    """`python -m reasonlog --db DB import ARGS`: its exit code, standard output and error, and the modules it
    imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "reasonlog", "--db", str(db), "import", *args],
                          capture_output=True, text=True, timeout=120)
    timed = [line for line in done.stderr.splitlines(keepends=True) if line.startswith("import time:")]
    loaded = {line.rsplit("|", 1)[1].strip() for line in timed}
    return (done.returncode, done.stdout, "".join(line for line in done.stderr.splitlines(keepends=True)
                                                  if line not in timed)), loaded


def _whole(db: Path, *args: str) -> tuple[int, str, str]:
    """The same import by click's command (cli/importing.py), as before this fast path."""
    done = CliRunner().invoke(cli, ["--db", str(db), "import", *args], catch_exceptions=False)
    return done.exit_code, done.stdout, done.stderr


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_an_unchanged_folder_is_answered_without_click_or_the_store_and_says_the_same(tmp_path, json_flag):
    db, folder = _imported(tmp_path)
    said, loaded = _quick(db, str(folder), *json_flag)
    assert said == _whole(db, str(folder), *json_flag)
    code, out, _ = said
    assert code == 0 and out == SUMMARY if not json_flag else '"unchanged": 3' in out and '"files": 3' in out
    assert {"click", "reasonlog.store", "reasonlog.model", "reasonlog.io.importing", "importlib.metadata",
            "rich"} & loaded == set()
    assert not [m for m in loaded if m.startswith("reasonlog.io.formats")]


def test_a_grown_file_goes_to_the_whole_command_which_reads_what_was_added(tmp_path):
    db, folder = _imported(tmp_path)
    short = folder / "spotter" / "short.jsonl"
    with open(short, "ab") as f:  # its last record again: read, and found imported already
        f.write(short.read_bytes().splitlines(keepends=True)[-1])
    (code, out, _), loaded = _quick(db, str(folder))
    assert code == 0 and out.startswith("Imported 3 file(s) (2 unchanged, 1 grown): 0 sessions")
    assert {"click", "reasonlog.io.importing", "reasonlog.store"} <= loaded


def test_the_forms_it_does_not_answer_go_to_click(tmp_path):
    db, folder = _imported(tmp_path)
    one = folder / "spotter" / "short.jsonl"
    for args in ((str(one),), ("--format", "claude-code", str(folder)), (str(folder), str(tmp_path / "none"))):
        said, loaded = _quick(db, *args)
        assert "click" in loaded, args
        assert said == _whole(db, *args)
    assert _quick(db, str(one))[0][1] == ("Imported 1 file(s) (1 unchanged): 0 sessions, 0 calls, 0 messages,"
                                       " 0 tool results, 0 outcomes added.\n")


def test_a_database_of_another_schema_is_left_to_the_store(tmp_path):
    db, folder = _imported(tmp_path)
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM _reasonlog_migrations WHERE number = (SELECT MAX(number) FROM _reasonlog_migrations)")
    conn.commit()
    conn.close()
    assert quick_import.read_rows(str(db)) is None
    assert quick_import.read_rows(str(tmp_path / "absent.db")) is None


def test_the_plain_form_alone_is_parsed():
    assert quick_import.parse(["--db", "x.db", "import", "a", "--json", "b"]) == ("x.db", ["a", "b"], True)
    assert quick_import.parse(["--db=x.db", "import", "a"]) == ("x.db", ["a"], False)
    assert quick_import.parse(["import", "a"]) == (None, ["a"], False)
    for argv in (["import"], ["import", "--json"], ["import", "-"], ["import", "--format", "codex", "a"],
                 ["import", "--list-formats"], ["--db"], ["--dbx", "y", "import", "a"], ["search", "import"],
                 ["import", "a", "--help"]):
        assert quick_import.parse(argv) is None, argv


def test_the_file_formats_are_the_built_in_ones_that_read_each_file_as_itself():
    assert FILE_FORMATS == {imp.name for imp in builtin_importers()
                            if type(imp).signature is BaseImporter.signature
                            and type(imp).import_whole is BaseImporter.import_whole}


CHANGES = st.lists(st.sampled_from(["grow", "touch", "new", "remove", "other-file", "rewrite", "nothing"]),
                   min_size=1, max_size=3)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=CHANGES, which=st.integers(0, 2))
def test_whatever_changed_the_answer_is_the_whole_commands(tmp_path_factory, changes, which):
    tmp_path = tmp_path_factory.mktemp("changed")
    db, folder = _imported(tmp_path)
    target = folder / "spotter" / SMALL[which]
    for change in changes:
        if change == "grow" and target.exists():
            with open(target, "ab") as f:
                f.write(b"\n")
        elif change == "touch" and target.exists():
            os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 1_000_000))
        elif change == "new":
            shutil.copy(SPOTTER / "short.jsonl", folder / "spotter" / f"new-{len(os.listdir(target.parent))}.jsonl")
        elif change == "remove" and target.exists():
            target.unlink()
        elif change == "other-file":
            (folder / "spotter" / "notes.txt").write_text("not a transcript")
        elif change == "rewrite" and target.exists():
            target.write_bytes(target.read_bytes()[:200] + b"\n")
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    (code, out, err), loaded = _quick(db, str(folder))
    whole = _whole(copy, str(folder))
    assert (code, out) == whole[:2]
    if "click" not in loaded:  # answered here (the store's warnings otherwise go to the log pytest keeps)
        assert err == whole[2] == ""
