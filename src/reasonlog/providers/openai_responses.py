"""OpenAI Responses: `POST /v1/responses`, `instructions` beside `input`, output *items* that agents append to
their input one by one, and `previous_response_id` chains in which the server holds the conversation."""
from __future__ import annotations

from typing import Any, TypeGuard

from ..wire.usage import getter
from . import openai_chat
from .common import Unwrapped, dump
from .provider import Provider

NAME = "openai"
BASE_URL = "https://api.openai.com"
PATH = "/v1/responses"
MESSAGES = "input"
SYSTEM = "instructions"
KEY_HEADERS = ("authorization",)
CHAIN = "previous_response_id"

# Output item types: a message, reasoning, and every tool call (`*_call`), plus the few others the API has.
ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "web_search_call", "file_search_call",
                        "code_interpreter_call", "computer_call", "image_generation_call", "local_shell_call",
                        "mcp_call", "custom_tool_call", "mcp_list_tools", "mcp_approval_request", "compaction"})

# What a client adds to the items it sends back, which says nothing of what they say (Codex 0.171 adds its turn).
CLIENT_KEYS = frozenset({"internal_chat_message_metadata_passthrough"})
# Item types that call a tool, and the field holding the call's input.
CALL_INPUTS = {"function_call": "arguments", "custom_tool_call": "input", "local_shell_call": "action"}

usage = openai_chat.usage  # the same counters under other names (`input_tokens`, `input_tokens_details`)


def is_item(value: object) -> bool:
    """An output item as an agent appends it to `input` (a message item has a role; no block has these types)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    return isinstance(kind, str) and (kind in ITEM_TYPES or kind.endswith("_call")) and \
        (kind != "message" or "role" in value)


def reader_message(item: dict) -> dict:
    """An input or output item as a reader reads it: without what the client adds (`CLIENT_KEYS`), a function
    call's arguments parsed (a client may send them back re-serialised)."""
    if not isinstance(item.get("type"), str):
        return item
    out = {k: v for k, v in item.items() if k not in CLIENT_KEYS} if CLIENT_KEYS.intersection(item) else item
    if out.get("type") == "function_call" and isinstance(out.get("arguments"), str):
        out = {**out, "arguments": openai_chat.parsed(out["arguments"])}
    return out


# Input items that configure the conversation (Codex 0.171) rather than say something in it.
SETTING_TYPES = frozenset({"configuration_update", "additional_tools"})


def item_role(item: dict) -> str | None:
    """Who an item without a role stands for: the model's calls and reasoning, a tool's output, a setting."""
    kind = item.get("type")
    if not isinstance(kind, str):
        return None
    if kind in SETTING_TYPES:
        return "system"
    if kind.endswith("_output"):
        return "tool"
    return "assistant" if kind in ITEM_TYPES or kind.endswith("_call") else None


def is_output(items: object) -> bool:
    """A non-empty list of output items, which no Anthropic or reasonlog content block list is."""
    return isinstance(items, (list, tuple)) and bool(items) and all(map(is_item, items))


def is_body(body: dict) -> bool:
    output = body.get("output")
    return isinstance(output, list) and (body.get("object") == "response" or is_output(output))


def unwrap(body: dict) -> Unwrapped | None:
    """A Responses body: its output items as the assistant message; None for any other body."""
    if not is_body(body):
        return None
    raw = body.get("usage")
    return Unwrapped({"role": "assistant", "content": body["output"]}, usage(raw) if isinstance(raw, dict) else None,
                     stop_reason(body), body.get("id"))


def stop_reason(body: dict) -> str | None:
    """The Responses API has no finish reason; say what Chat would: tool calls, a cut-off, or its status."""
    output = body.get("output") or []
    if any(isinstance(item, dict) and item.get("type") == "function_call" for item in output):
        return "tool_calls"
    incomplete = body.get("incomplete_details")
    reason = incomplete.get("reason") if isinstance(incomplete, dict) else None
    status = body.get("status")
    return reason if isinstance(reason, str) else status if isinstance(status, str) else None


def curl(body: str) -> str:
    return (f"curl {BASE_URL}{PATH} -H 'content-type: application/json' -H \"Authorization: Bearer $OPENAI_API_KEY\""
            f" \\\n  -d {body}")


PYTHON_CALL = "openai.OpenAI().responses.create"


# ---------------------------------------------------------------------- streams

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


MAX_PLACES = 4096  # output items, or parts of one, a stream may place

class Stream:
    """Folds Responses stream events (dicts as sent, or the SDK's event objects) into the response; the terminal
    event carries it whole, and a stream cut short keeps what arrived, item by item.

    `add` says whether the event carried output (a `*.delta`: the first such is the first token).
    """

    def __init__(self) -> None:
        self.response: dict = {}
        self.items: dict[int, dict] = {}
        self.ended = False

    def add(self, event: object) -> bool:
        get = getter(event)
        kind = get("type")
        if not isinstance(kind, str):
            return False
        if kind.endswith(".delta"):
            self._delta(kind, get)
            return True
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = dump(get("item"))
            if _place(get("output_index")) and isinstance(item, dict):
                self.items[get("output_index")] = item
        elif kind == "response.content_part.added":
            self._slot(get, "content", get("content_index"), dump(get("part")))
        elif kind == "response.reasoning_summary_part.added":
            self._slot(get, "summary", get("summary_index"), dump(get("part")))
        elif kind in TERMINAL or kind in ("response.created", "response.in_progress"):
            response = dump(get("response"))
            self.response = response if isinstance(response, dict) else self.response
            self.ended = kind in TERMINAL
        return False

    def _slot(self, get: Any, key: str, index: object, value: object) -> dict | None:
        """The part at `index` of the item's `key` list, made from `value` (and the ones before it) if new; None
        where the event's places are not places."""
        item = self.items.setdefault(get("output_index"), {}) if _place(get("output_index")) else None
        if item is None or not _place(index) or not isinstance(item.setdefault(key, []), list):
            return None
        parts = item[key]
        while len(parts) <= index:
            parts.append(dict(value) if isinstance(value, dict) else {})
        return parts[index] if isinstance(parts[index], dict) else None

    def _delta(self, kind: str, get: Any) -> None:
        delta = get("delta")
        if not isinstance(delta, str):
            return
        if kind == "response.output_text.delta":
            part = self._slot(get, "content", get("content_index"), {"type": "output_text", "text": ""})
        elif kind == "response.reasoning_summary_text.delta":
            part = self._slot(get, "summary", get("summary_index"), {"type": "summary_text", "text": ""})
        elif kind == "response.function_call_arguments.delta" and _place(get("output_index")):
            part = self.items.setdefault(get("output_index"), {"type": "function_call"})
            part["arguments"] = _text(part.get("arguments")) + delta
            return
        else:
            return
        if part is not None:
            part["text"] = _text(part.get("text")) + delta

    def body(self) -> dict:
        """The response so far."""
        raw = dict(self.response)
        if not self.ended:
            raw["output"] = [self.items[i] for i in sorted(self.items)]
        return raw


def _place(index: object) -> TypeGuard[int]:
    """Whether a stream event's index is one a response could have (a malformed one must not grow a list)."""
    return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < MAX_PLACES


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


PROVIDER = Provider(
    api="openai_responses", name=NAME, base_url=BASE_URL, path=PATH, path_suffixes=("/responses",),
    messages=MESSAGES, system=SYSTEM, key_headers=KEY_HEADERS, client_headers=(), key_variables=("OPENAI_API_KEY",),
    usage=usage, unwrap=unwrap, reader_message=reader_message, Stream=Stream, error_body=openai_chat.error_body,
    auth_headers=openai_chat.auth_headers, curl=lambda body, model: curl(body), python_call=PYTHON_CALL)
