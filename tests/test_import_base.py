"""The declarative importer base (io/importer.py): `Home` finds where an agent writes, `FormatImporter` tells a
format's files by their patterns and first values or bytes, and `Feed.values` skips and reports the lines not of a
format's shape; a format declared with them imports like the built-in ones (issue 33)."""
from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.io.importer import FormatImporter, Home, head
from reasonlog.io.importing import run_import
from reasonlog.model import CallRecorded, SessionEnded, SessionStarted, stable_id
from reasonlog.store import open_store


def _read(feed):
    """A tiny format: `{"kind": "hello", "id": …}` opens a session, `{"kind": "call", "text": …}` is a call."""
    sid = None
    for line in feed.values(lambda v: isinstance(v, dict) and v.get("kind") in ("hello", "call"),
                            "expected `kind` hello or call"):
        if line.value["kind"] == "hello":
            sid = stable_id(None, "tiny", line.value["id"])
            yield SessionStarted(session_id=sid, started_at="2026-01-01T00:00:00Z", agent="tiny")
        elif sid is not None:
            yield CallRecorded(call_id=stable_id(None, "tiny", sid, line.number), session_id=sid, exchange_id=None,
                               started_at="2026-01-01T00:00:01Z", request={"messages": []},
                               response={"role": "assistant", "content": line.value["text"]})
    if sid is not None:
        yield SessionEnded(session_id=sid, ended_at="2026-01-01T00:00:02Z")
    yield feed.checkpoint(feed.read_to, None)


TINY = FormatImporter("tiny", "a tiny format", _read, home=Home(".tiny", ("logs", "old"), env=("TINY_HOME",)),
                      files=("*.tiny.jsonl", "*.tiny"), opens=lambda first: first.get("kind") == "hello")


def _write(path: Path, *lines: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_home_is_the_first_variable_set_then_the_folder_under_home(monkeypatch, tmp_path):
    home = Home(".agent/data", ("sessions", "archive"), env=("AGENT_DIR", "XDG_DATA_HOME/agent"))
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.delenv("AGENT_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert home.paths() == [tmp_path / "h/.agent/data/sessions", tmp_path / "h/.agent/data/archive"]
    monkeypatch.setenv("XDG_DATA_HOME", "~/share")  # a `~` in a variable is the home folder
    assert home.paths() == [tmp_path / "h/share/agent/sessions", tmp_path / "h/share/agent/archive"]
    monkeypatch.setenv("AGENT_DIR", "")  # set but empty: not set
    assert home.root() == tmp_path / "h/share/agent"
    monkeypatch.setenv("AGENT_DIR", str(tmp_path / "given"))
    assert home.paths() == [tmp_path / "given/sessions", tmp_path / "given/archive"]
    assert Home(".agent").paths() == [tmp_path / "h/.agent"]


def test_a_folder_is_told_by_the_first_value_of_its_files_and_only_those_files_are_read(tmp_path):
    ours = _write(tmp_path / "b" / "one.tiny.jsonl", b'{"kind": "hello", "id": "s1"}',
                  b'{"kind": "call", "text": "hi"}')
    second = _write(tmp_path / "a" / "two.tiny", b'{"kind": "hello", "id": "s2"}')
    _write(tmp_path / "c" / "other.tiny", b'{"kind": "call", "text": "no hello first"}')
    _write(tmp_path / "d" / "notes.jsonl", b'{"kind": "hello", "id": "not our pattern"}')
    assert TINY.detect(tmp_path) and TINY.detect(ours) and not TINY.detect(tmp_path / "c" / "other.tiny")
    assert TINY.candidates(tmp_path) == [second, tmp_path / "b" / "one.tiny.jsonl", tmp_path / "c" / "other.tiny"]
    assert list(TINY.sources(tmp_path)) == [second, ours]
    assert TINY.default_folders() == [Path.home() / ".tiny" / "logs", Path.home() / ".tiny" / "old"]


def test_recognises_is_asked_before_the_first_values(tmp_path):
    named = FormatImporter("named", "", _read, opens=TINY.opens, recognises=lambda p: p.name.startswith("T-"))
    yes = _write(tmp_path / "T-1.jsonl", b'{"kind": "hello", "id": "x"}')
    no = _write(tmp_path / "U-1.jsonl", b'{"kind": "hello", "id": "x"}')
    assert (named.detect(yes), named.detect(no)) == (True, False)
    assert head(tmp_path / "missing") == b"" and head(yes, 9) == b'{"kind": '


def test_lines_not_of_the_shape_are_reported_and_the_rest_imported(tmp_path):
    log = _write(tmp_path / "s.tiny", b'{"kind": "hello", "id": "s"}', b"not json", b'{"kind": "other"}', b"[1]",
                 b'{"kind": "call", "text": "answer"}')
    store = open_store(tmp_path / "db.sqlite")
    try:
        report = run_import(store, [(log, TINY)])
        wrong = "expected `kind` hello or call"
        assert report.skipped == [(f"{log}:2", "not JSON (invalid literal, expected 'null')"), (f"{log}:3", wrong),
                                  (f"{log}:4", wrong)]
        assert report.added["sessions"] == 1 and report.added["calls"] == 1
        assert run_import(store, [(log, TINY)]).unchanged == 1  # read to its end: the checkpoint was the last line
    finally:
        store.close()


def test_the_collector_runs_rarely_while_an_import_runs_and_as_before_after_it(tmp_path):
    """An import's objects die by their reference counts: its young collections are rare (every 50,000 objects, not
    700), and the process's own thresholds come back when it ends, whatever they were."""
    during = []

    def read(feed):
        during.append(gc.get_threshold())
        yield from _read(feed)

    log = _write(tmp_path / "s.tiny", b'{"kind": "hello", "id": "s"}', b'{"kind": "call", "text": "answer"}')
    before = gc.get_threshold()
    store = open_store(tmp_path / "db.sqlite")
    try:
        gc.set_threshold(900, 11, 12)
        report = run_import(store, [(log, FormatImporter("timed", "", read, files=("*.tiny",)))])
        assert report.added["calls"] == 1
        assert during == [(50_000, 11, 12)] and gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)
        store.close()


def test_an_importer_may_checkpoint_only_when_a_batch_is_due(tmp_path):
    """`feed.batch_due` turns true once the loop holds a batch's worth of events (2,000) that no checkpoint covers, and
    false once the checkpoint after them is written: an importer whose state is costly to build checkpoints only then
    (as Claude Code's does), and every record is imported, with the state of its last checkpoint."""
    wanted: list[int] = []

    def read(feed):
        sid = stable_id(None, "due", "s")
        yield SessionStarted(session_id=sid, started_at="2026-01-01T00:00:00Z", agent="due")
        before = None
        for line in feed.values(lambda v: isinstance(v, dict), "expected an object"):
            if feed.batch_due:
                wanted.append(line.number)
                yield feed.checkpoint(before, {"line": before.number})
            yield CallRecorded(call_id=stable_id(None, "due", line.number), session_id=sid, exchange_id=None,
                               started_at="2026-01-01T00:00:01Z", request={"messages": []},
                               response={"role": "assistant", "content": str(line.value["n"])})
            before = line
        yield SessionEnded(session_id=sid, ended_at="2026-01-01T00:00:02Z")
        yield feed.checkpoint(feed.read_to, {"line": "end"})

    log = _write(tmp_path / "s.due", *(b'{"n": %d}' % n for n in range(4_500)))
    store = open_store(tmp_path / "db.sqlite")
    try:
        report = run_import(store, [(log, FormatImporter("due", "", read, files=("*.due",)))])
        assert wanted == [2_000, 4_000]  # the start and 1,999 calls, then 2,000 calls
        assert report.added["calls"] == 4_500 and report.failed == []
        row = store.import_file(str(log.resolve()))
        assert (row["consumed"], row["state"]) == (log.stat().st_size, {"line": "end", "$line": 4_500})
    finally:
        store.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(st.sampled_from(["kind", "id", "text"]),
                                          st.sampled_from(["hello", "call", "x", 1, None])),
                          st.integers(-1000, 1000), st.text(max_size=5)), min_size=1, max_size=6))
def test_a_file_is_ours_exactly_when_its_first_object_opens_it(tmp_path_factory, values):
    path = _write(tmp_path_factory.mktemp("v") / "f.tiny", *(orjson.dumps(v) for v in values))
    first = next((v for v in values if isinstance(v, dict)), None)
    assert TINY.detect(path) == (first is not None and first.get("kind") == "hello")


@pytest.mark.parametrize("name", ["codex", "qwen", "kimi", "copilot", "cursor", "pi", "gemini", "amp"])
def test_the_agents_folders_follow_their_variables(monkeypatch, tmp_path, name):
    from reasonlog.io.importing import importers

    variables = {"codex": "CODEX_HOME", "qwen": "QWEN_HOME", "kimi": "KIMI_SHARE_DIR", "copilot": "COPILOT_HOME",
                 "cursor": "CURSOR_CONFIG_DIR", "pi": "PI_CODING_AGENT_DIR", "gemini": "GEMINI_DIR",
                 "amp": "AMP_DATA_DIR"}
    monkeypatch.setenv(variables[name], str(tmp_path / name))
    assert all(p.is_relative_to(tmp_path / name) for p in importers()[name].default_folders())
