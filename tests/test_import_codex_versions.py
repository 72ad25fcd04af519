"""Codex CLI rollouts of other versions and tools (hand-written, see tests/fixtures/codex/README.md): no session_meta
line, the first versions' bare lines, a model named in token_count.info, a billed token_count with no response item,
cache writes in the token counts; and a rollout imported in two parts equals one imported whole."""
from __future__ import annotations

import pytest

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

VERSIONS = __import__("pathlib").Path(__file__).resolve().parent / "fixtures" / "codex" / "versions"
NO_META = "019a4000-cccc-7ddd-8eee-00000000c0de"
CURRENT = "019f1111-2222-7333-8444-0000000c0a7e"
LEGACY = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
ALL = SessionFilter(limit=None)


def _file(sid: str):
    (path,) = VERSIONS.glob(f"rollout-*-{sid}.jsonl")
    return path


def _calls(store, sid):
    return [(c["model"], c["input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["output_tokens"],
             c["reasoning_tokens"]) for c in store.get_session(sid)["calls"]]


def test_a_rollout_without_session_meta_is_the_session_its_file_names(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([_file(NO_META)]))
    assert (report.failed, report.skipped, report.added["calls"]) == ([], [], 2)
    session = store.get_session(NO_META)
    assert (session["started_at"], session["ended_at"]) == ("2025-11-02T10:00:00.120000Z",
                                                            "2025-11-02T10:00:07.200000Z")
    assert _calls(store, NO_META) == [("gpt-5-codex", 4100, 0, 0, 90, 40), ("gpt-5-codex", 300, 4000, 0, 20, 0)]
    assert [e["result"] for e in session["exchanges"]] == ["One test: tests/test_parse.py::test_empty."]
    (result,) = session["tool_results"]
    assert (result["name"], result["input"]) == ("shell", {"command": ["pytest", "--co", "-q"]})


def test_a_current_rollout_names_its_model_and_cache_writes_and_counts_a_call_without_items(tmp_path):
    store = open_store(tmp_path / "t.db")
    report = run_import(store, plan([_file(CURRENT)]))
    assert (report.failed, report.skipped, report.added["calls"]) == ([], [], 3)
    # input_tokens holds cached_input_tokens and cache_write_input_tokens; the first token_count came with no
    # response item (a billed call all the same); the later ones name gpt-5.1-codex-max in `info.model`
    assert _calls(store, CURRENT) == [("gpt-5-codex", 200, 0, 2800, 12, 12),
                                      ("gpt-5.1-codex-max", 2880, 9600, 400, 328, 29),
                                      ("gpt-5.1-codex-max", 220, 12900, 0, 60, 0)]
    session = store.get_session(CURRENT)
    assert (session["input_tokens"], session["cache_read_tokens"], session["cache_write_tokens"],
            session["output_tokens"]) == (3300, 22500, 3200, 400)  # the running total's 29000 input, split once
    first = session["calls"][0]
    assert store.get_call(first["id"])["response"] is None
    assert store.replay_call(first["id"])["instructions"] == "You are Codex, based on GPT-5."
    assert session["labels"]["cli_version"] == "0.156.1"


def test_the_first_versions_bare_lines_are_imported(tmp_path):
    store = open_store(tmp_path / "t.db")
    assert [imp.name for _, imp in plan([_file(LEGACY)])] == ["codex"]
    report = run_import(store, plan([_file(LEGACY)]))
    assert (report.failed, report.skipped, report.added["calls"]) == ([], [], 2)
    session = store.get_session(LEGACY)
    assert session["started_at"] == "2025-05-07T17:24:21.123000Z"
    first, second = session["calls"]
    assert [i["type"] for i in store.get_call(first["id"])["response"]["content"]] == ["function_call"]
    replayed = store.replay_call(second["id"])
    assert replayed["instructions"] == "Be terse."
    assert [i["type"] for i in replayed["input"]] == ["message", "function_call", "function_call_output"]
    assert store.get_call(second["id"])["response"]["content"][0]["content"][0]["text"] == "It prints `hi`."
    assert (session["tool_results"][0]["name"], session["tool_results"][0]["is_error"]) == ("shell", False)


@pytest.mark.parametrize("sid", [NO_META, CURRENT, LEGACY])
def test_any_split_then_append_equals_one_whole_import(tmp_path, sid):
    source = _file(sid)
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    lines = source.read_bytes().splitlines(keepends=True)
    for cut in range(1, len(lines)):
        target = tmp_path / f"c{cut}" / source.name
        target.parent.mkdir()
        target.write_bytes(b"".join(lines[:cut]))
        store = open_store(tmp_path / f"c{cut}.db")
        run_import(store, plan([target]))
        with open(target, "ab") as f:
            f.write(b"".join(lines[cut:]))
        run_import(store, plan([target]))
        assert _calls(store, sid) == _calls(whole, sid), cut
        assert [store.get_call(c["id"])["response"] for c in store.get_session(sid)["calls"]] == \
            [whole.get_call(c["id"])["response"] for c in whole.get_session(sid)["calls"]], cut


def _timeline(store, sid):
    return [(m["role"], m["content"]) for m in store.get_session(sid)["messages"]]


def test_a_rollout_imported_in_two_parts_shows_each_message_once(tmp_path):
    source = VERSIONS.parent / "sessions" / "2025" / "10" / "29" / \
        "rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl"
    sid = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
    whole = open_store(tmp_path / "whole.db")
    run_import(whole, plan([source]))
    lines = source.read_bytes().splitlines(keepends=True)
    target = tmp_path / "part" / source.name
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:9]))  # up to the first call's token_count
    store = open_store(tmp_path / "t.db")
    run_import(store, plan([target]))
    with open(target, "ab") as f:
        f.write(b"".join(lines[9:]))
    run_import(store, plan([target]))
    assert _timeline(store, sid) == _timeline(whole, sid)
