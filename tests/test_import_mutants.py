"""One bad record costs one record, for every importer: each format's fixtures mutated one record at a time.

Every importer in the registry has its fixtures here (a test fails when one has none, so a new importer is
covered from the day it is added). For each, mutants are made one change at a time, seeded (the same every run):
a field of another type, a key gone, an object where a scalar was, a record replaced by something that is not
one, a line cut short, the file cut in the middle of its last line. A JSONL line, a member of a JSON document
and a row of an agent's SQLite database are mutated alike. Each mutant must import with no internal error
(they raise under the test suite) and no failed file, every record passed over named by file and line (or record),
and a second import adding nothing; mutants are imported a hundred to a database, as a database per mutant costs
more than the import. For a few of each case (`EXACT`), imported alone, a JSONL line replaced by one that is not
JSON must cost exactly that line: the import stores what the same file without the line stores.
The whole run: `pytest -s tests/test_import_mutants.py` prints how many mutants and how long (46 s for 10,010 on
the 2-core machine this was written on, shared with other work).
"""
from __future__ import annotations

import json
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES

import reasonlog
from reasonlog.io.importing import BaseImporter, Importer, Report, importers, run_import
from reasonlog.io.planning import plan_as

HERE = Path(__file__).resolve().parent / "fixtures"
TOTAL = 10_000   # mutants over all importers, shared out evenly (the test asserts it made them all)
BATCH = 100      # mutants imported into one database
EXACT = 4        # mutants of each case imported alone, their counts compared with the file without the line
ODD: list[Any] = [None, [], {}, {"a": [1]}, [["x"]], 0, -1, 2 ** 64, 1.5, True, "", "x" * 200,
                  "2025-13-45T99:00:00Z", {"type": "text"}]
NOT_A_RECORD = [b"{cut", b"\xff\xfe", b"42", b"[1]", b"null", b'"text"', b"{}"]


@dataclass(frozen=True)
class Case:
    """An importer's fixture: the folder or file to import (copied whole for each mutant) and, under it, what
    may be mutated (all JSONL, JSON and SQLite files unless `only` narrows it)."""

    importer: str
    source: Path
    only: tuple[str, ...] = ()


TRADER = FIXTURES / "ai-trader-agent-log" / "agent_data" / "claude-3.7-sonnet"
CASES = [
    Case("reasonlog-jsonl", HERE / "import_source.jsonl"),
    Case("exchange-jsonl", HERE / "exchange_jsonl" / "session.jsonl"),
    Case("qwen", HERE / "qwen" / "v0.15.10" / "projects"),
    Case("qwen", HERE / "qwen" / "v0.15.10-subagent" / "projects"),
    Case("claude-code", HERE / "claude_code" / "current"),
    Case("claude-code", FIXTURES / "claude-code-transcripts" / "spotter" / "short.jsonl"),
    Case("claude-code", HERE / "claude_code" / "nested"),
    Case("codex", HERE / "codex" / "sessions"),
    Case("codex", HERE / "codex" / "versions"),
    Case("gemini", HERE / "gemini" / "tmp"),
    Case("claude-agent-sdk", HERE / "claude_agent" / "two-exchanges-cumulative.jsonl"),
    Case("claude-agent-sdk", FIXTURES / "claude-agent-sdk" / "subagent-step-stream.json"),
    Case("trading-log", TRADER.parent, only=("sonnet/log/2025-10-07/log.jsonl", "sonnet/position/position.jsonl")),
    Case("game-log", FIXTURES / "pycatan-ai-logs" / "session_20260109_171431"),
    Case("interactions", HERE / "interactions" / "logs", only=("100030.json", "100100.json", "100130.json")),
    Case("aider", HERE / "aider" / "v0.86.2" / "repo"),
    Case("amp", HERE / "amp" / "threads"),
    Case("cline", HERE / "cline" / "v2.18.0" / "data"),
    Case("cline", HERE / "cline" / "v3.0.65" / "data", only=(".messages.json",)),
    Case("copilot", HERE / "copilot" / "v1.0.102" / "session-state"),
    Case("cursor", HERE / "cursor" / "projects"),
    Case("kimi", HERE / "kimi" / "v1.51.0" / "sessions", only=("wire.jsonl",)),  # (context.jsonl: its prompt only)
    Case("opencode", HERE / "opencode" / "v1.18.33"),
    Case("opencode", HERE / "opencode" / "v1.1.53"),
    Case("opencode", HERE / "kilo" / "v7.7.7"),
    Case("pi", HERE / "pi" / "v0.73.1" / "sessions"),
]


# ------------------------------------------------------------------------------ the places a mutant changes


def _paths(value: Any, here: tuple = ()) -> list[tuple]:
    """Every place in a JSON value: the value itself, then each member, depth first."""
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*here, i))
    return out


def _changed(rng: random.Random, value: Any) -> tuple[str, Any]:
    """`value` with one place changed: (what was done, the new value). Works on a copy."""
    value = json.loads(json.dumps(value))
    places = _paths(value)
    path = rng.choice(places[1:] if len(places) > 1 else places)
    if not path:
        return "replaced", rng.choice(ODD)
    *head, last = path
    parent = value
    for step in head:
        parent = parent[step]
    old = parent[last]
    kind = rng.choice(("retyped", "removed", "object"))
    if kind == "removed" and isinstance(parent, dict):
        del parent[last]
    elif kind == "object" and not isinstance(old, (dict, list)):
        parent[last] = {"value": old}
    else:
        kind = "retyped"
        parent[last] = rng.choice([v for v in ODD if type(v) is not type(old)])
    return f"{kind} {'.'.join(map(str, path))}", value


def _dump(value: Any) -> bytes:
    return json.dumps(value).encode()  # json: orjson cannot write integers past 64 bits


@dataclass
class Mutant:
    """One change to one file of a case; `without` is the file with the changed line left out, when the change
    replaced a JSONL line by one that is not JSON (the import must then store what that file stores)."""

    file: Path            # relative to the case's root
    what: str
    line: int | None = None
    data: bytes | None = None
    without: bytes | None = None
    table: tuple[str, str, int] | None = None  # a SQLite row's JSON column: (table, column, rowid)


def _jsonl_mutant(rng: random.Random, rel: Path, data: bytes) -> Mutant:
    lines = data.splitlines(keepends=True)
    numbered = [i for i, raw in enumerate(lines) if raw.strip()]
    i = rng.choice(numbered)
    roll = rng.random()
    if roll < 0.15:
        bad = rng.choice(NOT_A_RECORD[:-1]) + b"\n"
        rest = b"".join([*lines[:i], *lines[i + 1:]])
        return Mutant(rel, "not a record", i + 1, b"".join([*lines[:i], bad, *lines[i + 1:]]), rest)
    if roll < 0.22:
        cut = lines[i][: max(1, len(lines[i]) // 2)].rstrip(b"\n") + b"\n"
        return Mutant(rel, "cut short", i + 1, b"".join([*lines[:i], cut, *lines[i + 1:]]))
    if roll < 0.25:
        last = data.rstrip(b"\n")
        return Mutant(rel, "file cut", len(lines), last[: len(last) - max(1, len(lines[-1]) // 3)])
    try:
        value = orjson.loads(lines[i])
    except orjson.JSONDecodeError:
        return Mutant(rel, "cut short", i + 1, b"".join([*lines[:i], lines[i][:-2] + b"\n", *lines[i + 1:]]))
    what, new = _changed(rng, value)
    return Mutant(rel, what, i + 1, b"".join([*lines[:i], _dump(new) + b"\n", *lines[i + 1:]]))


def _json_mutant(rng: random.Random, rel: Path, data: bytes) -> Mutant:
    if rng.random() < 0.05:
        return Mutant(rel, "file cut", None, data[: len(data) // 2])
    what, new = _changed(rng, orjson.loads(data))
    return Mutant(rel, what, None, _dump(new))


def _text_mutant(rng: random.Random, rel: Path, data: bytes) -> Mutant:
    lines = data.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    new = rng.choice([b"", b"> \n", b"#### \n", b"\xff\xfe\n", lines[i][: len(lines[i]) // 2] + b"\n", b"```\n"])
    return Mutant(rel, "text line changed", i + 1, b"".join([*lines[:i], new, *lines[i + 1:]]))


def _json_columns(db: Path) -> list[tuple[str, str, int]]:
    """Every (table, column, rowid) of a SQLite file whose value is a JSON object or array."""
    out = []
    with sqlite3.connect(db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
            for column in columns:
                for rowid, value in con.execute(f'SELECT rowid, "{column}" FROM "{table}"'):
                    if isinstance(value, str) and value[:1] in "{[" and _parses(value):
                        out.append((table, column, rowid))
    return out


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def _db_mutant(rng: random.Random, rel: Path, db: Path, cells: list[tuple[str, str, int]]) -> Mutant:
    table, column, rowid = rng.choice(cells)
    with sqlite3.connect(db) as con:
        (value,) = con.execute(f'SELECT "{column}" FROM "{table}" WHERE rowid = ?', (rowid,)).fetchone()
    if rng.random() < 0.1:  # (not "not JSON": OpenCode's tables refuse that themselves)
        return Mutant(rel, f"{table}.{column} not an object", None, b"42", table=(table, column, rowid))
    what, new = _changed(rng, json.loads(value))
    return Mutant(rel, f"{table}.{column} {what}", None, _dump(new), table=(table, column, rowid))


# ------------------------------------------------------------------------------ importing a mutant


class Scratch:
    """A folder in memory where the system has one (thousands of databases are written), an empty database to
    copy for each import, and the case's files copied once."""

    def __init__(self) -> None:
        base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
        self.folder = Path(tempfile.mkdtemp(prefix="reasonlog-mutants-", dir=base))
        reasonlog.open_store(self.folder / "empty.db").close()
        self.n = 0

    def store(self):
        self.n += 1
        target = self.folder / f"t{self.n % 2}.db"
        shutil.copyfile(self.folder / "empty.db", target)
        for suffix in ("-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        return reasonlog.open_store(target)

    def copy(self, case: Case) -> Path:
        """The case's files in a folder of their own, under their own name (formats read names); with `only`,
        just those files."""
        shutil.rmtree(self.folder / "case", ignore_errors=True)
        root = self.folder / "case" / case.source.name
        if case.source.is_file():
            root.parent.mkdir()
            shutil.copyfile(case.source, root)
            return root
        for p in sorted(case.source.rglob("*")):
            rel = p.relative_to(case.source)
            if p.is_file() and (not case.only or any(str(rel).endswith(o) for o in case.only)):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, root / rel)
        return root


def _import(scratch: Scratch, imp: Importer, root: Path) -> tuple[Report, Report, dict[str, int]]:
    store = scratch.store()
    try:
        files = plan_as(root, imp)  # what `reasonlog import --format NAME ROOT` reads, files passed over named
        first = run_import(store, files)
        second = run_import(store, files)
        counts = store.record_counts()
    finally:
        store.close()
    return first, second, counts


def _mutable(case: Case, root: Path) -> list[Path]:
    base = root if root.is_dir() else root.parent
    found = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    wanted = [p for p in found if p.suffix in (".jsonl", ".json", ".db", ".md") and p.stat().st_size]
    if case.only:
        wanted = [p for p in wanted if any(str(p.relative_to(base)).endswith(o) for o in case.only)]
    return [p.relative_to(base) for p in wanted]


def _mutants(case: Case, root: Path, n: int, seed: int) -> Iterator[Mutant]:
    rng = random.Random(seed)
    base = root if root.is_dir() else root.parent
    files = _mutable(case, root)
    assert files, f"{case.source}: nothing to mutate"
    cells = {rel: _json_columns(base / rel) for rel in files if rel.suffix == ".db"}
    for _ in range(n):
        rel = rng.choice(files)
        if rel.suffix == ".db":
            yield _db_mutant(rng, rel, base / rel, cells[rel])
            continue
        data = (base / rel).read_bytes()
        make: Callable[[random.Random, Path, bytes], Mutant] = (
            _jsonl_mutant if rel.suffix == ".jsonl" or (rel.suffix == ".json" and _is_jsonl(data)) else
            _json_mutant if rel.suffix == ".json" else _text_mutant)
        yield make(rng, rel, data)


def _is_jsonl(data: bytes) -> bool:
    try:
        orjson.loads(data)
        return False
    except orjson.JSONDecodeError:
        return True


def _apply(base: Path, mutant: Mutant, data: bytes | None) -> bytes | str:
    """Write `data` (or the mutant's) into the copy; return what was there, to put back."""
    target = base / mutant.file
    if mutant.table is not None:
        table, column, rowid = mutant.table
        with sqlite3.connect(target) as con:
            (old,) = con.execute(f'SELECT "{column}" FROM "{table}" WHERE rowid = ?', (rowid,)).fetchone()
            con.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?',
                        ((data or mutant.data or b"").decode("utf-8", "replace"), rowid))
        con.close()
        return old
    old_bytes = target.read_bytes()
    target.write_bytes(data if data is not None else mutant.data or b"")
    return old_bytes


def _restore(base: Path, mutant: Mutant, old: bytes | str) -> None:
    if isinstance(old, str):
        _apply(base, mutant, old.encode())
    else:
        (base / mutant.file).write_bytes(old)


def _check(case: Case, imp: Importer, scratch: Scratch, root: Path, mutant: Mutant) -> None:
    base = root if root.is_dir() else root.parent
    old = _apply(base, mutant, None)
    try:
        first, second, counts = _import(scratch, imp, root)
        if mutant.without is not None:
            _apply(base, mutant, mutant.without)
            _, _, expected = _import(scratch, imp, root)
    finally:
        _restore(base, mutant, old)
    said = f"{case.importer} {mutant.file}:{mutant.line} {mutant.what}"
    assert not [f for f in first.failed if "internal error" in f[1]], said
    whole = type(imp).import_whole is not BaseImporter.import_whole  # all or nothing (reasonlog's export)
    if not whole:
        assert first.failed == [], (said, first.failed)
    for where, _reason in first.skipped:
        assert where.startswith(str(root if root.is_dir() else root.parent)), (said, where)
    assert second.added == dict.fromkeys(second.added, 0), said  # (a JSON document cut short is tried again)
    assert second.failed == (first.failed if whole else []), said
    if mutant.without is not None and not whole:
        named = {f"{base / mutant.file}:{mutant.line}", str(base / mutant.file)}  # the line, or (a header) the file
        assert named & {w.split(" (")[0] for w, _ in first.skipped}, (said, first.skipped)
        assert counts == expected, said


# ------------------------------------------------------------------------------ the tests


def test_every_importer_has_fixtures_to_mutate():
    assert set(importers()) == {c.importer for c in CASES}  # a new importer fails here until it has fixtures below


def _check_batch(case: Case, imp: Importer, scratch: Scratch, root: Path, mutants: list[Mutant]) -> None:
    """Many mutants imported into one database, each in a folder of its own (a database per mutant costs more
    than the import): what each must hold without a database of its own (no failure, every skip named in its
    own folder, a second import adding nothing). Mutants of one fixture share ids, so one's calls may be taken for
    another's: the counts are checked per mutant by `_check`."""
    batch = scratch.folder / "batch"
    shutil.rmtree(batch, ignore_errors=True)
    files = []
    for i, mutant in enumerate(mutants):
        copy = batch / str(i) / root.name
        if root.is_dir():
            shutil.copytree(root, copy)
        else:
            copy.parent.mkdir(parents=True)
            shutil.copyfile(root, copy)
        _apply(copy if root.is_dir() else copy.parent, mutant, None)
        files += plan_as(copy, imp)
    store = scratch.store()
    try:
        first = run_import(store, files)
        second = run_import(store, files)
    finally:
        store.close()

    def said(where: str) -> str:
        i = int(Path(where).relative_to(batch).parts[0])
        return f"{case.importer} {mutants[i].file}:{mutants[i].line} {mutants[i].what}"

    whole = type(imp).import_whole is not BaseImporter.import_whole  # all or nothing (reasonlog's export)
    assert [said(f) for f, why in first.failed if "internal error" in why or not whole] == [], first.failed
    assert [said(w) for w, _ in first.skipped if not w.startswith(str(batch))] == []
    assert second.added == dict.fromkeys(second.added, 0)  # (a JSON document cut short is tried again)
    assert second.failed == (first.failed if whole else [])


@pytest.mark.slow
def test_every_importer_keeps_the_other_records_of_a_mutated_file():
    """TOTAL mutants over all importers' fixtures, derandomized (seeded by the case): none ends in an internal
    error, a failed file, a record skipped without its place, or a second import that adds something; and, for a
    few of each case, a line replaced by one that is not JSON costs that line exactly (`_check`)."""
    known = importers()
    scratch = Scratch()
    made, exact, started = 0, 0, time.monotonic()
    per_case = -(-TOTAL // len(CASES))
    try:
        for seed, case in enumerate(CASES):
            imp = known[case.importer]
            root = scratch.copy(case)
            clean_first, _, clean = _import(scratch, imp, root)
            assert (clean_first.failed, clean_first.skipped) == ([], []), (case, clean_first.failed)
            assert clean["calls"] > 0, case
            mutants = list(_mutants(case, root, per_case, seed))
            for start in range(0, len(mutants), BATCH):
                _check_batch(case, imp, scratch, root, mutants[start:start + BATCH])
            for mutant in [m for m in mutants if m.without is not None][:EXACT] or mutants[:1]:
                _check(case, imp, scratch, root, mutant)
                exact += 1
            made += len(mutants)
    finally:
        shutil.rmtree(scratch.folder, ignore_errors=True)
    assert made == per_case * len(CASES)
    assert made >= TOTAL
    print(f"{made} mutants ({exact} alone in a database) in {time.monotonic() - started:.1f} s")
