"""The real Claude Code and Codex CLIs run through `reasonlog run` against a provider on 127.0.0.1 answering
recorded payloads (issue 22): their exact requests recorded, their answers byte for byte, their output what the
payload said. Skipped where the CLIs are not installed; CI installs them from npm (.ci/run)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from proxy_upstream import ANSWERS, Upstream, responses_events
from proxying import ANTHROPIC_KEY, OPENAI_KEY, database_bytes
from sdk_server import load_json, sse

import reasonlog
from reasonlog.store import SessionFilter
from reasonlog.wire.codec import canonical

ROOT = Path(__file__).resolve().parents[1]
# Where .ci/run installs them (npm install --prefix ../npm-tools), then PATH.
NPM_BIN = Path(os.environ.get("REASONLOG_NPM_TOOLS", ROOT.parent / "npm-tools")) / "node_modules" / ".bin"
SEARCH = f"{NPM_BIN}{os.pathsep}{os.environ['PATH']}"


def cli(name: str) -> str:
    found = shutil.which(name, path=SEARCH)
    if found is None:
        pytest.skip(f"the {name} CLI is not installed (npm install --prefix ../npm-tools ...)")
    return found


def run_through_proxy(tmp_path, db, upstream: str, *command: str, **env: str) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "PATH": SEARCH,
                 "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 **env}
    cmd = [sys.executable, "-m", "reasonlog", "--db", str(db), "run", "--upstream", upstream, "--", *command]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=child_env, cwd=tmp_path)


def recorded(db) -> tuple[dict, list[dict]]:
    store = reasonlog.open_store(db, read_only=True)
    (session,) = store.list_sessions(SessionFilter())
    return session, [store.get_call(c["id"]) for c in store.get_session(session["id"])["calls"]]


def test_claude_code_through_reasonlog_run(tmp_path):
    claude = cli("claude")
    db = tmp_path / "r.db"
    with Upstream() as up:
        done = run_through_proxy(tmp_path, db, up.url, claude, "-p", "Say hello", ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello! I'm doing well, thank you for asking. How are you doing today? Is there" \
                                  " anything I can help you with?"
    session, calls = recorded(db)
    sent = [r for r in up.received if r.path.startswith("/v1/messages")]
    assert len(calls) == len(sent) >= 1
    for call, received in zip(calls, sent, strict=True):
        assert canonical(call["request"]) == canonical(orjson.loads(received.body))
        assert call["raw"].encode() == ANSWERS["anthropic"][1]
        assert (call["input_tokens"], call["output_tokens"]) == (12, 30)
    user_id = orjson.loads(sent[0].body)["metadata"]["user_id"]
    said = json.loads(user_id)["session_id"] if user_id.startswith("{") else user_id.rpartition("_session_")[2]
    assert session["external_id"] == said  # grouped by Claude Code's own session id
    assert session["agent"] == "claude"
    assert ANTHROPIC_KEY.encode() not in database_bytes(db)


@pytest.mark.slow
def test_codex_through_reasonlog_run(tmp_path):
    codex = cli("codex")
    db = tmp_path / "r.db"
    body = load_json("openai-responses", "openai-reasoning-encrypted-content.1.json")
    with Upstream() as up:
        streamed = sse(responses_events(body), named=True)
        up.answers["responses"] = (json.dumps(body).encode(), streamed)
        done = run_through_proxy(tmp_path, db, up.url, codex, "exec", "--skip-git-repo-check", "Compute it",
                                 OPENAI_API_KEY=OPENAI_KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("Final result: 570")
    session, calls = recorded(db)
    sent = [r for r in up.received if r.method == "POST" and r.path == "/v1/responses"]
    assert len(calls) == len(sent) == 1
    assert canonical(calls[0]["request"]) == canonical(orjson.loads(sent[0].body))
    assert calls[0]["raw"].encode() == streamed
    assert (calls[0]["input_tokens"], calls[0]["output_tokens"], calls[0]["reasoning_tokens"]) == (865, 163, 128)
    assert session["agent"] == "codex"
    assert OPENAI_KEY.encode() not in database_bytes(db)
