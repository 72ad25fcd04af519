"""Hostile exports: thousands of mutants of one small real export, and a property over `import`.

Whatever the file, import either refuses it with a StoreError naming the file and line and writes
nothing, or stores it so that every session reads back, every call replays and a re-export is a
valid export. Seeded, so a failure reproduces.
"""
from __future__ import annotations

import faulthandler
import io
import json
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog import query
from reasonlog.io import jsonl
from reasonlog.store import SessionFilter, StoreError

MUTANTS = 10_000
SOURCE = Path(__file__).parent / "fixtures" / "import_source.jsonl"
NAME = "m.jsonl"
ERROR = re.compile(rf"^{re.escape(NAME)}:\d+: \S")
EMPTY = {"sessions": 0, "calls": 0, "messages": 0, "contents": 0, "outcomes": 0}
ODD_VALUES = ["lots", None, 2 ** 64, -1, 0, 1.5, True, [], {}, [[1, 2]], [None], {"a": [1]}, "x" * 300, 1e308, "",
              "{}", "[]", "null", "[[0,99]]", "skeleton", "bytes"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Iterator[dict]:
    """One small real export and an empty database.

    The export is `reasonlog demo --sessions 1` (two agents with tools, outcomes, exchanges and raw
    payloads), kept as a file because the demo's ids and times come from the clock, and the mutants
    must be the same on every run.
    """
    folder = _scratch(tmp_path_factory)
    store = reasonlog.open_store(folder / "source.db")
    assert _import(store, SOURCE.read_bytes()) == {"records": 22, "sessions": 2, "sessions_skipped": 0, "warnings": []}
    lines = list(jsonl.dump_lines(store))
    assert b"".join(lines) == SOURCE.read_bytes()  # still what this reasonlog exports
    first_session = list(jsonl.dump_lines(store, [orjson.loads(lines[1])["id"]]))
    store.close()
    reasonlog.open_store(folder / "empty.db").close()
    yield {"lines": lines, "first_session": first_session, "folder": folder}
    # In /dev/shm the databases are memory: left behind, a gigabyte a run filled the machine's RAM.
    shutil.rmtree(folder, ignore_errors=True)


def _scratch(tmp_path_factory) -> Path:
    """A folder for the databases; in memory where the system has one, since every commit and close
    syncs to disk and thousands of them would take minutes (the fsyncs are not what is tested here)."""
    base = tmp_path_factory.mktemp("fuzz")
    if Path("/dev/shm").is_dir():
        return Path(tempfile.mkdtemp(prefix="reasonlog-fuzz-", dir="/dev/shm"))
    return base


# ------------------------------------------------------------------ mutations


def _set_field(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    i = rng.randrange(len(lines))
    record = orjson.loads(lines[i])
    key = rng.choice(sorted(record))
    record[key] = _odd_value(rng, record[key], lines)
    return lines[:i] + [json.dumps(record, sort_keys=True).encode() + b"\n"] + lines[i + 1:]


def _odd_value(rng: random.Random, old, lines: list[bytes]):
    """A value of the wrong type, a near miss of the right one, or a value taken from another record."""
    roll = rng.random()
    if roll < 0.2 and isinstance(old, str) and old.startswith(("[", "{")):
        return _tweak_json_text(rng, old)
    if roll < 0.35 and isinstance(old, int) and not isinstance(old, bool):
        return old + rng.choice([-1, 1, 1000])
    if roll < 0.5:
        other = orjson.loads(rng.choice(lines))
        return rng.choice(list(other.values()))
    return rng.choice(ODD_VALUES)


def _tweak_json_text(rng: random.Random, text: str) -> str:
    """Change a JSON text field inside: a number moved, an item dropped or duplicated."""
    value = json.loads(text)
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        if isinstance(value[i], list) and value[i]:
            value[i][rng.randrange(len(value[i]))] += rng.choice([-1, 1, 50])
        else:
            value.insert(i, value[i]) if rng.random() < 0.5 else value.pop(i)
    elif isinstance(value, dict) and value:
        value[rng.choice(sorted(value))] = rng.choice(ODD_VALUES)
    return json.dumps(value)


def _mutate(rng: random.Random, lines: list[bytes]) -> tuple[str, bytes]:
    """One mutant of the export and a word saying what was done to it."""
    n, data = len(lines), b"".join(lines)
    i, j = rng.randrange(n), rng.randrange(n)
    kind = rng.choice(["cut_line", "cut_byte", "drop", "duplicate", "swap", "field", "field", "field", "flip"])
    if kind == "cut_line":
        return kind, b"".join(lines[:i])
    if kind == "cut_byte":
        return kind, data[:rng.randrange(len(data))]
    if kind == "drop":
        return kind, b"".join(lines[:i] + lines[i + 1:])
    if kind == "duplicate":
        return kind, b"".join(lines[:i] + [lines[i]] + lines[i:])
    if kind == "swap":
        swapped = list(lines)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        return kind, b"".join(swapped)
    if kind == "field":
        return kind, b"".join(_set_field(rng, lines))
    pos = rng.randrange(len(data))
    return kind, data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]


# ------------------------------------------------------------------ what must hold


def _import(store, data: bytes, precheck: bool = False) -> dict | str:
    """The import's result, or the text of the StoreError that refused it (checked to name file and line).

    With `precheck`, the database-free check the CLI runs first must agree with the store.
    """
    checked: str | None = None
    try:
        if precheck:
            jsonl.check_file(NAME, io.BytesIO(data))
    except StoreError as exc:
        checked = str(exc)
    try:
        result = jsonl.import_file(store, NAME, io.BytesIO(data))
    except StoreError as exc:
        assert ERROR.match(str(exc)), str(exc)
        assert checked is None or checked == str(exc)  # the check without a database says the same
        return str(exc)
    assert checked is None, f"the database-free check refused what the store accepted: {checked}"
    return result


def _assert_whole(store) -> None:
    """Every stored session reads back and shows, every call replays, and a re-export is a valid export."""
    for summary in store.list_sessions(SessionFilter(limit=None)):
        session = store.get_session(summary["id"])
        query.timeline(session)
        for call in session["calls"]:
            assert isinstance(store.replay_call(call["id"]), dict)
    again = b"".join(jsonl.dump_lines(store))
    assert jsonl.check_file("again.jsonl", io.BytesIO(again)) == []


def _fresh(folder: Path, n: int):
    path = folder / f"db{n}.db"
    shutil.copyfile(folder / "empty.db", path)
    return reasonlog.open_store(path)


@pytest.mark.slow  # about 40 s
def test_ten_thousand_mutants_are_refused_or_stored_whole(source):
    refused_or_stored_whole(source, MUTANTS)


def test_the_first_five_hundred_mutants_are_refused_or_stored_whole(source):
    """The quick run's share (`-m "not slow"`): the same mutants as above, the first 500 of them."""
    refused_or_stored_whole(source, 500)


def refused_or_stored_whole(source, mutants: int) -> None:
    """`mutants` mutated exports, each refused with nothing written or stored whole (readable and re-exportable)."""
    rng = random.Random(7)
    folder, lines = source["folder"], source["lines"]
    store, fresh, outcomes = _fresh(folder, 0), 1, {"refused": 0, "accepted": 0}
    faulthandler.dump_traceback_later(300, exit=True)  # a hang fails the run instead of stalling CI
    started = time.monotonic()
    try:
        for n in range(mutants):
            kind, data = _mutate(rng, lines)
            result = _import(store, data)
            if isinstance(result, str):
                assert store.status()["counts"] == EMPTY, (n, kind, result)
                outcomes["refused"] += 1
                continue
            outcomes["accepted"] += 1
            _assert_whole(store)
            store.close()
            store, fresh = _fresh(folder, fresh), fresh + 1
    finally:
        faulthandler.cancel_dump_traceback_later()
        store.close()
    assert sum(outcomes.values()) == mutants and outcomes["refused"] > 0 and outcomes["accepted"] > 0
    print(f"{outcomes} in {time.monotonic() - started:.1f} s")


# ------------------------------------------------------------------ the property


def _key(record: dict) -> tuple:
    kind = record["type"]
    if kind == "message":
        return kind, record["session_id"], record["idx"]
    if kind == "content":
        return kind, record["hash"]
    return kind, record.get("id")


def _records_of(data: bytes, sessions: set[str]) -> dict[tuple, dict]:
    out = {}
    for line in data.splitlines():
        record = orjson.loads(line)
        if record.get("session_id", record.get("id") if record["type"] == "session" else None) in sessions:
            out[_key(record)] = record
    return out


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_import_stores_each_record_exactly_or_refuses_and_changes_nothing(source, tmp_path_factory, seed):
    folder = Path(tempfile.mkdtemp(dir=source["folder"]))
    shutil.copyfile(source["folder"] / "empty.db", folder / "db.db")
    store = reasonlog.open_store(folder / "db.db")
    try:
        assert jsonl.import_file(store, "first.jsonl", io.BytesIO(b"".join(source["first_session"])))
        before = b"".join(jsonl.dump_lines(store))
        present = {s["id"] for s in store.list_sessions(SessionFilter(limit=None))}
        kind, data = _mutate(random.Random(seed), source["lines"])
        result = _import(store, data, precheck=True)
        after = b"".join(jsonl.dump_lines(store))
        if isinstance(result, str):
            assert after == before, (kind, result)
            return
        _assert_whole(store)
        new = {s["id"] for s in store.list_sessions(SessionFilter(limit=None))} - present
        assert _records_of(after, new) == _records_of(data, new)  # each record stored exactly as given
    finally:
        store.close()
