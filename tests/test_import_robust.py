"""`reasonlog import` is all or nothing in effect: a file that is incomplete, duplicated, mistyped or
that would not read back is refused with its file and line, and nothing is written."""
from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.demo import run_demo
from reasonlog.io import jsonl
from reasonlog.wire import row_of


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> list[bytes]:
    """The lines of a small real export: two agents with tools, outcomes, exchanges and raw payloads."""
    folder = tmp_path_factory.mktemp("source")
    run_demo(folder / "source.db", exchanges=1)
    store = reasonlog.open_store(folder / "source.db")
    try:
        return list(jsonl.dump_lines(store))
    finally:
        store.close()


def _rows(lines: list[bytes]) -> int:
    """How many records of an export are rows of its sessions (what import counts as added)."""
    kinds = [orjson.loads(line)["type"] for line in lines]
    return sum(kinds.count(k) for k in ("session", "exchange", "call", "message", "tool_result", "outcome"))


def _import(db: Path, path: Path | str):
    """`reasonlog import`, letting any exception escape: a traceback fails the test."""
    return CliRunner().invoke(cli, ["--db", str(db), "import", str(path)], catch_exceptions=False)


def _refused(tmp_path: Path, lines: list[bytes], *fragments: str, read_back: bool = False) -> str:
    """Import `lines` into a database that does not exist yet: it must be refused and never created.

    With `read_back` the file is well formed and fails only when read back after inserting, so the
    database exists, but it must hold nothing.
    """
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(lines))
    db = tmp_path / "new.db"
    result = _import(db, path)
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and result.output.startswith(f"error: {path}:"), result.output
    for fragment in fragments:
        assert fragment in result.output
    if read_back:
        store = reasonlog.open_store(db)
        assert store.status()["counts"] == {"sessions": 0, "calls": 0, "messages": 0, "contents": 0, "outcomes": 0}
        store.close()
    else:
        assert not db.exists()
    return result.output


def _records(lines: list[bytes]) -> list[dict]:
    return [orjson.loads(line) for line in lines]


def _line(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True).encode() + b"\n"  # json, not orjson: it writes 2 ** 64 too


def _first(lines: list[bytes], kind: str, nth: int = 0) -> int:
    """The 0-based position of the nth record of a kind."""
    return [i for i, r in enumerate(_records(lines)) if r["type"] == kind][nth]


def _with(lines: list[bytes], kind: str, changes: dict) -> tuple[list[bytes], int]:
    """The lines with the first record of `kind` changed; also its 1-based line number."""
    i = _first(lines, kind)
    record = {**orjson.loads(lines[i]), **changes}
    return lines[:i] + [_line(record)] + lines[i + 1:], i + 1


def test_an_export_ends_with_its_counts(exported):
    records = _records(exported)
    assert records[0] == {"type": "reasonlog", "version": 4}
    # The demo's two agents: gpt-5's own system message and two function tools are 3 contents of its own.
    assert records[-1] == {"type": "end", "records": 37, "counts": {
        "session": 2, "exchange": 2, "call": 4, "message": 10, "tool_result": 2, "outcome": 2, "content": 13,
        "counters": 1, "annotation": 0}}


@pytest.mark.parametrize("keep", [1, 2, 9, 20, 35, 36])
def test_a_file_cut_at_a_line_boundary_is_refused_as_incomplete(exported, tmp_path, keep):
    _refused(tmp_path, exported[:keep], "incomplete")


def test_a_file_cut_inside_a_line_is_refused_as_incomplete(exported, tmp_path):
    data = b"".join(exported)
    _refused(tmp_path, [data[:len(data) // 2]], "incomplete")


def test_counts_that_disagree_are_refused(exported, tmp_path):
    end = orjson.loads(exported[-1])
    end["counts"]["call"] = 5
    output = _refused(tmp_path, exported[:-1] + [_line(end)], "incomplete", "5 call")
    assert f":{len(exported)}:" in output


def _as_rows(lines: list[bytes]) -> list[bytes]:
    """Records as versions 1 and 2 wrote them: JSON fields as text, under their row names (`labels_json`)."""
    return [_line(row_of(r["type"], r)) for r in _records(lines)]


def test_a_version_2_file_still_imports(exported, tmp_path):
    lines = [_line({"type": "reasonlog", "version": 2})] + _as_rows(exported[1:])
    result = _import(tmp_path / "db", _write(tmp_path / "v2.jsonl", lines))
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(cli, ["--db", str(tmp_path / "db"), "export"]).stdout_bytes
    assert again.splitlines(keepends=True) == exported  # read as version 2, written as version 3: the same data


def test_version_3_fields_are_parsed_json(exported):
    session = next(r for r in _records(exported) if r["type"] == "session")
    call = next(r for r in _records(exported) if r["type"] == "call")
    assert isinstance(session["labels"], dict) and "labels_json" not in session
    assert isinstance(call["params"], dict) and isinstance(call["context"], list)
    assert all(isinstance(h, str) and len(h) == 32 for h in call["tools"] or [])


def test_a_version_1_file_without_counts_is_imported_with_a_warning(exported, tmp_path):
    lines = [_line({"type": "reasonlog", "version": 1})] + _as_rows(exported[1:-1])
    path = tmp_path / "v1.jsonl"
    path.write_bytes(b"".join(lines))
    result = _import(tmp_path / "db", path)
    assert result.exit_code == 0, result.output
    assert f"{_rows(exported)} records added (2 session(s))" in result.stdout
    assert "version-1 export" in result.stderr and "cannot tell" in result.stderr
    store = reasonlog.open_store(tmp_path / "db")
    assert store.status()["counts"]["calls"] == 4
    store.close()


def test_a_version_1_file_that_carries_counts_is_refused(exported, tmp_path):
    lines = [_line({"type": "reasonlog", "version": 1})] + _as_rows(exported[1:])
    _refused(tmp_path, lines, f":{len(exported)}:", "version 1")


@pytest.mark.parametrize("kind", ["session", "call", "content", "message", "exchange", "tool_result", "outcome"])
def test_a_duplicated_record_names_both_lines(exported, tmp_path, kind):
    i = _first(exported, kind)
    lines = exported[:i + 1] + [exported[i]] + exported[i + 1:]
    _refused(tmp_path, lines, f"in.jsonl:{i + 2}:", f"line {i + 1}")


def test_a_message_index_twice_names_both_lines(exported, tmp_path):
    first, second = _first(exported, "message", 0), _first(exported, "message", 1)
    record = {**orjson.loads(exported[second]), "idx": orjson.loads(exported[first])["idx"]}
    lines = exported[:second] + [_line(record)] + exported[second + 1:]
    _refused(tmp_path, lines, f"in.jsonl:{second + 1}:", f"line {first + 1}", "message")


@pytest.mark.parametrize(("kind", "field", "value", "expected"), [
    ("call", "input_tokens", "lots", "an integer"),
    ("call", "input_tokens", 2 ** 64, "an integer"),
    ("call", "input_tokens", True, "an integer"),
    ("call", "latency_ms", "fast", "a number"),
    ("message", "idx", "x", "an integer"),
    ("message", "content", None, "a content hash"),
    ("session", "labels", 5, "expected an object, got int 5"),
    ("session", "labels", [1, 2], "expected an object, got list [1,2]"),
    ("session", "labels_json", "{}", "a version 2 name; version 3 writes 'labels'"),
    ("session", "xml_tool_tags", [[1, 2]], "a list of tag names"),
    ("session", "started_at", None, "text"),
    ("session", "id", ["s"], "text"),
    ("call", "params", "{not json", "expected an object, got str"),
    ("call", "params", None, "expected an object, got null"),
    ("call", "context", [[0, "x"]], "a list of content hashes"),
    ("call", "context", "[]", "[start, end] runs, got str"),
    ("call", "context_len", None, "an integer"),
    ("exchange", "stats", [], "expected an object or null, got list []"),
    ("call", "input_tokens", 2 ** 64, "an integer"),
    ("tool_result", "is_error", "no", "0 or 1"),
    ("outcome", "message_idx", {"a": 1}, "an integer"),
    ("content", "kind", 3, "expected message or system or tool, got int 3"),
    ("counters", "values", [1], "an object of integers"),
])
def test_a_field_of_the_wrong_type_names_file_line_and_field(exported, tmp_path, kind, field, value, expected):
    lines, lineno = _with(exported, kind, {field: value})
    _refused(tmp_path, lines, f"in.jsonl:{lineno}:", repr(field), expected)


def test_a_record_that_is_a_list_is_refused_with_its_line(exported, tmp_path):
    _refused(tmp_path, exported[:3] + [b"[1, 2]\n"] + exported[3:], "in.jsonl:4:", "JSON object")


def test_an_unknown_field_is_refused_with_its_line(exported, tmp_path):
    lines, lineno = _with(exported, "outcome", {"colour": "red"})
    _refused(tmp_path, lines, f"in.jsonl:{lineno}:", "'colour'")


def test_a_call_whose_context_does_not_decode_is_refused_at_that_call(exported, tmp_path):
    i = _first(exported, "call", 1)
    record = orjson.loads(exported[i])
    record["context"] = [[0, 99]] + record["context"]
    lines = exported[:i] + [_line(record)] + exported[i + 1:]
    _refused(tmp_path, lines, f"in.jsonl:{i + 1}:", "replay", read_back=True)


def test_a_call_whose_raw_payload_does_not_read_back_is_refused_at_that_call(exported, tmp_path):
    lines, lineno = _with(exported, "call", {"raw": "{not json"})
    _refused(tmp_path, lines, f"in.jsonl:{lineno}:", "replay", read_back=True)


def test_a_refused_import_leaves_a_database_as_it_was(exported, tmp_path):
    db = tmp_path / "full.db"
    source = tmp_path / "source.db"
    assert _import(source, _write(tmp_path / "all.jsonl", exported)).exit_code == 0
    good = tmp_path / "first-session.jsonl"
    first_id = _records(exported)[1]["id"]
    assert CliRunner().invoke(cli, ["--db", str(source), "export", first_id, "-o", str(good)]).exit_code == 0
    assert _import(db, good).exit_code == 0
    before = CliRunner().invoke(cli, ["--db", str(db), "export"]).stdout_bytes
    bad = exported[:-3] + exported[-2:]  # the second session loses its last outcome
    result = _import(db, _write(tmp_path / "bad.jsonl", bad))
    assert result.exit_code == 1 and "incomplete" in result.output
    assert CliRunner().invoke(cli, ["--db", str(db), "export"]).stdout_bytes == before


NO_IMPORTER = (": no importer recognises it; if it is one of aider, amp, claude-agent-sdk, claude-code, cline, codex,"
               " copilot, cursor, exchange-jsonl, game-log, gemini, interactions, kimi, opencode, pi, qwen,"
               " reasonlog-jsonl, trading-log, name it with --format NAME"
               " (reasonlog import --list-formats describes them)")


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize(("name", "content", "said"), [
    ("empty.jsonl", b"", ": an empty file, nothing to import"),
    ("blank.jsonl", b"\n\n", ": an empty file, nothing to import"),
    ("noheader.jsonl", b'{"type": "session", "id": "s"}\n', NO_IMPORTER),
    ("garbage.bin", bytes(range(256)) * 4, NO_IMPORTER),
    ("latin1.jsonl", b'{"type": "reasonlog", "version": "caf\xe9"}\n', ":1: not UTF-8"),
    ("scalar.jsonl", b"42\n", NO_IMPORTER),
    ("newer.jsonl", b'{"type": "reasonlog", "version": 5}\n', ":1: export version 5"),
])
def test_hostile_files_are_one_line_and_create_nothing(tmp_path, name, content, said):
    """A file no importer recognises says so with the formats and `--format`; one that starts as reasonlog's
    export does gets its parser's error at the line."""
    path = _write(tmp_path / name, [content])
    db = tmp_path / "new.db"
    result = _import(db, path)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {path}{said}"), result.output
    assert not db.exists()


@pytest.mark.parametrize("target", ["missing.jsonl", "."])
def test_a_missing_file_or_a_directory_is_one_line_and_creates_nothing(tmp_path, target):
    db = tmp_path / "new.db"
    result = _import(db, tmp_path / target)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: ") and str(tmp_path) in result.output
    assert not db.exists()


def test_import_without_a_file_and_no_agent_folder_says_where_it_looked(tmp_path, monkeypatch):
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # never the real user's folders
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name))
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "db"), "import"], catch_exceptions=False)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith("error: no agent's default folder exists here (looked in ")
    assert str(tmp_path / ".claude" / "projects") in result.output and not (tmp_path / "db").exists()


def test_import_from_stdin_checks_the_same(exported, tmp_path):
    db = tmp_path / "new.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", "-"], input=b"".join(exported[:-1]),
                                catch_exceptions=False)
    assert (result.exit_code == 1 and result.output.startswith(f"error: -:{len(exported) - 1}: ")
            and "incomplete" in result.output)
    assert not db.exists()
    result = CliRunner().invoke(cli, ["--db", str(db), "import", "-"], input=b"".join(exported),
                                catch_exceptions=False)
    assert result.exit_code == 0 and f"{_rows(exported)} records added (2 session(s))" in result.output


def test_export_to_a_folder_that_does_not_exist_is_one_line(exported, tmp_path):
    db = tmp_path / "db"
    assert _import(db, _write(tmp_path / "all.jsonl", exported)).exit_code == 0
    result = CliRunner().invoke(cli, ["--db", str(db), "export", "-o", str(tmp_path / "no" / "x.jsonl")],
                                catch_exceptions=False)
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "x.jsonl" in result.output


SPOTTER = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real" / "claude-code-transcripts" / "spotter"


@pytest.mark.parametrize("together", [False, True], ids=["one import, then the copy", "both in one import"])
def test_a_copy_of_imported_transcripts_is_reported_as_one_and_rejects_nothing(tmp_path, together):
    """The same transcripts in a second folder are the same sessions: each file is named as a copy of the one
    imported, nothing is added or rejected, and `db status` stays clean."""
    import shutil

    first, second = tmp_path / "laptop", tmp_path / "backup"
    shutil.copytree(SPOTTER, first)
    shutil.copytree(SPOTTER, second)
    db = tmp_path / "copies.db"
    runner = CliRunner()
    invoke = lambda *paths: runner.invoke(cli, ["--db", str(db), "import", *map(str, paths)],  # noqa: E731
                                          catch_exceptions=False)
    if not together:
        assert invoke(first).exit_code == 0
    result = invoke(first, second) if together else invoke(second)
    assert result.exit_code == 0, result.output
    copies = sorted(line for line in result.output.splitlines() if "already imported from" in line)
    expected = sorted(f"{copy}: already imported from {first / copy.relative_to(second)} (a copy: nothing added)"
                      for copy in second.rglob("*.jsonl"))
    assert copies == expected and len(copies) == 6
    assert "rejected" not in result.output and "IntegrityError" not in result.output
    status = json.loads(runner.invoke(cli, ["--db", str(db), "db", "status", "--json"]).output)
    assert status["rejected_records"] == 0
    assert (status["counts"]["sessions"], status["counts"]["calls"]) == (7, 243)


def test_a_copy_of_a_transcript_cut_in_its_last_line_stays_a_copy_when_imported_again(tmp_path):
    """A transcript whose last line is cut (the agent killed mid-write) is read up to that line; its copy in a second
    folder is the same file, named a copy at every import. The second import adds nothing: the copy is not read then
    either (read, its records with no instant of their own would come again, at its own mtime)."""
    import os

    from reasonlog.io.importing import ADDED, plan, run_import

    source = Path(__file__).resolve().parent / "fixtures" / "claude_code" / "current"
    name = "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61.jsonl"
    data = (source / name).read_bytes().rstrip(b"\n")
    first, second = (tmp_path / "laptop" / name).resolve(), (tmp_path / "backup" / name).resolve()
    for path, mtime in ((first, 1_780_000_000), (second, 1_780_000_060)):
        path.parent.mkdir()
        path.write_bytes(data[:-20])  # the last line (a title) cut short, without its newline
        os.utime(path, (mtime, mtime))
    store = reasonlog.open_store(tmp_path / "cut.db")
    try:
        files = plan([first.parent, second.parent], "claude-code")
        reports = [run_import(store, files) for _ in range(2)]
    finally:
        store.close()
    assert [r.copies for r in reports] == [[(str(second), str(first))], [(str(second), str(first))]]
    assert reports[0].added == {"sessions": 2, "calls": 3, "messages": 6, "tool_results": 0, "outcomes": 9}  # (18: cut)
    assert reports[1].added == dict.fromkeys(ADDED, 0)
