"""A model provider on 127.0.0.1 that makes a real agent CLI run a tool loop, in the CLI's own protocol (issue 31).

Each model call is answered by where the agent is in its loop, counted by the tool results its request sends back:
none yet, a call to its shell tool (`cat hello.txt`); one, two calls at once (`echo two` and `cat missing.txt`,
which fails; one at a time where the request forbids parallel calls); three or more, the final answer. Each step
comes with the model's thinking as the protocol carries it (a thinking block when asked, `reasoning_content`, a
reasoning item, a thought part). A call that offers no shell tool (a title, a router, a classifier) gets a short
text, or JSON fitting the schema it asks for. Answers are streamed when the request asks (Anthropic and Responses
named events, Chat chunks, Gemini `alt=sse` chunks) and whole otherwise. The protocols are Anthropic Messages
(Claude Code), OpenAI Responses (Codex: its `exec` custom tool takes JavaScript calling `tools.exec_command`),
Gemini generateContent (Gemini CLI) and OpenAI Chat (OpenCode, Qwen Code, Cline: `run_commands` takes a list). It
is `proxy_upstream.Upstream` (which keeps every request received) with these answers in place of its recorded ones.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy_upstream import Reply, Upstream, anthropic_events, halves, protocol_of, responses_events  # noqa: E402
from sdk_server import sse  # noqa: E402

STEPS = (("cat hello.txt",), ("echo two", "cat missing.txt"))
FINAL = "hello.txt says hello; missing.txt does not exist."
SIDE = "Tool loop"  # the answer to a call beside the loop (title, router, classifier)
THOUGHT = "The shell will tell."  # the model's thinking before each step of the loop, where the protocol has it
USAGE = {"input": 120, "output": 20}


def plan(results: int, parallel: bool = True) -> tuple[str, ...] | None:
    """The shell commands to ask for after `results` tool results, or None for the final answer."""
    if results == 0:
        return STEPS[0]
    if parallel:
        return STEPS[1] if results < 3 else None
    rest = STEPS[1]
    return (rest[results - 1],) if results - 1 < len(rest) else None


@dataclass(frozen=True)
class Shell:
    """The agent's shell tool: its name, the argument taking the command (Cline 3's `run_commands` takes a list of
    `commands`), and its other required arguments, filled."""

    name: str
    key: str
    extra: dict

    def args(self, command: str) -> dict:
        """The arguments of a call that runs `command`."""
        return {self.key: [command] if self.key == "commands" else command, **self.extra}


def _shell(tools: list[tuple[str, dict]]) -> Shell | None:
    """The first tool offered that takes a shell `command` (or `commands`)."""
    for name, schema in tools:
        props = schema.get("properties") or {}
        key = "command" if "command" in props else "commands" if "commands" in props else None
        if key:
            extra = {k: _filler(props.get(k) or {}) for k in schema.get("required") or [] if k != key}
            return Shell(name, key, extra)
    return None


def _filler(schema: dict):
    kind = schema.get("type")
    return False if kind == "boolean" else 5000 if kind in ("integer", "number") else "run it"


def schema_answer(schema: dict):
    """A value that fits a JSON schema (a router's or classifier's answer): its required fields filled."""
    kind = str(schema.get("type") or "object").lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: schema_answer(props.get(k) or {}) for k in schema.get("required") or props}
    if kind == "array":
        return []
    if schema.get("enum"):
        return schema["enum"][0]
    return {"integer": 10, "number": 10, "boolean": False}.get(kind, "simple")


# ---------------------------------------------------------------------- Anthropic Messages (Claude Code)

def anthropic_reply(request: dict, n: int) -> dict:
    tools = [(t.get("name"), t.get("input_schema") or {}) for t in request.get("tools") or [] if isinstance(t, dict)]
    results = sum(1 for m in request.get("messages") or [] if isinstance(m.get("content"), list)
                  for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
    shell = _shell(tools)
    commands = plan(results) if shell else None
    content: list[dict] = [{"type": "text", "text": FINAL if shell else SIDE}]
    if commands:
        content = [{"type": "text", "text": "Let me look."}] + [
            {"type": "tool_use", "id": f"toolu_{n:02d}{i}", "name": shell.name, "input": shell.args(c)}
            for i, c in enumerate(commands)]
    if shell and (request.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
        content.insert(0, {"type": "thinking", "thinking": THOUGHT, "signature": f"sig-{n}"})
    return {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": request.get("model"),
            "content": content, "stop_reason": "tool_use" if commands else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"],
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


# ---------------------------------------------------------------------- OpenAI Chat (OpenCode, Qwen Code)

def chat_chunks(request: dict, n: int) -> list[dict]:
    tools = [((t.get("function") or {}).get("name"), (t.get("function") or {}).get("parameters") or {})
             for t in request.get("tools") or [] if isinstance(t, dict)]
    results = sum(1 for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
    shell = _shell(tools)
    commands = plan(results) if shell else None
    head = {"id": f"chatcmpl-{n:04d}", "object": "chat.completion.chunk", "created": 1764288000 + n,
            "model": request.get("model") or "gpt-4.1"}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if shell:
        out += [chunk({"reasoning_content": t}) for t in halves(THOUGHT)]
    if commands:
        for i, command in enumerate(commands):
            # spaced JSON, as OpenAI streams it; clients that parse and re-serialise it send it back without
            arguments = json.dumps(shell.args(command))
            first, second = halves(arguments)
            out.append(chunk({"tool_calls": [{"index": i, "id": f"call_{n:02d}{i}", "type": "function",
                                              "function": {"name": shell.name, "arguments": first}}]}))
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": second}}]}))
    else:
        out += [chunk({"content": t}) for t in halves(FINAL if shell else SIDE)]
    out.append(chunk({}, "tool_calls" if commands else "stop"))
    usage = {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
             "total_tokens": USAGE["input"] + USAGE["output"]}
    return out + [{**head, "choices": [], "usage": usage}]


def chat_body(chunks: list[dict]) -> dict:
    from agent_upstream import assemble

    return assemble(chunks)


# ---------------------------------------------------------------------- OpenAI Responses (Codex)

def _nested(tools: list) -> list[dict]:
    """Tools, with those inside a namespace (Codex groups its tools so) listed as themselves."""
    out = []
    for tool in tools:
        if isinstance(tool, dict):
            out += _nested(tool.get("tools") or []) if tool.get("type") == "namespace" else [tool]
    return out


def _responses_tools(request: dict) -> tuple[str | None, list[tuple[str, dict]]]:
    """Codex's custom `exec` tool (JavaScript) if offered, and the function tools: in `tools`, or (Codex 0.171)
    in an `additional_tools` input item."""
    extra = [i for i in request.get("input") or [] if isinstance(i, dict) and i.get("type") == "additional_tools"]
    offered = list(request.get("tools") or []) + [t for i in extra for t in i.get("tools") or []]
    tools = _nested(offered)
    custom = next((t.get("name") for t in tools if t.get("type") == "custom"), None)
    return custom, [(t.get("name"), t.get("parameters") or {}) for t in tools if t.get("type") == "function"]


def responses_reply(request: dict, n: int) -> dict:
    items = [i for i in request.get("input") or [] if isinstance(i, dict)]
    results = sum(1 for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output"))
    custom, functions = _responses_tools(request)
    shell = _shell(functions)
    commands = plan(results, request.get("parallel_tool_calls") is not False) if (custom or shell) else None
    output: list[dict] = []
    if custom or shell:
        output.append({"type": "reasoning", "id": f"rs_{n:04d}", "summary": [{"type": "summary_text", "text": THOUGHT}],
                       "encrypted_content": f"enc-{n}"})
    for i, command in enumerate(commands or ()):
        call = f"call_{n:02d}{i}"
        if custom:
            code = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\ntext(r.output);"
            output.append({"type": "custom_tool_call", "id": f"ctc_{n:02d}{i}", "status": "completed",
                           "call_id": call, "name": custom, "input": code})
        else:
            output.append({"type": "function_call", "id": f"fc_{n:02d}{i}", "status": "completed", "call_id": call,
                           "name": shell.name, "arguments": json.dumps(shell.args(command))})
    if not commands:
        text = FINAL if (custom or shell) else SIDE
        output.append({"type": "message", "id": f"msg_{n:04d}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    return {"id": f"resp_{n:04d}", "object": "response", "created_at": 1764288000 + n, "status": "completed",
            "model": request.get("model"), "output": output,
            "usage": {"input_tokens": USAGE["input"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": USAGE["input"] + USAGE["output"]}}


# ---------------------------------------------------------------------- Gemini (Gemini CLI)

def gemini_chunks(request: dict, n: int) -> list[dict]:
    declared = [d for t in request.get("tools") or [] if isinstance(t, dict)
                for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]
    tools = [(d.get("name"), d.get("parametersJsonSchema") or d.get("parameters") or {}) for d in declared]
    results = sum(1 for c in request.get("contents") or [] if isinstance(c, dict)
                  for p in c.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p)
    shell = _shell(tools)
    commands = plan(results) if shell else None
    usage = {"promptTokenCount": USAGE["input"], "candidatesTokenCount": USAGE["output"],
             "totalTokenCount": USAGE["input"] + USAGE["output"]}
    head = {"modelVersion": "gemini-2.5-flash", "responseId": f"gemini-{n:04d}"}
    thought = [{"text": THOUGHT, "thought": True}] if shell else []
    if commands:
        parts = thought + [{"functionCall": {"name": shell.name, "args": shell.args(c)}}
                           for c in commands]
        return [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": usage, **head}]
    config = request.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    text = FINAL if shell else json.dumps(schema_answer(schema)) if schema else SIDE
    first, second = halves(text)
    return [{"candidates": [{"content": {"role": "model", "parts": [*thought, {"text": first}]}, "index": 0}], **head},
            {"candidates": [{"content": {"role": "model", "parts": [{"text": second}]}, "finishReason": "STOP",
                             "index": 0}], "usageMetadata": usage, **head}]


def gemini_body(chunks: list[dict]) -> dict:
    from reasonlog.providers import gemini

    stream = gemini.Stream()
    for chunk in chunks:
        stream.add(chunk)
    return stream.body()


# ---------------------------------------------------------------------- the upstream

class CliUpstream(Upstream):
    """`with CliUpstream() as up:` answers every model call with the next step of the loop (see the module doc);
    `up.received` keeps every request, `up.calls` the model calls among them."""

    @property
    def calls(self) -> list:
        return [r for r in self.received if r.method == "POST" and protocol_of(r.path) is not None]

    def default_reply(self, path: str, body: bytes) -> Reply:
        protocol = protocol_of(path)
        if protocol is None:
            return Reply(200, [b'{"object": "list", "data": [{"id": "a-model", "object": "model"}]}'])
        if not body:  # Codex's WebSocket upgrade: refused, so it uses HTTPS at once
            return Reply(404, [b'{"error": {"message": "no WebSocket here"}}'])
        request = json.loads(body or b"{}")
        n = len(self.calls) - 1
        wants_stream = request.get("stream") is True or "streamGenerateContent" in path
        if protocol == "anthropic":
            reply = anthropic_reply(request, n)
            return _answer(reply, sse(anthropic_events(reply), named=True), wants_stream)
        if protocol == "responses":
            reply = responses_reply(request, n)
            return _answer(reply, sse(responses_events(reply), named=True), wants_stream)
        if protocol == "gemini":
            chunks = gemini_chunks(request, n)
            return _answer(gemini_body(chunks), sse(chunks, named=False), wants_stream)
        chunks = chat_chunks(request, n)
        return _answer(chat_body(chunks), sse(chunks, named=False, done=True), wants_stream)


def _answer(body: dict, streamed: bytes, wants_stream: bool) -> Reply:
    if wants_stream:
        return Reply(200, [streamed], "text/event-stream")
    return Reply(200, [json.dumps(body).encode()])


if __name__ == "__main__":  # serve for running a CLI by hand; prints the URL, logs each model call's path
    import threading

    upstream = CliUpstream(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    upstream.__enter__()
    print(upstream.url, flush=True)
    threading.Event().wait()
