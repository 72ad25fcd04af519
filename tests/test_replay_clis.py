"""Replay and fork a real agent CLI's recorded run (issue 32): Claude Code and Codex from npm, recorded through
`reasonlog run` against a provider on 127.0.0.1, then run again in a fresh HOME with `run --replay` and no upstream
(nothing may reach the network, and the CLI must print the recorded answer and exit 0), and forked with
`run --from SESSION#0 --model M` (the upstream gets exactly the calls from #0 on, asking for M).
A fresh HOME means a new device id and session id in Claude Code's `metadata.user_id`, and new thread ids in
Codex's requests: the replay matches up to them. Skipped where the CLIs are not installed (CI installs them)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import orjson
import pytest
from proxy_upstream import Upstream, responses_events
from proxying import ANTHROPIC_KEY, OPENAI_KEY
from sdk_server import load_json, sse
from test_proxy_clis import SEARCH, cli, recorded
from test_proxy_replay import dead_upstream

import reasonlog
from reasonlog.capture.replay_match import matching_form
from reasonlog.store import SessionFilter

HELLO = "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?"


def reasonlog_run(tmp_path, home: str, db, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`reasonlog --db DB run ARGS` with a fresh HOME (and CODEX_HOME): the folder `home` emptied first, so that
    nothing of an earlier run (Claude Code's device id, Codex's sessions) is left, at the same path (Claude Code
    writes its home folder into its system prompt)."""
    home_dir = tmp_path / "home"
    shutil.rmtree(home_dir, ignore_errors=True)
    (home_dir / ".codex").mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, "HOME": str(home_dir), "CODEX_HOME": str(home_dir / ".codex"), "PATH": SEARCH,
                 "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 **env}
    return subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "run", *args], capture_output=True,
                          text=True, timeout=180, env=child_env, cwd=tmp_path)


def model_calls(up: Upstream, path: str) -> list[dict]:
    return [orjson.loads(r.body) for r in up.received if r.method == "POST" and r.path.startswith(path)]


@pytest.mark.slow  # a second real Claude Code run; the quick run keeps its tool loop replayed offline
def test_claude_code_replays_in_a_fresh_home_with_no_upstream_and_forks_onto_another_model(tmp_path):
    claude = cli("claude")
    db = tmp_path / "r.db"
    with Upstream() as up:
        first = reasonlog_run(tmp_path, "home-a", db, "--upstream", up.url, "--", claude, "-p", "Say hello",
                              ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    assert first.returncode == 0, first.stderr
    session, calls = recorded(db)

    again = reasonlog_run(tmp_path, "home-b", db, "--upstream", dead_upstream(), "--replay", session["id"], "--",
                          claude, "-p", "Say hello", ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == first.stdout.strip() == HELLO
    assert f"{len(calls)} request(s) answered from the recording {session['id']}" in again.stderr
    assert "metadata.user_id (fresh each run)" in again.stderr  # what the match let pass is said

    with Upstream() as up:
        forked = reasonlog_run(tmp_path, "home-c", db, "--upstream", up.url, "--from", f"{session['id']}#0",
                               "--model", "claude-haiku-4-5", "--", claude, "-p", "Say hello",
                               ANTHROPIC_API_KEY=ANTHROPIC_KEY)
        sent = model_calls(up, "/v1/messages")
    assert forked.returncode == 0, forked.stderr
    assert len(sent) == len(calls) and {r["model"] for r in sent} == {"claude-haiku-4-5"}


@pytest.mark.slow  # a real CLI beyond the first (Claude Code's test above): about 20 s
def test_codex_replays_in_a_fresh_home_with_no_upstream_and_forks_onto_another_model(tmp_path):
    codex = cli("codex")
    db = tmp_path / "r.db"
    body = load_json("openai-responses", "openai-reasoning-encrypted-content.1.json")
    streamed = sse(responses_events(body), named=True)
    with Upstream() as up:
        up.answers["responses"] = (json.dumps(body).encode(), streamed)
        first = reasonlog_run(tmp_path, "home-a", db, "--upstream", up.url, "--", codex, "exec",
                              "--skip-git-repo-check", "Compute it", OPENAI_API_KEY=OPENAI_KEY)
    assert first.returncode == 0, first.stderr
    session, calls = recorded(db)

    again = reasonlog_run(tmp_path, "home-b", db, "--upstream", dead_upstream(), "--replay", session["id"], "--",
                          codex, "exec", "--skip-git-repo-check", "Compute it", OPENAI_API_KEY=OPENAI_KEY)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().endswith("Final result: 570")
    assert f"{len(calls)} request(s) answered from the recording {session['id']}" in again.stderr

    with Upstream() as up:
        up.answers["responses"] = (json.dumps(body).encode(), streamed)
        forked = reasonlog_run(tmp_path, "home-c", db, "--upstream", up.url, "--from", f"{session['id']}#0",
                               "--model", "gpt-5-mini", "--", codex, "exec", "--skip-git-repo-check", "Compute it",
                               OPENAI_API_KEY=OPENAI_KEY)
        sent = model_calls(up, "/v1/responses")
    assert forked.returncode == 0, forked.stderr
    assert len(sent) == len(calls) and {r["model"] for r in sent} == {"gpt-5-mini"}


# ------------------------------------------------------------------------------ a real tool loop, each CLI

LOOP_CLIS = ["claude", "codex", "gemini", "opencode", "qwen"]


def _rerun(tmp_path, name: str, db, *run_args: str) -> subprocess.CompletedProcess:
    """The CLI's tool loop run again through `reasonlog run RUN_ARGS`, in the same folder with a fresh HOME (emptied,
    at the same path) and its settings written anew."""
    from test_cli_tool_loops import _free_port, _setup

    work, home = tmp_path / "work", tmp_path / "home"
    shutil.rmtree(home, ignore_errors=True)
    (home / ".codex").mkdir(parents=True)
    argv, env = _setup(name, work, home, _free_port())
    keep = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    child_env = {**keep, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "PATH": SEARCH, "PWD": str(work),
                 "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 **env}
    return subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "run", *run_args, "--", *argv],
                          capture_output=True, text=True, timeout=180, env=child_env, cwd=work)


# Claude Code's loop in the quick run; the other CLIs' (about 20 s each) are `slow`.
@pytest.mark.parametrize("name", [LOOP_CLIS[0], *(pytest.param(n, marks=pytest.mark.slow) for n in LOOP_CLIS[1:])])
def test_a_real_cli_tool_loop_replays_offline_and_forks_at_call_1(tmp_path, name):
    """Record the CLI's tool loop (three shell calls, one failing, then the answer); replay it with no upstream in a
    fresh HOME: nothing reaches the network, the CLI prints the recorded answer and exits 0; fork it at #1 onto
    another model: the upstream receives exactly the loop's calls from #1 on, each asking for that model."""
    from cli_upstream import FINAL, CliUpstream
    from test_cli_tool_loops import _loop, run_loop

    up, db, done = run_loop(tmp_path, name)
    assert done.returncode == 0, done.stderr[-3000:]
    store = reasonlog.open_store(db, read_only=True)
    session, calls = _loop(store)
    store.close()

    # Replayed by the run's name (`reasonlog run` names it "<cli> in <folder>"): its newest loop session.
    again = _rerun(tmp_path, name, db, "--replay", session["run"], "--upstream", dead_upstream())
    assert again.returncode == 0, (again.stdout[-2000:], again.stderr[:6000])
    assert FINAL in again.stdout
    assert "request(s) answered from the recording" in again.stderr

    with CliUpstream() as fork_up:
        forked = _rerun(tmp_path, name, db, "--from", f"{session['id']}#1", "--model", "other-model",
                        "--upstream", fork_up.url)
        received = [(r.path, orjson.loads(r.body)) for r in fork_up.calls]
    assert forked.returncode == 0, (forked.stdout[-2000:], forked.stderr[-3000:])
    assert "request(s) forwarded from the fork on" in forked.stderr
    protocol = _protocol(received[0][0])
    loop = [request for _, request in received if _is_loop_call(request)]
    # Call #0 came from the recording: the first loop call the upstream saw is #1, as recorded but for the model;
    # what the CLI does with the other model's answers after it is its own.
    assert matching_form({**loop[0], "model": None}, protocol) == \
        matching_form({**calls[1]["request"], "model": None}, protocol)
    assert not any(matching_form(r, protocol) == matching_form(calls[0]["request"], protocol) for r in loop)
    assert all("other-model" in (request.get("model") or path) for path, request in received)

    from fastapi.testclient import TestClient

    from reasonlog.server.app import create_app

    store = reasonlog.open_store(db, read_only=True)
    forks = [s for s in store.list_sessions(SessionFilter(limit=None)) if (s["labels"] or {}).get("fork_of")]
    fork = next(s for s in forks if s["parent_session_id"] == session["id"] and not (s["labels"] or {}).get("role"))
    assert (fork["parent_call_id"], fork["labels"]["fork_at"]) == (calls[1]["id"], "1")
    page = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True))).get(
        f"/compare?a={session['id']}&b={fork['id']}&start=1").text
    assert "B begins at A&#39;s call #1" in page or "B begins at A's call #1" in page  # side by side from #1


def _is_loop_call(request: dict) -> bool:
    """A call of the agent's loop (it offers the shell tool), not one beside it (a title, a router)."""
    text = json.dumps(request.get("tools") or request.get("input") or [])
    return any(word in text for word in ("command", "exec", "run_shell_command", "Bash"))


def _protocol(path: str) -> str:
    return ("anthropic" if "/messages" in path else "openai_responses" if "/responses" in path
            else "gemini" if "Content" in path else "openai_chat")
