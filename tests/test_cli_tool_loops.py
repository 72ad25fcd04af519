"""Each real agent CLI runs a tool loop through `reasonlog run` and its conversation is shown once and readable
(issue 31, items 1 and 2).

Claude Code, Codex, Gemini CLI, OpenCode, Qwen Code and Cline 3 (from npm, installed by .ci/run) each run against
`cli_upstream.CliUpstream`, which answers in the CLI's protocol: a shell call (`cat hello.txt`), then two (`echo
two`, and `cat missing.txt`, which fails; one after the other where the CLI asks for no parallel calls), then the
answer. For every call: the request recorded is the request received, and the timeline entries its window points
at read as the messages it sent. For the loop: the timeline holds the last request's messages and its reply, each
once, in `/v1/sessions/{id}` and the JSONL export; `show --json`, `show` and the dashboard show each tool call
once, as a tool call with its result paired, the failing one included, whatever the protocol calls them (Codex's
`custom_tool_call`), and no message without a role or as opaque JSON. Skipped where a CLI is not installed.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from cli_upstream import FINAL, STEPS, CliUpstream
from click.testing import CliRunner
from fastapi.testclient import TestClient
from test_proxy_clis import SEARCH, cli

import reasonlog
from reasonlog.cli.main import cli as reasonlog_cli
from reasonlog.conversation import key_of, reader_form, reply_units, reply_variants
from reasonlog.providers import messages_of
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter
from reasonlog.wire.codec import canonical

PROMPT = "Read hello.txt and missing.txt with the shell, then tell me what they say"
COMMANDS = [c for step in STEPS for c in step]
GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                   "general": {"disableAutoUpdate": True}, "privacy": {"usageStatisticsEnabled": False}}
OPENCODE_CONFIG = {"$schema": "https://opencode.ai/config.json",
                   "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
                                          "options": {"baseURL": "{env:OPENAI_BASE_URL}",
                                                      "apiKey": "{env:OPENAI_API_KEY}"},
                                          "models": {"gpt-4.1": {"name": "gpt-4.1", "tool_call": True}}}},
                   "model": "local/gpt-4.1", "small_model": "local/gpt-4.1",
                   "permission": {"bash": "allow"}, "autoupdate": False, "share": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _setup(name: str, work: Path, home: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """The command line that runs CLI `name` non-interactively with its shell tool allowed, and its variables."""
    if name == "cline":  # its base URL is in its own settings only: the proxy's port is chosen before
        auth = [cli(name), "auth", "-p", "openai", "-k", "sk-test", "-m", "gpt-4.1", "-b",
                f"http://127.0.0.1:{port}/v1"]
        subprocess.run(auth, check=True, capture_output=True, timeout=60, env={**os.environ, "HOME": str(home)})
        return [cli(name), PROMPT], {}
    if name == "claude":
        return [cli(name), "-p", PROMPT, "--allowedTools", "Bash"], {"ANTHROPIC_API_KEY": "sk-ant-test"}
    if name == "codex":
        return ([cli(name), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT],
                {"OPENAI_API_KEY": "sk-test"})
    if name == "gemini":
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
        return [cli(name), "-p", PROMPT, "--yolo"], {"GEMINI_API_KEY": "gm-test"}
    if name == "opencode":
        config = work.parent / "opencode.json"
        config.write_text(json.dumps(OPENCODE_CONFIG))
        return [cli(name), "run", PROMPT], {"OPENAI_API_KEY": "sk-test", "OPENCODE_CONFIG": str(config),
                                            "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    return ([cli(name), "-p", PROMPT, "--yolo", "--auth-type", "openai"],
            {"OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "gpt-4.1"})


def run_loop(tmp_path: Path, name: str) -> tuple[CliUpstream, Path, subprocess.CompletedProcess]:
    work, home, db = tmp_path / "work", tmp_path / "home", tmp_path / "r.db"
    work.mkdir()
    (home / ".codex").mkdir(parents=True)
    (work / "hello.txt").write_text("hello\n")
    port = _free_port()
    argv, env = _setup(name, work, home, port)
    keep = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    child_env = {**keep, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "PATH": SEARCH, "PWD": str(work),
                 "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 **env}
    with CliUpstream() as up:
        cmd = [sys.executable, "-m", "reasonlog", "--db", str(db), "run", "--port", str(port), "--upstream", up.url,
               "--", *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=child_env, cwd=work)
    stop_daemons(work)
    return up, db, done


def stop_daemons(work: Path) -> None:
    """End what a CLI left running for this folder after it exited (Cline 3's hub daemon): a test's processes stop
    with it."""
    import signal

    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--cline-hub-daemon" in argv and str(work).encode() in argv:
            try:
                os.kill(int(entry.name), signal.SIGTERM)
            except ProcessLookupError:
                pass


def _units(messages: list) -> list:
    """The messages, a Responses reply counted item by item (as a client sends it back)."""
    return [u for m in messages for u in (reply_units(m) if isinstance(m, dict) and m.get("role") == "assistant"
                                          else [m])]


def _reads_as(shown: list, sent: list) -> bool:
    """Does each message shown read as the message sent at its place, one for one (a reply may have been sent back
    without its thinking, as Gemini CLI does)?"""
    def same(entry, message) -> bool:
        form = reader_form(entry)
        return key_of(reader_form(message)) in {key_of(form), *map(key_of, reply_variants(form))}
    shown, sent = _units(shown), _units(sent)
    return len(shown) == len(sent) and all(map(same, shown, sent))


def _loop(store) -> tuple[dict, list[dict]]:
    """The session whose last call answered with the final text, and its calls."""
    for session in store.list_sessions(SessionFilter()):
        calls = [store.get_call(c["id"]) for c in store.get_session(session["id"])["calls"]]
        if calls and FINAL in json.dumps(calls[-1]["response"]):
            return session, calls
    raise AssertionError("no session ends with the final answer")


def _command(part: dict) -> str:
    """The shell command a tool call ran, whatever its input looks like (Codex's is JavaScript)."""
    found = [c for c in COMMANDS if c in json.dumps(part["input"])]
    assert len(found) == 1, part
    return found[0]


@pytest.mark.parametrize("name", ["claude", *(pytest.param(name, marks=pytest.mark.slow)
                                              for name in ("codex", "gemini", "opencode", "qwen", "cline"))])
def test_a_real_cli_tool_loop_is_shown_once_and_readable(tmp_path, name):
    up, db, done = run_loop(tmp_path, name)
    assert done.returncode == 0, done.stderr[-3000:]
    assert FINAL in done.stdout
    store = reasonlog.open_store(db, read_only=True)
    every = [store.get_call(c["id"]) for s in store.list_sessions(SessionFilter())
             for c in store.get_session(s["id"])["calls"]]
    assert sorted(canonical(c["request"]) for c in every) == sorted(canonical(orjson.loads(r.body)) for r in up.calls)

    for s in store.list_sessions(SessionFilter()):  # the timeline rebuilds each request's messages
        entries = {m["idx"]: m["content"] for m in store.get_session(s["id"])["messages"]}
        for call in (store.get_call(c["id"]) for c in store.get_session(s["id"])["calls"]):
            rebuilt = [entries[x] if isinstance(x, int) else reply_units(entries[x[0]])[x[1]]
                       for x in call["window_slots"]]
            assert _reads_as(rebuilt, messages_of(call["request"])), call["idx"]

    session, calls = _loop(store)
    last = calls[-1]
    expected = [*messages_of(last["request"]), last["response"]]
    loop_ids = {c["id"] for c in calls}
    api = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True)))
    page = api.get(f"/v1/sessions/{session['id']}", params={"limit": 5000}).json()
    shown = [m["content"] for m in sorted(page["messages"], key=lambda m: m["idx"]) if m["call_id"] in loop_ids]
    assert _reads_as(shown, expected)  # each message of the last request, and its reply, once
    assert None not in {m["role"] for m in page["messages"]}

    export = CliRunner().invoke(reasonlog_cli, ["--db", str(db), "export", session["id"]], catch_exceptions=False)
    records = [json.loads(line) for line in export.output.splitlines()]
    contents = {r["hash"]: r["value"] for r in records if r["type"] == "content"}
    prompts = {p["idx"] for p in page["system_prompts"]}  # the export lists system prompts among the messages
    exported = [contents[r["content"]] for r in sorted((r for r in records if r["type"] == "message"),
                                                       key=lambda r: r["idx"])
                if r["call_id"] in loop_ids and r["idx"] not in prompts]
    assert _reads_as(exported, expected)

    as_json = CliRunner().invoke(reasonlog_cli, ["--db", str(db), "show", session["id"], "--json"],
                                 catch_exceptions=False)
    items = [i for i in json.loads(as_json.output)["timeline"] if i["kind"] == "message"]
    parts = [p for i in items for p in i["parts"]]
    tool_calls = [p for p in parts if p["kind"] == "tool_use"]
    assert [_command(p) for p in tool_calls] == COMMANDS  # each once, in order
    results = [p["result"] for p in tool_calls]
    assert all(r is not None for r in results)  # paired with its result
    assert "two" in results[1]["content"] and "No such file" in results[2]["content"]
    assert [p["kind"] for p in parts if p["kind"] in ("opaque", "tool_result")] == []
    assert sum(p.get("text", "").count(FINAL) for p in parts) == 1

    page = api.get(f"/sessions/{session['id']}").text  # the dashboard
    assert page.count('<span class="tool-name">') == len(COMMANDS)
    assert "no result recorded" not in page and "[opaque]" not in page
    assert page.count(FINAL) == 1

    text = CliRunner().invoke(reasonlog_cli, ["--db", str(db), "show", session["id"], "--full"],
                              env={"COLUMNS": "400"}, catch_exceptions=False).output
    assert len(re.findall(r"^→ ", text, re.M)) == len(COMMANDS)
    assert "[opaque]" not in text and not re.search(r"^\[\d+\] None$", text, re.M)
    assert text.count(FINAL) == 1
    if name == "codex":  # its `exec` tool's JavaScript as written, not as a JSON string
        assert '→ exec const r = await tools.exec_command({cmd: "cat hello.txt"});\ntext(r.output);  (call_' in text
