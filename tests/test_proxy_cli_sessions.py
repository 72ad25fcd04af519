"""One agent run through `reasonlog run` is one session (issue 31, item 3): the real CLIs' tool loops stay one
session whatever moves between their calls (`cache_control` on the last message), the calls they make beside the
loop (OpenCode's title) are a side session of the run linked to it, and sessions carry the agent's own id."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import orjson
import pytest
from agent_upstream import Handler
from fastapi.testclient import TestClient
from local_http import LocalHTTPServer
from proxy_upstream import Reply, Upstream, anthropic_events, responses_events
from sdk_server import load_json, sse
from serving import free_port
from test_proxy_clis import SEARCH, cli, run_through_proxy

import reasonlog
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter

ALL = SessionFilter(limit=None)
PROMPT = "Please run the shell command: echo hello"
TOOL_USAGE = {"input_tokens": 2210, "output_tokens": 57, "cache_read_input_tokens": 9000,
              "cache_creation_input_tokens": 1200}
TEXT_USAGE = {"input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def anthropic_reply(request: dict, n: int) -> dict:
    """The `n`-th reply: a tool_use of the agent's `bash` tool (Claude Code's `Bash`) when the last user message
    asks to run a command, else text."""
    users = [m for m in request.get("messages") or [] if m.get("role") == "user"]  # Claude Code ends on a system
    asks = bool(users) and "run the shell command" in json.dumps(users[-1].get("content")).lower()
    bash = next((t["name"] for t in request.get("tools") or [] if t.get("name") in ("bash", "Bash")), None)
    content = [{"type": "tool_use", "id": f"toolu_{n:02d}", "name": bash,
                "input": {"command": "echo hello", "description": "Print hello"}}] if asks and bash else \
        [{"type": "text", "text": "It printed hello."}]
    return {"id": f"msg_{n:02d}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None, "usage": TOOL_USAGE if content[0]["type"] == "tool_use" else TEXT_USAGE}


class ToolUpstream(Upstream):
    """The proxy tests' upstream, answering Anthropic Messages with a tool loop (`anthropic_reply`), streamed."""

    def default_reply(self, path: str, body: bytes) -> Reply:
        if not path.split("?")[0].endswith("/messages"):
            return super().default_reply(path, body)
        n = sum(r.path.split("?")[0].endswith("/messages") for r in self.received)
        events = anthropic_events(anthropic_reply(orjson.loads(body), n))
        return Reply(200, [sse(events, named=True)], "text/event-stream")


def opencode_home(tmp_path, provider: dict, model: str) -> dict[str, str]:
    """A home of its own for OpenCode, its configuration naming `provider` and `model`."""
    home = tmp_path / "home"
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text(json.dumps({"$schema": "https://opencode.ai/config.json",
                                                      "provider": provider, "model": model}))
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state")}


def run_opencode(tmp_path, db, upstream: str, port: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    opencode = cli("opencode")
    work = tmp_path / "work"
    work.mkdir()
    cmd = [sys.executable, "-m", "reasonlog", "--db", str(db), "run", "--port", str(port), "--upstream", upstream,
           "--", opencode, "run", PROMPT]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=work,
                          env={**os.environ, "PATH": SEARCH, "ANTHROPIC_API_KEY": "sk-ant-fake", **env})


def sessions_of(db) -> tuple[list[dict], dict[str, list[dict]]]:
    store = reasonlog.open_store(db, read_only=True)
    sessions = store.list_sessions(ALL)
    calls = {s["id"]: store.get_session(s["id"])["calls"] for s in sessions}
    store.close()
    return sessions, calls


def loop_and_side(sessions: list[dict]) -> tuple[dict, dict]:
    (side,) = [s for s in sessions if (s.get("labels") or {}).get("role")]
    (loop,) = [s for s in sessions if s is not side]
    return loop, side


def test_an_opencode_loop_over_anthropic_is_one_session_with_its_title_call_beside_it(tmp_path):
    port = free_port()
    with ToolUpstream() as up:
        env = opencode_home(tmp_path, {"anthropic": {"options": {"baseURL": f"http://127.0.0.1:{port}/v1",
                                                                 "apiKey": "sk-ant-fake"}}},
                            "anthropic/claude-sonnet-4-5")
        done = run_opencode(tmp_path, tmp_path / "r.db", up.url, port, env)
    assert done.returncode == 0, done.stderr
    sent = [orjson.loads(r.body) for r in up.received if r.path.startswith("/v1/messages")]
    loops = [body for body in sent if body.get("tools")]
    assert len(sent) == 3 and len(loops) == 2  # the title call, then the loop: tool call, answer
    # What broke continuity: the AI SDK marks the last message for caching, so call #1's first message differs.
    assert loops[0]["messages"][0] != loops[1]["messages"][0]
    sessions, calls = sessions_of(tmp_path / "r.db")
    assert len(sessions) == 2
    loop, side = loop_and_side(sessions)
    assert [c["output_tokens"] for c in calls[loop["id"]]] == [57, 30]
    assert len(calls[side["id"]]) == 1
    assert side["labels"]["role"] == "title"
    assert side["parent_session_id"] == loop["id"] and side["run"] == loop["run"]
    said = {r.headers.get("x-session-id") for r in up.received if r.path.startswith("/v1/messages")}
    assert loop["external_id"] in said and len(said) == 1  # OpenCode's own session id
    site = TestClient(create_app(lambda: reasonlog.open_store(tmp_path / "r.db", read_only=True)))
    page = site.get(f"/sessions/{loop['id']}").text
    assert f'beside the loop:\n<a href="/sessions/{side["id"]}">title calls</a> · 1 calls · $0.0005' in page
    assert f'title calls beside <a href="/sessions/{loop["id"]}">the run\'s loop</a>' in \
        site.get(f"/sessions/{side['id']}").text


@pytest.fixture
def chat_upstream():
    server = LocalHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.stop()


@pytest.mark.slow
def test_an_opencode_loop_over_openai_chat_carries_its_session_id(tmp_path, chat_upstream):
    port = free_port()
    provider = {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
                          "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "sk-fake"},
                          "models": {"gpt-4.1-nano": {"name": "gpt-4.1-nano"}}}}
    done = run_opencode(tmp_path, tmp_path / "r.db", chat_upstream, port,
                        opencode_home(tmp_path, provider, "local/gpt-4.1-nano"))
    assert done.returncode == 0, done.stderr
    sessions, calls = sessions_of(tmp_path / "r.db")
    loop, side = loop_and_side(sessions)
    assert [c["output_tokens"] for c in calls[loop["id"]]] == [83, 300]
    assert [c["output_tokens"] for c in calls[side["id"]]] == [300]
    assert loop["external_id"].startswith("ses_") and side["external_id"] is None
    assert (side["labels"]["role"], side["parent_session_id"]) == ("title", loop["id"])
    assert side["labels"]["title"] == "title calls beside the loop"  # what `sessions` and the dashboard show
    assert "reasonlog: recorded 3 call(s) in 1 session(s) and 1 side session(s) (title)" in done.stderr


@pytest.mark.slow
def test_a_codex_session_carries_its_thread_id(tmp_path):
    codex = cli("codex")
    db = tmp_path / "r.db"
    body = load_json("openai-responses", "openai-reasoning-encrypted-content.1.json")
    with Upstream() as up:
        up.answers["responses"] = (json.dumps(body).encode(), sse(responses_events(body), named=True))
        done = run_through_proxy(tmp_path, db, up.url, codex, "exec", "--skip-git-repo-check", "Compute it",
                                 OPENAI_API_KEY="sk-proj-fake")
    assert done.returncode == 0, done.stderr
    (sent,) = [orjson.loads(r.body) for r in up.received if r.method == "POST" and r.path == "/v1/responses"]
    thread = sent["client_metadata"]["thread_id"]
    assert sent["prompt_cache_key"] == thread
    (session,), _ = sessions_of(db)
    assert session["external_id"] == thread  # the id of the rollout Codex writes, and of its import


def gemini_reply(request: dict) -> dict:
    """Gemini CLI's router gets its score as JSON; a request to run a command a call of its shell tool (when the
    last user message asks for one), anything else the recorded text."""
    config = request.get("generationConfig") or {}
    if "complexity_score" in json.dumps(config.get("responseJsonSchema") or {}):
        parts = [{"text": json.dumps({"complexity_reasoning": "A single command.", "complexity_score": 5})}]
    else:
        users = [c for c in request.get("contents") or [] if c.get("role") == "user"]
        asks = bool(users) and "run the shell command" in json.dumps(users[-1]).lower()
        shell = "run_shell_command" in json.dumps(request.get("tools") or [])
        parts = [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hello"}}}] \
            if asks and shell else [{"text": "It printed hello."}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 8, "totalTokenCount": 128},
            "modelVersion": "gemini-2.5-flash", "responseId": "resp-gemini"}


class GeminiUpstream(Upstream):
    """The proxy tests' upstream, answering Gemini CLI's router and a shell-tool loop (`gemini_reply`)."""

    def default_reply(self, path: str, body: bytes) -> Reply:
        if "Content" not in path:
            return super().default_reply(path, body)
        answer = gemini_reply(orjson.loads(body))
        if "streamGenerateContent" in path:
            return Reply(200, [sse([answer], named=False)], "text/event-stream")
        return Reply(200, [json.dumps(answer).encode()])


@pytest.mark.slow
def test_gemini_clis_router_calls_are_a_side_session_of_its_loop(tmp_path):
    gemini = cli("gemini")
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}  # an API key, not a Google account
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    db = tmp_path / "r.db"
    with GeminiUpstream() as up:
        done = run_through_proxy(tmp_path, db, up.url, gemini, "--yolo", "-p", PROMPT,
                                 GEMINI_API_KEY="fake-gemini-key", GEMINI_CLI_TRUST_WORKSPACE="true")
    assert done.returncode == 0, done.stderr
    sent = [orjson.loads(r.body) for r in up.received if "Content" in r.path]
    routed = [b for b in sent if "complexity_score" in json.dumps(b.get("generationConfig") or {})]
    assert (len(routed), len(sent)) == (1, 3)  # the router, then the loop: a tool call, an answer
    sessions, calls = sessions_of(db)
    loop, side = loop_and_side(sessions)
    assert len(calls[loop["id"]]) == 2 and len(calls[side["id"]]) == len(routed)
    assert (side["labels"]["role"], side["parent_session_id"], side["run"]) == ("router", loop["id"], loop["run"])


@pytest.mark.slow
def test_a_qwen_code_loop_is_one_session_by_continuity(tmp_path, chat_upstream):
    """Qwen Code names no session: its loop (a shell tool call, then the answer) stays one by continuity."""
    done = run_through_proxy(tmp_path, tmp_path / "r.db", chat_upstream, cli("qwen"), "--auth-type", "openai",
                             "-m", "gpt-4.1-nano", "--yolo", "-p", PROMPT, OPENAI_API_KEY="sk-fake",
                             OPENAI_MODEL="gpt-4.1-nano")
    assert done.returncode == 0, done.stderr
    (session,), calls = sessions_of(tmp_path / "r.db")
    assert [c["output_tokens"] for c in calls[session["id"]]] == [83, 300]
    assert (session["external_id"], session["agent"]) == (None, "qwen")
