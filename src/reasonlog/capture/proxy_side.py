"""What a client says about its run beside its messages: its own session or thread id, and which of its calls
are made beside its loop (a title, a router's choice of model).

Each rule names the client it comes from (found by running the real CLIs through `reasonlog run`, docs/proxy.md);
`proxy_sessions` asks here and holds no client's field names.
"""
from __future__ import annotations

import re
from typing import Any

import orjson

SESSION_HEADER = "x-reasonlog-session"
_CLAUDE_CODE_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})$")

# Headers that name the client's own session: Claude Code (2.1) sends its session id, OpenCode (the AI SDK's
# providers, 1.18) `x-session-id: ses_…` on every call of a session, its title call included.
SESSION_ID_HEADERS = (("x-claude-code-session-id", "claude-code"), ("x-session-id", "session"))

# Calls beside the loop, told by their instructions: (role, text the system prompt holds).
SIDE_MARKERS = (
    ("title", "You are a title generator"),  # OpenCode's title of a new session
    ("router", "You are a specialized Task Routing AI"),  # Gemini CLI's choice of model for the request
)


def stated_key(request: dict, headers: dict[str, str]) -> tuple[str, str] | None:
    """What the client says the session is, as (kind, id); None when it says nothing."""
    header = headers.get(SESSION_HEADER)
    if header:
        return ("header", header)
    metadata = request.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user_id, str) and user_id:
        claude_code = claude_code_session(user_id)
        if claude_code:
            return ("claude-code", claude_code)
    for name, kind in SESSION_ID_HEADERS:
        if headers.get(name):
            return (kind, headers[name])
    thread = codex_thread(request)
    if thread:
        return ("codex", thread)
    if isinstance(user_id, str) and user_id:
        return ("user", user_id)
    user = request.get("user")
    return ("user", user) if isinstance(user, str) and user else None


def claude_code_session(user_id: str) -> str | None:
    """Claude Code's session id from `metadata.user_id`, in either of the forms its versions send."""
    if user_id.startswith("{"):
        try:
            stated = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return None
        found = stated.get("session_id") if isinstance(stated, dict) else None
        return found if isinstance(found, str) and found else None
    match = _CLAUDE_CODE_SESSION.search(user_id)
    return match.group(1) if match else None


def codex_thread(request: dict) -> str | None:
    """Codex's thread id: `client_metadata.thread_id`, else the `prompt_cache_key` it sets to the same id."""
    metadata = request.get("client_metadata")
    thread = metadata.get("thread_id") if isinstance(metadata, dict) else None
    if isinstance(thread, str) and thread:
        return thread
    key = request.get("prompt_cache_key")
    return key if isinstance(key, str) and key else None


def offers_tools(request: dict) -> bool:
    """Whether the request offers the model any tool (an agent's loop always does; its side calls do not)."""
    tools = request.get("tools")
    return isinstance(tools, list) and len(tools) > 0


def side_role(request: dict) -> str | None:
    """The role of a call the client makes beside its loop, known by its instructions; None for any other."""
    if offers_tools(request):
        return None
    text = _instructions(request)
    return next((role for role, marker in SIDE_MARKERS if marker in text), None)


def _instructions(request: dict) -> str:
    """The system prompt's text, wherever the protocol keeps it (a system message of OpenAI Chat included)."""
    found: list[Any] = [request.get(k) for k in ("system", "instructions", "systemInstruction")]
    messages = request.get("messages")
    if isinstance(messages, list):
        found += [m.get("content") for m in messages[:2] if isinstance(m, dict) and m.get("role") == "system"]
    return " ".join(_texts(value) for value in found if value)[:4000]


def _texts(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_texts(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_texts(value.get(k)) for k in ("text", "parts", "content") if value.get(k))
    return ""
