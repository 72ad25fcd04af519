"""Claude Code transcripts: the spotter samples' daily totals, calls once per response, subagents, compaction,
incremental and idempotent imports, malformed lines, and the `reasonlog import` command."""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from reasonlog.io.importing import plan, run_import
from reasonlog.store import SessionFilter, open_store

CC = FIXTURES / "claude-code-transcripts"
SPOTTER = CC / "spotter"
MAIN = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
ALL = SessionFilter(limit=None)

# SOURCES.md: UTC days -> entries, input, output, cache_create, cache_read, cost (ccusage 20.0.24 agrees)
EXPECTED_DAYS = {
    "2026-02-10": (22, 1657, 1818, 71658, 622375, 0.9288493),
    "2026-02-12": (221, 2653, 49482, 377624, 16600744, 6.1725718),
}


def imported(db: Path, *paths: Path):
    store = open_store(db)
    return store, run_import(store, plan(list(paths)))


def days(store) -> dict[str, tuple]:
    out: dict[str, list] = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0.0])
    for c in store.call_rows(ALL):
        d = out[c["started_at"][:10]]
        d[0] += 1
        for i, k in enumerate(("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"), 1):
            d[i] += c[k] or 0
        d[5] += c["cost_usd"] or 0.0
    return {day: (*v[:5], round(v[5], 7)) for day, v in out.items()}


def test_spotter_daily_totals_equal_the_table_in_sources(tmp_path):
    store, report = imported(tmp_path / "t.db", SPOTTER)
    assert days(store) == EXPECTED_DAYS
    # outcomes: the compaction, and 7 system lines (3 stop_hook_summary, 4 local_command)
    assert report.added == {"sessions": 7, "calls": 243, "messages": 503, "tool_results": 0, "outcomes": 8}
    assert (report.files, report.failed, report.skipped) == (6, [], [])


def test_stats_by_day_json_agrees(tmp_path):
    db = tmp_path / "t.db"
    imported(db, SPOTTER)[0].close()
    out = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "stats", "--by", "day", "--json"],
                         capture_output=True, text=True, check=True)
    rows = {r["day"]: r for r in json.loads(out.stdout)}
    for day, (calls, inp, outp, write, read, cost) in EXPECTED_DAYS.items():
        r = rows[day]
        assert (r["calls"], r["input_tokens"], r["output_tokens"], r["cache_write_tokens"],
                r["cache_read_tokens"]) == (calls, inp, outp, write, read)
        assert round(r["cost_usd"], 7) == cost


def test_one_call_per_response_with_its_whole_content(tmp_path):
    store, _ = imported(tmp_path / "t.db", SPOTTER / f"{MAIN}.jsonl")
    session = store.get_session(MAIN)
    assert len(session["calls"]) == 217  # 408 assistant lines, 217 distinct (message.id, requestId)
    # msg_01Cwyj7R...: a text block and six tool_use blocks, written as seven lines with tool results between
    (call,) = [c for c in session["calls"] if c["provider_message_id"] == "msg_01Cwyj7RLJaazm8DnifKx5Pw"]
    assert call["output_tokens"] == 395  # the final line's usage, not the first line's 1
    detail = store.get_call(call["id"])
    assert [b["type"] for b in detail["response"]["content"]] == ["text"] + ["tool_use"] * 6
    # The next call was sent all six results in one user message, after the whole response.
    nxt = store.replay_call(session["calls"][call["idx"] + 1]["id"])
    assert nxt["messages"][-2] == detail["response"]
    assert [b["type"] for b in nxt["messages"][-1]["content"]] == ["tool_result"] * 6


def test_replayed_window_is_the_conversation_before_the_call(tmp_path):
    store, _ = imported(tmp_path / "t.db", SPOTTER / "short.jsonl")
    (session,) = store.list_sessions(ALL)
    assert session["id"] == "55604662-cf2a-4331-851a-ec234028f8ca"
    (call,) = store.get_session(session["id"])["calls"]
    request = store.replay_call(call["id"])
    assert request == {"model": "claude-opus-4-6",
                       "messages": [{"role": "user", "content": "mix phx.server doesnt seem to start"}]}
    blocks = store.get_call(call["id"])["response"]["content"]
    assert [b["type"] for b in blocks] == ["text", "thinking", "text", "tool_use", "tool_use"]


def test_subagents_are_child_sessions_linked_to_the_task_call(tmp_path):
    store, _ = imported(tmp_path / "t.db", SPOTTER)
    sessions = {s["id"]: s for s in store.list_sessions(ALL)}
    child = store.get_session("afb92ff@491e126e-1e71-469c-ade2-fcc8af567c74")  # only in progress lines
    assert child["parent_session_id"] == "491e126e-1e71-469c-ade2-fcc8af567c74"
    assert child["agent"] == "Plan"
    assert [c["model"] for c in child["calls"]] == ["claude-haiku-4-5-20251001"] * 5
    parent_call = store.get_call(child["parent_call_id"])
    assert any(b.get("type") == "tool_use" and b.get("name") == "Task" for b in parent_call["response"]["content"])
    # The newer layout: subagents/agent-aac57f5.jsonl, whose calls also appear in the parent's progress lines.
    newer = store.get_session(f"aac57f5@{MAIN}")
    assert len(newer["calls"]) == 3
    assert sessions[f"aac57f5@{MAIN}"]["parent_session_id"] == MAIN


def test_compaction_is_an_outcome_and_the_window_starts_again(tmp_path):
    store, _ = imported(tmp_path / "t.db", SPOTTER / f"{MAIN}.jsonl")
    session = store.get_session(MAIN)
    (outcome,) = [o for o in session["outcomes"] if o["kind"] == "compaction"]
    assert outcome["payload"] == {"trigger": "manual", "pre_tokens": 142431}
    after = [c for c in session["calls"] if c["started_at"] > outcome["at"]]
    first = store.replay_call(after[0]["id"])
    assert first["messages"][0]["content"].startswith("This session is being continued from a previous conversation")


def test_importing_again_adds_nothing(tmp_path):
    db = tmp_path / "t.db"
    store, first = imported(db, SPOTTER)
    second = run_import(store, plan([SPOTTER]))
    assert (second.unchanged, second.added) == (6, dict.fromkeys(first.added, 0))
    # Copies of the same files elsewhere (rewritten paths, same calls): no call is counted twice.
    copy = tmp_path / "copy"
    shutil.copytree(SPOTTER, copy)
    third = run_import(store, plan([copy]))
    assert third.added["calls"] == 0
    assert days(store) == EXPECTED_DAYS


def _split_copy(tmp_path: Path, name: str, at: int) -> tuple[Path, bytes]:
    data = (SPOTTER / name).read_bytes()
    lines = data.splitlines(keepends=True)
    target = tmp_path / "proj" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(lines[:at]))
    return target, b"".join(lines[at:])


def _calls(store, sid):
    return [(c["provider_message_id"], c["output_tokens"], c["cache_read_tokens"])
            for c in store.get_session(sid)["calls"]]


def test_a_grown_transcript_adds_only_what_is_new_and_equals_a_whole_import(tmp_path):
    target, rest = _split_copy(tmp_path, f"{MAIN}.jsonl", 1200)
    store = open_store(tmp_path / "grown.db")
    run_import(store, plan([target]))
    before = len(store.get_session(MAIN)["calls"])
    with open(target, "ab") as f:
        f.write(rest)
    again = run_import(store, plan([target]))
    assert (again.appended, again.rewritten) == (1, 0)
    assert again.added["calls"] == 217 - before
    whole, _ = imported(tmp_path / "whole.db", SPOTTER / f"{MAIN}.jsonl")
    assert _calls(store, MAIN) == _calls(whole, MAIN)
    ids = [c["id"] for c in store.get_session(MAIN)["calls"]]
    assert [store.replay_call(i) for i in ids] == [whole.replay_call(i) for i in ids]


def test_a_response_cut_mid_stream_is_imported_again_whole(db, tmp_path):
    # Cut between two lines of msg_01Cwyj7R... (its first line says output 1; its last says 395).
    lines = (SPOTTER / f"{MAIN}.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b"msg_01Cwyj7RLJaazm8DnifKx5Pw" in line) + 2
    target, rest = _split_copy(tmp_path, f"{MAIN}.jsonl", cut)
    store = open_store(db)
    run_import(store, plan([target]))
    with open(target, "ab") as f:
        f.write(rest)
    again = run_import(store, plan([target]))
    assert again.rewritten == 1
    whole, _ = imported(tmp_path / "whole.db", SPOTTER / f"{MAIN}.jsonl")
    assert _calls(store, MAIN) == _calls(whole, MAIN)


def test_a_rewritten_transcript_replaces_what_it_gave(db, tmp_path):
    target, _ = _split_copy(tmp_path, "tool_heavy.jsonl", 39)
    store = open_store(db)
    run_import(store, plan([target]))
    (sid,) = [s["id"] for s in store.list_sessions(ALL)]
    assert len(store.get_session(sid)["calls"]) == 4
    lines = target.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:20]))  # the same file, shorter: rewritten, not appended
    again = run_import(store, plan([target]))
    assert again.rewritten == 1
    assert len(store.get_session(sid)["calls"]) == 2
    assert store.status()["counts"]["calls"] == 2


def test_malformed_lines_are_reported_with_file_and_line_and_the_rest_imported(tmp_path):
    store, report = imported(tmp_path / "t.db", CC / "claude-code-log-synthetic" / "edge_cases.jsonl")
    where = [w.rsplit(":", 1)[1] for w, _ in report.skipped]
    assert where == ["10", "11", "13", "14", "15", "16"]
    assert dict(report.skipped)[f"{CC / 'claude-code-log-synthetic' / 'edge_cases.jsonl'}:13"] == \
        "not a JSON object (a str)"
    assert report.added["calls"] == 4
    bad = tmp_path / "bad.jsonl"
    good = (SPOTTER / "short.jsonl").read_bytes()
    bad.write_bytes(good.replace(b'"type":"assistant"', b'"type":"assistant",', 1) + b"\xff\xfe{not json\n"
                    + b'{"type":"user","message":{"role":"user","content":"cut')
    store2, report2 = imported(tmp_path / "t2.db", bad)
    reasons = [r for _, r in report2.skipped]
    assert reasons[0].startswith("not JSON") and reasons[1] == "not UTF-8 (byte 1)"
    assert len(reasons) == 2  # the cut last line is left for the next import, not reported
    assert report2.added["calls"] == 1


def test_summary_lines_and_unknown_types_are_kept(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_bytes((CC / "claude-code-log-synthetic" / "representative_messages.jsonl").read_bytes()
                  + b'\n{"type":"brand-new-record","sessionId":"test_session","timestamp":"2025-06-14T10:05:00Z",'
                    b'"payload":{"x":1}}\n')
    store, report = imported(tmp_path / "t.db", f)
    outcomes = store.get_session("test_session")["outcomes"]
    assert [o["kind"] for o in outcomes] == ["summary", "claude-code:brand-new-record"]
    assert outcomes[0]["payload"]["leaf_uuid"] == "msg_011"
    assert outcomes[1]["payload"]["payload"] == {"x": 1}


@pytest.mark.slow
def test_cli_import_reports_and_refuses_bad_paths(tmp_path):
    db = tmp_path / "t.db"
    run = lambda *a: subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), *a],  # noqa: E731
                                    capture_output=True, text=True)
    out = run("import", str(SPOTTER))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Imported 6 file(s): 7 sessions, 243 calls, 503 messages, 0 tool results, 8 outcomes added.\n"
    again = run("import", str(SPOTTER))
    assert "(6 unchanged): 0 sessions, 0 calls" in again.stdout
    missing = run("import", str(tmp_path / "nope"))
    assert (missing.returncode, missing.stderr.strip()) == (1, f"error: {tmp_path / 'nope'}: no such file or folder")
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    refused = run("import", str(unknown))  # no format claims it: the formats and --format are named
    assert refused.returncode == 1 and refused.stderr.startswith(f"error: {unknown}: no importer recognises it; ")
    folder = tmp_path / "empty-folder"
    folder.mkdir()
    nothing = run("import", str(folder))
    assert nothing.returncode == 1 and "no importer recognises it" in nothing.stderr and "--format" in nothing.stderr
    assert "Traceback" not in refused.stderr + missing.stderr
    wrong = run("import", "--format", "nope", str(SPOTTER))
    assert wrong.returncode == 1 and "--format nope: not a format reasonlog knows" in wrong.stderr
    listed = run("import", "--list-formats")
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == sorted(names)  # by name (the coding agents' formats, aider and amp, come first)
    assert any(line.startswith("claude-code ") for line in listed.stdout.splitlines())


def test_watch_once_imports_the_default_folder(tmp_path, monkeypatch):
    home = tmp_path / "cfg"
    project = home / "projects" / "-home-user-proj"
    project.mkdir(parents=True)
    shutil.copy(SPOTTER / "short.jsonl", project / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl")
    db = tmp_path / "t.db"
    env = {"CLAUDE_CONFIG_DIR": str(home), "HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "watch", "--once",
                          "--format", "claude-code"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "1 sessions, 1 calls" in out.stdout
    status = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "db", "status", "--json"],
                            capture_output=True, text=True, env=env)
    info = json.loads(status.stdout)
    assert info["watch"]["folders"] == [str(home / "projects")]
    (source,) = info["imports"]
    assert (source["format"], source["files"], source["skipped"]) == ("claude-code", 1, 0)


@pytest.mark.parametrize("system", ["linux"])
def test_watch_install_writes_a_user_unit(tmp_path, system):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(tmp_path / "t.db"), "watch", "--install",
                          str(tmp_path)], capture_output=True, text=True, env=env)
    unit = tmp_path / "xdg" / "systemd" / "user" / "reasonlog-watch.service"
    assert out.stdout.splitlines()[0] == f"wrote {unit}"
    text = unit.read_text()
    assert "watch" in text and f"--db {tmp_path / 't.db'}" in text and "WantedBy=default.target" in text


def test_follow_survives_deleted_and_rotated_files(db, tmp_path):
    from reasonlog.io.importing import follow

    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    short = folder / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    target, rest = _split_copy(tmp_path, "tool_heavy.jsonl", 20)
    shutil.copy(SPOTTER / "short.jsonl", short)
    heavy = folder / target.name
    shutil.move(target, heavy)
    store = open_store(db)
    passes: list = []

    def after_pass(report):
        passes.append(report)
        if len(passes) == 1:
            short.unlink()                                  # deleted: what it gave stays
            with open(heavy, "ab") as f:                    # appended
                f.write(rest)
        elif len(passes) == 2:
            heavy.rename(folder / "rotated.jsonl.1")        # rotated away, a new file in its place
            shutil.copy(SPOTTER / "subagent.jsonl", new)    # just written: its last responses may still grow
        elif len(passes) == 3:
            os.utime(new, (time.time() - 60, time.time() - 60))  # quiet for a minute: nothing is still streaming

    new = folder / "491e126e-1e71-469c-ade2-fcc8af567c74.jsonl"
    follow(store, [tmp_path / "projects"], "claude-code", 0.01, lambda: len(passes) >= 4, after_pass)
    assert [r.failed for r in passes] == [[], [], [], []]
    # The third pass leaves the responses that may still be streaming (the last one of each conversation) for
    # a pass once the file is quiet; together they are the file's 17 calls.
    assert [r.added["calls"] for r in passes] == [1 + 2, 2, 15, 2]
    assert {s["id"] for s in store.list_sessions(ALL)} == {
        "55604662-cf2a-4331-851a-ec234028f8ca", "d6e0bada-1959-4eec-a9d2-0bfade768d8f",
        "491e126e-1e71-469c-ade2-fcc8af567c74", "afb92ff@491e126e-1e71-469c-ade2-fcc8af567c74"}


def _cuts(name: str, step: int) -> list[int]:
    lines = (SPOTTER / name).read_bytes().splitlines()
    around = [i for i, line in enumerate(lines) if b'"compact_boundary"' in line]  # the window starts again there
    return sorted(set(range(1, len(lines), step)) | {i + d for i in around for d in (0, 1, 2, 3, 8)})


@pytest.mark.parametrize(("name", "step"), [("subagent.jsonl", 1), ("tool_heavy.jsonl", 1), (f"{MAIN}.jsonl", 397)])
@pytest.mark.slow
def test_any_split_then_append_equals_one_whole_import(tmp_path, name, step):
    """Importing a transcript in two parts, cut at any line (while it is still being written, as watch does,
    or not), gives the same calls, tokens and replays as importing it whole."""
    whole, _ = imported(tmp_path / "whole.db", SPOTTER / name)
    want = {c["id"]: (c["output_tokens"], c["cache_read_tokens"], json.dumps(whole.replay_call(c["id"])))
            for c in whole.call_rows(ALL)}
    lines = (SPOTTER / name).read_bytes().splitlines(keepends=True)
    empty = tmp_path / "empty.db"  # made once and copied: migrating a new file for each cut took most of the time
    open_store(empty).close()
    for cut in _cuts(name, step):
        for live in (False, True):
            folder = tmp_path / f"cut{cut}{live}"
            target = folder / "p" / name
            target.parent.mkdir(parents=True)
            target.write_bytes(b"".join(lines[:cut]))
            shutil.copy(empty, folder / "t.db")
            store = open_store(folder / "t.db")
            run_import(store, plan([target]), live=live)
            with open(target, "ab") as f:
                f.write(b"".join(lines[cut:]))
            os.utime(target, (time.time() - 60, time.time() - 60))
            run_import(store, plan([target]), live=live)
            got = {c["id"]: (c["output_tokens"], c["cache_read_tokens"], json.dumps(store.replay_call(c["id"])))
                   for c in store.call_rows(ALL)}
            assert got == want, (cut, live)
            store.close()


def test_a_transcript_whose_first_line_is_long_is_still_recognised(tmp_path):
    lines = (SPOTTER / "short.jsonl").read_bytes().splitlines(keepends=True)
    prompt = next(i for i, line in enumerate(lines) if b'"type":"user"' in line)
    long_prompt = lines[prompt].replace(b"mix phx.server doesnt seem to start", b"x" * 300_000)
    target = tmp_path / "p" / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    target.parent.mkdir()
    target.write_bytes(long_prompt + b"".join(lines[prompt + 1:]))
    assert [imp.name for _, imp in plan([tmp_path / "p"])] == ["claude-code"]
    store, report = imported(tmp_path / "t.db", tmp_path / "p")
    assert report.added["calls"] == 1
