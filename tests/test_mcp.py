"""`reasonlog mcp` (issue 37) tested as agents use it: the official SDK's own client starts `reasonlog mcp` over
stdio and calls every tool; answers are small, cited, and a citation says when its record changed; bad arguments
come back as tool errors naming the argument; an empty database and one being written meanwhile are answered."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

import reasonlog
from reasonlog.mcp.tools import BUDGET

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

TOOLS = ["get_call", "get_session", "reasoning", "search_history", "tool_history", "usage"]


def record_coding_session(db: Path, agent: str = "claude", failing: str = "ModuleNotFoundError: no module parser"):
    """A coding agent's session: it reads src/parser.py, runs the tests (which fail), then answers."""
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent=agent, run="fix-parser", model="claude-sonnet-4-5", labels={"cwd": "/work/app"}) as s:
        history = [{"role": "user", "content": "Fix the failing parser test"}]
        reply = [{"type": "text", "text": "Let me read the parser."},
                 {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "src/parser.py"}}]
        s.call(messages=list(history), response=reply, stop_reason="tool_use", model="claude-sonnet-4-5",
               usage=reasonlog.Usage(input_tokens=100, output_tokens=20))
        history.append({"role": "assistant", "content": reply})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                     "content": "def parse(text): return text.split()"}]})
        s.tool_result("toolu_1", "def parse(text): return text.split()", name="Read",
                      input={"file_path": "src/parser.py"})
        reply = [{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pytest tests/"}}]
        s.call(messages=list(history), response=reply, stop_reason="tool_use", model="claude-sonnet-4-5",
               usage=reasonlog.Usage(input_tokens=150, output_tokens=15))
        history.append({"role": "assistant", "content": reply})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2",
                                                     "content": failing, "is_error": True}]})
        s.tool_result("toolu_2", failing, name="Bash", input={"command": "pytest tests/"}, is_error=True)
        reply = [{"type": "text", "text": "The tests need the parser package installed: pip install -e ."}]
        s.call(messages=list(history), response=reply, stop_reason="end_turn", model="claude-sonnet-4-5",
               usage=reasonlog.Usage(input_tokens=200, output_tokens=30))
        s.outcome("answer", {"text": "install the package"})
    rec.close()


def ask(db: Path, *calls: tuple[str, dict], dashboard: str | None = None) -> list:
    """Start `reasonlog mcp` over stdio with the SDK's client, make `calls`, return their results."""
    args = ["-m", "reasonlog", "--db", str(db), "mcp"] + (["--dashboard", dashboard] if dashboard else [])

    async def run():
        async with Client(StdioServerParameters(command=sys.executable, args=args)) as client:
            out = [sorted(t.name for t in (await client.list_tools()).tools)]
            for name, arguments in calls:
                out.append(await client.call_tool(name, arguments))
            return out
    return asyncio.run(run())


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def test_every_tool_answers_over_stdio_with_citations(tmp_path):
    db = tmp_path / "r.db"
    record_coding_session(db)
    store = reasonlog.open_store(db, read_only=True)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    listed, found, history, whole, used = ask(
        db, ("search_history", {"query": "parser test"}), ("tool_history", {"subject": "src/parser.py"}),
        ("get_session", {"session": session["id"][:12]}), ("usage", {"by": "agent"}),
        dashboard="http://127.0.0.1:8787")
    assert listed == TOOLS
    hits = structured(found)["hits"]
    assert hits and all(h["cite"].startswith(f"{session['id']}#") for h in hits)
    assert all(h["url"].startswith("http://127.0.0.1:8787/calls/") for h in hits)
    uses = structured(history)["uses"]
    assert any(u["tool"] == "Read" and "src/parser.py" in u["text"] for u in uses)

    answer = structured(whole)
    assert answer["session"]["title"] == "Fix the failing parser test"
    assert answer["session"]["totals"]["input_tokens"] == 450
    tools = [t for step in answer["steps"] for t in step.get("tools", ())]
    assert [t["tool"] for t in tools] == ["Read", "Bash"]
    assert tools[1]["is_error"] is True and "ModuleNotFoundError" in tools[1]["result"]
    assert {"outcome": "answer", "payload": {"text": "install the package"}}.items() <= answer["steps"][-1].items()
    (row,) = structured(used)["rows"]
    assert (row["agent"], row["calls"], row["input_tokens"], row["output_tokens"]) == ("claude", 3, 450, 65)
    assert len(json.dumps(answer)) <= BUDGET


@pytest.mark.slow
def test_a_citation_opens_its_call_and_says_when_the_record_changed(tmp_path):
    db = tmp_path / "r.db"
    record_coding_session(db)
    store = reasonlog.open_store(db, read_only=True)
    (session,) = store.list_sessions(reasonlog.SessionFilter())
    _, first = ask(db, ("get_call", {"call": f"{session['id']}#2"}))
    cite = structured(first)["cite"]
    assert cite.startswith(f"{session['id']}#2@")
    assert structured(first)["reply"]["content"][0]["text"].startswith("The tests need the parser package")
    _, again, stale = ask(db, ("get_call", {"call": cite}), ("get_call", {"call": cite[:-8] + "00000000"}))
    assert "changed_since_cited" not in structured(again)
    assert "changed since it was cited" in structured(stale)["changed_since_cited"]


BAD_ARGUMENTS = [
    ("search_history", {"query": "x", "mode": "psychic"}, "mode\n  Input should be 'auto', 'text', 'keywords'"),
    ("search_history", {"query": "x", "since": "2026-13-45"}, "since: expected a date as YYYY-MM-DD"),
    ("search_history", {"query": "  "}, "query: expected some text"),
    ("get_session", {"session": "nope"}, "session: no session has the id or prefix 'nope'"),
    ("get_call", {"call": "nope#x"}, "call: expected SESSION#N with N a number"),
    ("usage", {"by": "colour"}, "by\n  Input should be 'day', 'model', 'agent', 'run' or 'source'"),
    ("get_session", {"session": "0", "start": -1}, "start\n  Input should be greater than or equal to 0"),
]


def test_bad_arguments_are_tool_errors_naming_the_argument(tmp_path):
    """Each bad call is a tool error naming its argument, and the server answers the next one: one `reasonlog mcp`
    takes all of them (a process each cost the suite a second of CPU a case)."""
    db = tmp_path / "r.db"
    record_coding_session(db)
    _, *results = ask(db, *((name, arguments) for name, arguments, _ in BAD_ARGUMENTS))
    for (name, arguments, named), result in zip(BAD_ARGUMENTS, results, strict=True):
        text = result.content[0].text
        assert (result.is_error, "Traceback" in text, named in text) == (True, False, True), (name, arguments, text)


def test_an_empty_database_answers_with_nothing_found(tmp_path):
    db = tmp_path / "empty.db"
    reasonlog.open_store(db).close()
    _, found, used = ask(db, ("search_history", {"query": "anything"}), ("usage", {}))
    assert structured(found)["hits"] == [] and structured(used)["rows"] == []


def test_a_session_recorded_while_the_server_runs_is_found(tmp_path):
    db = tmp_path / "r.db"
    record_coding_session(db)
    args = ["-m", "reasonlog", "--db", str(db), "mcp"]

    async def run():
        async with Client(StdioServerParameters(command=sys.executable, args=args)) as client:
            before = await client.call_tool("search_history", {"query": "flaky migration"})
            record_coding_session(db, agent="codex", failing="flaky migration: table locked")
            after = await client.call_tool("search_history", {"query": "flaky migration"})
            return before, after
    before, after = asyncio.run(run())
    assert structured(before)["hits"] == []
    assert any("flaky migration" in h["text"] for h in structured(after)["hits"])


@pytest.mark.slow
def test_print_config_gives_each_agent_its_own_shape(tmp_path):
    import subprocess

    reasonlog.open_store(tmp_path / "r.db").close()
    def config(client: str) -> str:
        done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(tmp_path / "r.db"), "mcp",
                               "--print-config", client], capture_output=True, text=True, check=True)
        return done.stdout
    claude = json.loads(config("claude"))["mcpServers"]["reasonlog"]
    assert claude["args"][-3:] == ["--db", str(tmp_path / "r.db"), "mcp"] and Path(claude["command"]).is_absolute()
    started = subprocess.run([claude["command"], *claude["args"][:-1], "sessions"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr  # the command it names runs this reasonlog
    assert json.loads(config("gemini"))["mcpServers"]["reasonlog"] == claude
    opencode = json.loads(config("opencode"))["mcp"]["reasonlog"]
    assert opencode["type"] == "local" and opencode["command"] == [claude["command"], *claude["args"]]
    assert config("codex").splitlines()[0] == "[mcp_servers.reasonlog]"


# ------------------------------------------------------------------------------ over HTTP, from `reasonlog serve`

@pytest.mark.slow
def test_the_same_tools_over_http_from_serve_behind_the_api_keys(tmp_path):
    """`/mcp` on `reasonlog serve`: the same tools over streamable HTTP; once a key exists, none or a wrong one
    is refused, a read key is enough; citations' URLs are this server's dashboard paths."""
    import subprocess

    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from serving import serving

    db = tmp_path / "r.db"
    record_coding_session(db)
    key = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "keys", "create", "--scope", "read"],
                         capture_output=True, text=True, check=True).stdout.strip()

    async def call(base: str, token: str | None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(f"{base}/mcp/", http_client=http)) as client:
                tools = sorted(t.name for t in (await client.list_tools()).tools)
                found = await client.call_tool("search_history", {"query": "parser"})
                cite = found.structured_content["hits"][0]["cite"]
                others = [await client.call_tool(name, arguments) for name, arguments in (
                    ("get_session", {"session": cite.split("#")[0]}), ("get_call", {"call": cite}),
                    ("tool_history", {"subject": "src/parser.py"}), ("usage", {"by": "model"}),
                    ("reasoning", {}), ("usage", {"by": "colour"}))]
                return tools, found, others

    with serving("--db", str(db), "serve") as base:
        tools, found, others = asyncio.run(call(base, key))
        refused = httpx2.post(f"{base}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        wrong = httpx2.post(f"{base}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"Authorization": "Bearer nope"})
    assert tools == TOOLS
    hits = structured(found)["hits"]
    assert hits and all(h["url"].startswith("/calls/") and "#" in h["cite"] for h in hits)
    hits = structured(found)["hits"]
    session, call_, history, used, reasoned, bad = others
    assert structured(session)["session"]["title"] == "Fix the failing parser test"
    assert structured(call_)["cite"] == hits[0]["cite"] and structured(call_)["reply"]["role"] == "assistant"
    assert any(u["tool"] == "Read" for u in structured(history)["uses"])
    assert [r["calls"] for r in structured(used)["rows"]] == [3] and structured(reasoned)["records"] == []
    assert bad.is_error and "by\n  Input should be 'day'" in bad.content[0].text
    assert (refused.status_code, wrong.status_code) == (401, 401)
    assert "no API key" in refused.json()["detail"] and "wrong or revoked" in wrong.json()["detail"]


# ------------------------------------------------------------------------------ a real agent asks

def test_claude_code_from_npm_starts_reasonlog_mcp_and_gets_a_cited_answer(tmp_path):
    """The real Claude Code CLI with `--mcp-config` (the block `--print-config claude` prints) against a local
    provider that asks for `search_history`: the CLI starts `reasonlog mcp`, calls it, and the tool result in its
    next request holds the recorded session's citation."""
    import os
    import subprocess

    from proxy_upstream import Reply, Upstream, anthropic_events
    from proxying import ANTHROPIC_KEY
    from sdk_server import sse
    from test_proxy_clis import SEARCH, cli

    claude = cli("claude")
    db = tmp_path / "r.db"
    record_coding_session(db)
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(reasonlog.SessionFilter())
    config = tmp_path / "mcp.json"
    config.write_text(subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "mcp", "--print-config",
                                      "claude"], capture_output=True, text=True, check=True).stdout)
    tool = "mcp__reasonlog__search_history"

    def message(content: list[dict], stop: str) -> bytes:
        body = {"id": "msg_mcp", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5}}
        return sse(anthropic_events(body), named=True)

    class Asking(Upstream):
        def default_reply(self, path, body):
            request = orjson_loads(body)
            offered = [t.get("name") for t in request.get("tools") or ()]
            answered = any(isinstance(m.get("content"), list) and any(
                b.get("type") == "tool_result" for b in m["content"]) for m in request.get("messages") or ())
            if tool in offered and not answered:
                return Reply(200, [message([{"type": "tool_use", "id": "toolu_mcp", "name": tool,
                                             "input": {"query": "parser test"}}], "tool_use")], "text/event-stream")
            return Reply(200, [message([{"type": "text", "text": "Found it."}], "end_turn")], "text/event-stream")

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": SEARCH, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
           "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           # `claude -p` sends its first request without waiting for MCP servers unless told to (docs/mcp.md)
           "MCP_CONNECTION_NONBLOCKING": "0"}
    with Asking() as up:
        env["ANTHROPIC_BASE_URL"] = up.url
        done = subprocess.run([claude, "-p", "What did earlier agents find about the parser test?",
                               "--mcp-config", str(config), "--allowedTools", tool], capture_output=True, text=True,
                              timeout=180, env=env, cwd=tmp_path)
        requests = [orjson_loads(r.body) for r in up.received if r.path.startswith("/v1/messages")]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Found it."
    results = [b for r in requests for m in r.get("messages") or () if isinstance(m.get("content"), list)
               for b in m["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") == "toolu_mcp"]
    assert results, f"no request carried the tool's result: {[str(r.get('messages'))[-300:] for r in requests]}"
    text = json.dumps(results[-1]["content"])
    assert f"{session['id']}#" in text and "@" in text  # the citation of the recorded session's call


def orjson_loads(body: bytes) -> dict:
    import orjson

    try:
        loaded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


@pytest.mark.slow  # the quick run keeps Claude Code as the real agent that starts reasonlog mcp
def test_gemini_cli_from_npm_starts_reasonlog_mcp_and_gets_a_cited_answer(tmp_path):
    """The real Gemini CLI with the block `--print-config gemini` prints in its settings.json, against a local
    provider that asks for `mcp_reasonlog_search_history`: the tool result in its next request holds the recorded
    session's citation."""
    import os
    import subprocess

    from cli_upstream import CliUpstream, _answer, gemini_body
    from sdk_server import sse
    from test_proxy_clis import SEARCH, cli

    gemini = cli("gemini")
    db = tmp_path / "r.db"
    record_coding_session(db)
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(reasonlog.SessionFilter())
    tool = "mcp_reasonlog_search_history"
    block = json.loads(subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "mcp", "--print-config",
                                       "gemini"], capture_output=True, text=True, check=True).stdout)
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"disableAutoUpdate": True}, "privacy": {"usageStatisticsEnabled": False}, **block}))

    def chunk(parts: list[dict]) -> dict:
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": "gemini-2.5-flash"}

    class Asking(CliUpstream):
        def default_reply(self, path, body):
            request = orjson_loads(body)
            offered = [d.get("name") for t in request.get("tools") or () for d in t.get("functionDeclarations") or ()]
            answered = any("functionResponse" in p for c in request.get("contents") or () for p in c.get("parts") or ())
            if tool not in offered:
                return super().default_reply(path, body)  # the router call beside the loop
            parts = [{"text": "Found it."}] if answered else \
                [{"functionCall": {"name": tool, "args": {"query": "parser test"}}}]
            chunks = [chunk(parts)]
            return _answer(gemini_body(chunks), sse(chunks, named=False), "streamGenerateContent" in path)

    env = {**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, "HOME": str(home), "PATH": SEARCH,
           "GEMINI_API_KEY": "gm-test"}
    with Asking() as up:
        env["GOOGLE_GEMINI_BASE_URL"] = up.url
        done = subprocess.run([gemini, "-p", "What did earlier agents find about the parser test?", "--yolo"],
                              capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
        requests = [orjson_loads(r.body) for r in up.calls]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Found it." in done.stdout
    results = [p["functionResponse"] for r in requests for c in r.get("contents") or () for p in c.get("parts") or ()
               if "functionResponse" in p and p["functionResponse"].get("name") == tool]
    assert results, "no request carried the tool's result"
    text = json.dumps(results[-1])
    assert f"{session['id']}#" in text and "@" in text  # the citation of the recorded session's call


def test_reasoning_records_and_who_skipped_a_phase(tmp_path):
    db = tmp_path / "r.db"
    rec = reasonlog.Recorder(db, writer="sync")
    for agent, phases in (("developer", ["understanding", "completion"]), ("tech_lead", ["understanding"])):
        with rec.session(agent=agent, run="orch-1") as s:
            for phase in phases:
                s.reason(phase, {"summary": f"{agent} {phase}"}, group="DEL-1")
    rec.close()
    _, records, skipped, bad = ask(db, ("reasoning", {"group": "DEL-1"}),
                                   ("reasoning", {"group": "DEL-1", "missing": ["understanding", "completion"]}),
                                   ("reasoning", {"missing": ["daydreaming"]}))
    assert sorted(r["phase"] for r in structured(records)["records"]) == ["completion", "understanding",
                                                                         "understanding"]
    answer = structured(skipped)
    assert [(r["agent"], r["missing"]) for r in answer["records"]] == [("tech_lead", ["completion"])]
    assert answer["sessions_with_records"] == 2
    assert bad.is_error and "missing: expected phases among understanding" in bad.content[0].text


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for chattr +i")
@pytest.mark.slow
def test_a_read_only_database_is_answered(tmp_path):
    import subprocess

    db = tmp_path / "r.db"
    record_coding_session(db)
    subprocess.run(["chattr", "+i", str(db)], check=True)
    try:
        _, found = ask(db, ("search_history", {"query": "parser test"}))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert structured(found)["hits"]
