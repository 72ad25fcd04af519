"""One bad line never loses a file: a Codex rollout or a Claude Code transcript with any one line mutated (a field of
another type, a key gone, the line replaced) still imports every call the other lines hold, reports the bad line
with file:line, and never ends in a traceback. The Claude Code transcripts are real (spotter, Claude Code 2.1.38);
no real Codex rollout is public with a licence that lets it be copied, so the Codex one is the hand-written main
fixture (tests/fixtures/codex/README.md)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlog.io.importing import plan, run_import
from reasonlog.model import stable_id
from reasonlog.store import SessionFilter, open_store

CODEX = Path(__file__).resolve().parent / "fixtures" / "codex" / "sessions" / "2025" / "10" / "29" / \
    "rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl"
SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"
ALL = SessionFilter(limit=None)
ODD = [None, [], {}, [["x"]], {"a": [1]}, 0, -1, 2 ** 64, 1.5, True, "", "x" * 200, "2025-13-45T99:00:00Z"]


# ------------------------------------------------------------------------------ named cases


def test_a_mistyped_codex_line_is_skipped_and_named_and_the_rest_imported(tmp_path):
    lines = CODEX.read_bytes().splitlines(keepends=True)
    lines[7] = lines[7].replace(b'"type":"function_call"', b'"type":["function_call"]')  # was: unhashable list
    target = tmp_path / CODEX.name
    target.write_bytes(b"".join(lines))
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([target]))
    assert report.failed == []
    assert report.skipped == [(f"{target}:8", "response_item: expected `type` as a string, got list")]
    assert report.added["calls"] == 3


def test_an_event_the_store_cannot_hold_is_named_by_file_and_line(tmp_path):
    """Any importer (a plug-in too): what the store would reject is reported with the line it came from."""
    from reasonlog.model import OutcomeRecorded, SessionStarted

    class Plugin:
        name, description, incremental = "plugin", "test format", True

        def detect(self, path):
            return True

        def sources(self, path):
            yield path

        def read(self, feed):
            for line in feed.lines():
                if line.number == 1:
                    yield SessionStarted(session_id="s1", started_at="2026-01-01T00:00:00Z")
                else:  # an outcome kind must be a text: the store would reject a list
                    yield OutcomeRecorded(outcome_id=f"o{line.number}", session_id="s1", at="2026-01-01T00:00:01Z",
                                          outcome_kind=line.value["kind"], payload={})
                yield feed.checkpoint(line, None)

    source = tmp_path / "x.jsonl"
    source.write_text('{}\n{"kind": "ok"}\n{"kind": ["bad"]}\n{"kind": "fine"}\n')
    store = open_store(tmp_path / "t.db")
    report = run_import(store, [(source, Plugin())])
    assert report.skipped == [(f"{source}:3", "outcome not stored: outcome_kind: expected a non-empty str, got list")]
    assert (report.rejected, report.added["outcomes"]) == (0, 2)


def test_the_agent_sdk_importer_names_file_line_and_what_was_expected(tmp_path):
    stream = (Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl")
    lines = stream.read_text().splitlines()
    bad = [
        '{"type":"assistant","message":"oops","parent_tool_use_id":null,"session_id":"s"}',
        '{"type":"assistant","message":{"id":"m9","role":"assistant","content":[],"usage":{"input_tokens":"x"}},'
        '"parent_tool_use_id":null,"session_id":"s"}',
        '{"type":"result","subtype":"success","session_id":"s","usage":[1],"modelUsage":{}}',
        '{"type":"result","subtype":"success","session_id":"s","modelUsage":{"claude-sonnet-4-5":[2]}}',
    ]
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join([lines[0], *bad, *lines[1:]]) + "\n")
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([dump]))
    assert report.failed == []
    assert report.skipped == [
        (f"{dump}:2", "assistant: expected `message` as an object, got a text"),
        (f"{dump}:3", "assistant: expected `message.usage.input_tokens` as a non-negative integer, got 'x'"),
        (f"{dump}:4", "result: expected `usage` as an object, got a list"),
        (f"{dump}:5", "result: expected `modelUsage.claude-sonnet-4-5` as an object of figures, got a list")]
    assert report.added["calls"] == 3  # the good messages' calls, as without the bad lines


# ------------------------------------------------------------------------------ the property


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


def _mutate(value: Any, path: tuple, new: Any, delete: bool) -> Any:
    if not path:
        return new
    *head, last = path
    parent = value
    for step in head:
        parent = parent[step]
    if delete and isinstance(parent, dict):
        del parent[last]
    else:
        parent[last] = new
    return value


@st.composite
def mutants(draw, lines: list[bytes]) -> tuple[int, bytes]:
    """(index, new bytes) of one line of `lines` changed."""
    index = draw(st.integers(0, len(lines) - 1))
    if draw(st.integers(0, 9)) == 0:  # the line replaced by something that is not a record at all
        return index, draw(st.sampled_from([b"{cut\n", b"\xff\xfe\n", b"42\n", b"[1]\n", b"null\n", b"\n"]))
    value = orjson.loads(lines[index])
    path = draw(st.sampled_from(_paths(value)))
    new = draw(st.sampled_from(ODD))
    mutated = _mutate(value, path, new, delete=draw(st.booleans()))
    return index, json.dumps(mutated).encode() + b"\n"  # json: orjson cannot write integers past 64 bits


def _import(name: str, lines: list[bytes]):
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / name
        target.write_bytes(b"".join(lines))
        store = open_store(Path(folder) / "t.db")
        report = run_import(store, plan([target]))  # a traceback here (internal errors raise in tests) fails
        calls = {c["id"] for c in store.call_rows(ALL) if "id" in c}  # (rows of reported exchange costs have none)
        store.close()
    return report, calls


def _codex_keys(lines: list[bytes]) -> set[str]:
    """The calls the token_count lines name (their running total identifies them)."""
    keys = set()
    for raw in lines:
        v = orjson.loads(raw)
        info = (v.get("payload") or {}).get("info")
        if v.get("type") == "event_msg" and isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict):
            total = orjson.dumps(info["total_token_usage"], option=orjson.OPT_SORT_KEYS).decode()
            keys.add(stable_id(None, "codex", total))
    return keys


def _claude_keys(lines: list[bytes]) -> set[str]:
    """The calls the assistant lines name (`message.id:requestId`)."""
    keys = set()
    for raw in lines:
        v = orjson.loads(raw)
        if v.get("type") == "assistant" and isinstance(v.get("message"), dict) and v["message"].get("id"):
            key = f"{v['message']['id']}:{v['requestId']}" if v.get("requestId") else v["message"]["id"]
            keys.add(stable_id(None, "claude-code", key))
    return keys


CURRENT = Path(__file__).resolve().parent / "fixtures" / "claude_code" / "current" / \
    "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61.jsonl"  # hand-written: titles, waiting records, an inline sub-agent
CASES = {"codex": (CODEX, _codex_keys), "short": (SPOTTER / "short.jsonl", _claude_keys),
         "tool_heavy": (SPOTTER / "tool_heavy.jsonl", _claude_keys), "current": (CURRENT, _claude_keys)}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.slow
def test_mutating_one_line_never_loses_the_other_lines_calls(case):
    source, keys_of = CASES[case]
    lines = source.read_bytes().splitlines(keepends=True)
    clean_report, clean_calls = _import(source.name, lines)
    assert (clean_report.failed, clean_report.skipped) == ([], [])
    assert keys_of(lines) <= clean_calls

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(mutants(lines))
    def check(mutant):
        index, new = mutant
        changed = [*lines[:index], new, *lines[index + 1:]]
        report, calls = _import(source.name, changed)
        assert report.failed == [], report.failed
        others = keys_of([raw for i, raw in enumerate(lines) if i != index])
        assert others <= calls, (index, new[:200])

    check()


@pytest.mark.slow
def test_mutating_one_line_of_an_agent_sdk_dump_never_fails_the_file():
    """The SDK importer's ids come from the dump's bytes, so a changed line changes them all: what must hold is that
    the file is imported (bad messages reported, never a traceback or a failed file)."""
    source = Path(__file__).resolve().parent / "fixtures" / "claude_agent" / "two-exchanges-cumulative.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(mutants(lines))
    def check(mutant):
        index, new = mutant
        report, calls = _import(source.name, [*lines[:index], new, *lines[index + 1:]])
        assert report.failed == [], report.failed

    check()


def test_an_importer_that_fails_on_a_line_costs_that_line_alone(tmp_path):
    """The per-record boundary of the import loop (io/import_file.py): an importer's own error on the line it was
    given passes over that line, named with the error, and the file's other lines are imported, once each, whether
    the importer checkpoints at every line or only at the end."""
    from reasonlog.model import OutcomeRecorded, SessionStarted

    class Plugin:
        name, description, incremental = "plugin", "test format", True

        def __init__(self, every_line: bool):
            self.every_line = every_line

        def detect(self, path):
            return True

        def sources(self, path):
            yield path

        def read(self, feed):
            last = None
            for line in feed.lines():
                last = line
                if line.number == 1:
                    yield SessionStarted(session_id="s1", started_at="2026-01-01T00:00:00Z")
                else:
                    kind = {"ok": "fine"}[line.value["kind"]]  # a KeyError on anything else: an importer's bug
                    yield OutcomeRecorded(outcome_id=f"o{line.number}", session_id="s1", at="2026-01-01T00:00:01Z",
                                          outcome_kind=kind, payload={})
                if self.every_line:
                    yield feed.checkpoint(line, None)
            yield feed.checkpoint(last, None)

    source = tmp_path / "x.jsonl"
    source.write_text('{}\n{"kind": "ok"}\n{"kind": "odd"}\n{"kind": "ok"}\n{"kind": "odd"}\n{"kind": "ok"}\n')
    for every_line in (True, False):
        store = open_store(tmp_path / f"t{every_line}.db")
        report = run_import(store, [(source, Plugin(every_line))])
        assert report.failed == []
        assert report.skipped == [(f"{source}:3", "not imported: the plugin importer failed on it (KeyError: 'odd')"),
                                  (f"{source}:5", "not imported: the plugin importer failed on it (KeyError: 'odd')")]
        assert (report.added["sessions"], report.added["outcomes"], report.rejected) == (1, 3, 0)
        again = run_import(store, [(source, Plugin(every_line))])
        assert (again.unchanged, again.skipped, sum(again.added.values())) == (1, [], 0)
