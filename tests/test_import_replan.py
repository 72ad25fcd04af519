"""Importing a folder again (issue 34): a folder whose every file an import read to its end, as it is now, is planned
from the database's rows, by size and change time, with no file read; anything new or changed is planned as usual."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.importing import plan, run_import
from reasonlog.store import open_store

SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"
SMALL = ("short.jsonl", "subagent.jsonl", "tool_heavy.jsonl")


def _named(planned) -> list[tuple[str, str]]:
    return sorted((str(path), imp.name) for path, imp in planned)


def _imported_copy(tmp_path: Path):
    folder = tmp_path / "projects" / "spotter"
    folder.mkdir(parents=True)
    for name in SMALL:  # (the samples' small transcripts: the long one would make each example take seconds)
        (folder / name).write_bytes((SPOTTER / name).read_bytes())
    store = open_store(tmp_path / "t.db")
    first = run_import(store, plan([folder.parent]))
    assert (first.files, first.failed) == (3, [])
    return store, folder.parent


def test_an_unchanged_folder_is_planned_from_its_rows_without_reading_a_file(tmp_path):
    store, folder = _imported_copy(tmp_path)
    assert _named(plan([folder], imported=store.import_files)) == _named(plan([folder]))
    # The same size and change time, other bytes: the rows answer, so no file was read for it.
    short = folder / "spotter" / "short.jsonl"
    st_before = short.stat()
    short.write_bytes(b"x" * st_before.st_size)
    os.utime(short, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    planned = dict(_named(plan([folder], imported=store.import_files)))
    assert planned[str(short)] == "claude-code"
    assert dict(_named(plan([folder])))[str(short)] == "passed-over"  # read, it is no transcript
    again = run_import(store, plan([folder], imported=store.import_files))
    assert (again.files, again.unchanged, again.added["calls"], again.skipped) == (3, 3, 0, [])


def test_a_grown_file_or_a_new_one_plans_the_folder_as_usual(tmp_path):
    store, folder = _imported_copy(tmp_path)
    short = folder / "spotter" / "short.jsonl"
    with open(short, "ab") as f:
        f.write(b"\n")
    assert _named(plan([folder], imported=store.import_files)) == _named(plan([folder]))
    (folder / "spotter" / "notes.jsonl").write_bytes(b'{"note": 1}\n')
    with_new = _named(plan([folder], imported=store.import_files))
    assert with_new == _named(plan([folder]))
    assert (str(folder / "spotter" / "notes.jsonl"), "passed-over") in with_new


@pytest.fixture(scope="module")
def imported_once(tmp_path_factory):
    return _imported_copy(tmp_path_factory.mktemp("replan"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["touch", "grow", "same"])), max_size=3))
def test_planning_with_the_rows_equals_planning_without(imported_once, changes):
    """Whatever changed since the import (a file touched, grown, or nothing), the plan is the one made by reading."""
    store, folder = imported_once
    files = sorted(folder.rglob("*.jsonl"))
    kept = {f: (f.read_bytes(), f.stat().st_atime_ns, f.stat().st_mtime_ns) for f in files}
    try:
        for index, change in changes:
            target = files[index]
            if change == "touch":
                os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 1_000_000_000))
            elif change == "grow":
                with open(target, "ab") as f:
                    f.write(b"\n")
        assert _named(plan([folder], imported=store.import_files)) == _named(plan([folder]))
    finally:
        for f, (data, atime, mtime) in kept.items():
            f.write_bytes(data)
            os.utime(f, ns=(atime, mtime))
