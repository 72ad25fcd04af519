"""An OpenAI-compatible upstream on 127.0.0.1 for running real coding agents offline, to make fixtures.

`python tests/agent_upstream.py [--port N] [--log FILE]` serves `POST .../chat/completions` and `GET .../models`.
A request whose last message is a user's asking to "run the shell command" is answered with the recorded DeepSeek
tool-call stream (`openai-chat/deepseek-tool-call.chunks.txt`), its function renamed to the agent's own shell tool
(the first tool offered whose schema has a `command` property and needs no other answer but yes/no, which are given
as false: Cline's `requires_approval`) and its arguments `{"command": "echo hello"}`; one asking to "use a
subagent" gets the same stream calling the agent's sub-agent tool (one with `prompt` and `subagent_type`) with the
prompt "Please run the shell command: echo hello"; anything else with the recorded gpt-4.1-nano text stream
(`openai-chat/openai-text.chunks.txt`), except for agents that end a task only through a tool (Cline and its forks
offer `attempt_completion`): they get the same tool-call stream calling it with the recorded text as its `result`.
Non-streamed requests get the same reply assembled into one `chat.completion`. Every request is appended to
`--log` as JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_server import load_chunks  # noqa: E402

TEXT = load_chunks("openai-chat", "openai-text.chunks.txt")
TOOL = load_chunks("openai-chat", "deepseek-tool-call.chunks.txt")


COMPLETION = "attempt_completion"


def _schema(tool: dict) -> tuple[str | None, dict]:
    fn = tool.get("function") or tool
    return fn.get("name"), fn.get("parameters") or fn.get("input_schema") or {}


def _shell(request: dict) -> tuple[str | None, dict] | None:
    """The first tool offered that takes a `command` and needs nothing else but yes/no answers (Kilo's
    `background_process` also takes a command, but needs an `action`), else the first that takes a `command`."""
    shells = [_schema(tool) for tool in request.get("tools") or []]
    shells = [(name, schema) for name, schema in shells if "command" in (schema.get("properties") or {})]
    for name, schema in shells:
        props = schema.get("properties") or {}
        if all(key == "command" or (props.get(key) or {}).get("type") == "boolean"
               for key in schema.get("required") or []):
            return name, schema
    return shells[0] if shells else None


def shell_tool(request: dict) -> tuple[str, str] | None:
    """The name of the agent's shell tool (see `_shell`), and the property that takes the command."""
    shell = _shell(request)
    return (shell[0], "command") if shell and shell[0] else None


def shell_arguments(request: dict) -> dict:
    """`echo hello` for the shell tool, with its other required yes/no properties false."""
    args: dict = {"command": "echo hello"}
    shell = _shell(request)
    if shell:
        props = shell[1].get("properties") or {}
        for key in shell[1].get("required") or []:
            if key != "command" and (props.get(key) or {}).get("type") == "boolean":
                args[key] = False
    return args


def completion_tool(request: dict) -> bool:
    """Whether the agent ends its task only through a tool (Cline's `attempt_completion`, with a `result`)."""
    return any(_schema(tool)[0] == COMPLETION and "result" in (_schema(tool)[1].get("properties") or {})
               for tool in request.get("tools") or [])


def agent_tool(request: dict) -> str | None:
    """The name of the tool that starts a sub-agent (one that takes a `prompt` and a `subagent_type`)."""
    for tool in request.get("tools") or []:
        fn = tool.get("function") or tool
        props = ((fn.get("parameters") or fn.get("input_schema") or {}).get("properties") or {})
        if "prompt" in props and "subagent_type" in props:
            return fn.get("name")
    return None


def last_user_text(request: dict) -> str:
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return text.lower() if last.get("role") == "user" else ""


def wants_tool(request: dict) -> bool:
    return "run the shell command" in last_user_text(request) and shell_tool(request) is not None


def wants_subagent(request: dict) -> bool:
    return "use a subagent" in last_user_text(request) and agent_tool(request) is not None


def recorded_text() -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in TEXT if c["choices"])


def tool_chunks(request: dict, subagent: bool = False, completion: bool = False) -> list[dict]:
    """The recorded tool-call stream, its call renamed to the agent's tool, its arguments given whole: the shell
    tool running `echo hello`, (`subagent`) the sub-agent tool asked to run it, or (`completion`) the agent's
    completion tool given the recorded text as its result."""
    if subagent:
        name, args = agent_tool(request), {"description": "Run echo hello", "subagent_type": "general-purpose",
                                           "prompt": "Please run the shell command: echo hello"}
    elif completion:
        name, args = COMPLETION, {"result": recorded_text()}
    else:
        name, args = shell_tool(request)[0], shell_arguments(request)  # type: ignore[index]
    out = []
    for chunk in TOOL:
        calls = chunk["choices"][0]["delta"].get("tool_calls") if chunk["choices"] else None
        if not calls:
            out.append(chunk)
        elif "id" in calls[0]:
            first = json.loads(json.dumps(chunk))
            first["choices"][0]["delta"]["tool_calls"][0]["function"] = {"name": name, "arguments": json.dumps(args)}
            out.append(first)
    return out


def assemble(chunks: list[dict]) -> dict:
    """The chunks as one non-streamed `chat.completion`."""
    text, reasoning, calls, finish, usage = "", "", [], None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:
                    calls.append({"id": call["id"], "type": "function", "function": dict(call["function"])})
                else:
                    calls[-1]["function"]["arguments"] += call["function"].get("arguments", "")
            finish = choice.get("finish_reason") or finish
    message: dict = {"role": "assistant", "content": text or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    first = chunks[0]
    return {"id": first["id"], "object": "chat.completion", "created": first["created"], "model": first["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


class Handler(BaseHTTPRequestHandler):
    log_path: Path | None = None

    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"object": "list", "data": [{"id": "gpt-4.1-nano", "object": "model"}]}).encode()
        self._send(200, body, "application/json")

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.log_path is not None:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"path": self.path, "body": request}) + "\n")
        subagent = wants_subagent(request)
        if subagent or wants_tool(request):
            chunks = tool_chunks(request, subagent)
        else:
            chunks = tool_chunks(request, completion=True) if completion_tool(request) else TEXT
        if not request.get("stream"):
            self._send(200, json.dumps(assemble(chunks)).encode(), "application/json")
            return
        lines = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(200, lines.encode(), "text/event-stream")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    Handler.log_path = args.log
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
