"""Parts: the pieces a message is made of, and how provider messages map onto them.

reasonlog keeps every message in the shape the provider or agent sent it (so a call can be
replayed exactly) and derives parts from it when reading. The JSON form of a part is the
Anthropic content-block shape, which most agent loops already use. What a protocol names (Chat's reasoning keys,
the Responses items that call a tool or configure the conversation) is read from its module in `providers`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .providers.openai_chat import REASONING_KEYS
from .providers.openai_responses import CALL_INPUTS, SETTING_TYPES
from .wire.rules import RecordError


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a message: text, thinking, a tool call, a tool result, an image or an opaque block."""

    kind: str
    text: str = ""
    tool_use_id: str | None = None
    name: str | None = None
    input: Any = None
    is_error: bool = False
    data: Any = None  # the provider's block, kept whole for opaque and image parts
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The Anthropic-shaped block for this part."""
        if self.kind == "text":
            return {"type": "text", "text": self.text}
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": self.text, **self.extra}
        if self.kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": self.data}
        if self.kind == "tool_use":
            return {"type": "tool_use", "id": self.tool_use_id, "name": self.name, "input": self.input}
        if self.kind == "tool_result":
            return {"type": "tool_result", "tool_use_id": self.tool_use_id, "content": self.text,
                    "is_error": self.is_error}
        return dict(self.data) if isinstance(self.data, dict) else {"type": self.kind, "data": self.data}


def text_part(text: str) -> Part:
    return Part("text", text=text)


def tool_use_part(tool_use_id: Any, name: Any, input: Any) -> Part:
    return Part("tool_use", tool_use_id=_ident(tool_use_id), name=_ident(name), input=input)


def check_block(block: Any, where: str) -> dict:
    """Validate one content block given to the recorder; unknown kinds must be wrapped as opaque."""
    if isinstance(block, Part):
        return block.to_dict()
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, dict):
        raise RecordError(f"{where}: expected a Part, a str or a content-block dict, got {type(block).__name__}")
    kind = block.get("type")
    if kind not in _BLOCK_TYPES:
        raise RecordError(f"{where}: unknown part kind {kind!r}; expected one of "
                          f"{', '.join(sorted(_BLOCK_TYPES))}, or wrap a provider block as "
                          f"Part('opaque', data=block)")
    return block


# Block types accepted as-is in a response: ours plus the provider blocks we know to keep opaque.
_BLOCK_TYPES = {
    "text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use",
    "mcp_tool_result", "container_upload", "tool_search_tool_result", "opaque",
}


def parts_of(message: Any, xml_tools: tuple[str, ...] | list[str] = (), call_id: str | None = None) -> list[Part]:
    """Normalise one message (Anthropic, OpenAI Chat, OpenAI Responses item, or plain text) to parts.

    `xml_tools` names tags that a model writes inside its text to call tools
    (`<semantic_search>…</semantic_search>`); those become tool_use parts (see `xml_tool_calls`).
    """
    parts = _parts_of_message(message)
    if not xml_tools:
        return parts
    seen: dict[str, int] = {}
    return [q for p in parts
            for q in (xml_tool_calls(p.text, xml_tools, call_id, seen) if p.kind == "text" else [p])]


def xml_tool_calls(text: str, tags, call_id: str | None = None, seen: dict | None = None) -> list[Part]:
    """Split text into text parts and tool_use parts for each `<tag …>…</tag>` of the named tags.

    The input is the element's child elements as a dict when it has some, else `{"text": inner}`.
    Ids are `<call_id>:<tag>:<n>`, counting that tag's calls in the response from 0, so an agent
    can record their results with `session.tool_result(id, ...)`.
    """
    pattern = re.compile(r"<({})(?:\s[^>]*)?>(.*?)</\1\s*>".format("|".join(re.escape(t) for t in tags)), re.DOTALL)
    out, pos, seen = [], 0, {} if seen is None else seen
    for m in pattern.finditer(text):
        if text[pos:m.start()].strip():
            out.append(text_part(text[pos:m.start()]))
        tag, inner = m.group(1), m.group(2)
        n = seen[tag] = seen.get(tag, -1) + 1
        children = dict(_CHILD.findall(inner))
        out.append(tool_use_part(f"{call_id or ''}:{tag}:{n}", tag, children or {"text": inner.strip()}))
        pos = m.end()
    if text[pos:].strip() or not out:
        out.append(text_part(text[pos:]))
    return out


_CHILD = re.compile(r"<([A-Za-z_][\w.-]*)(?:\s[^>]*)?>(.*?)</\1\s*>", re.DOTALL)


def _parts_of_message(message: Any) -> list[Part]:
    if isinstance(message, str):
        return [text_part(message)]
    if not isinstance(message, dict):
        return [Part("opaque", data=message)]
    if "type" in message and ("role" not in message or message["type"] in SETTING_TYPES):
        return _parts_of_block(message)
    if isinstance(message.get("parts"), list) and "content" not in message:  # Gemini `contents` entry
        return [p for part in message["parts"] for p in _parts_of_gemini(part)]
    parts = _parts_of_content(message.get("content"))
    reasoning = next((message[k] for k in REASONING_KEYS if message.get(k)), None)
    if isinstance(reasoning, str) and reasoning:
        parts.insert(0, Part("thinking", text=reasoning))
    for call in _list(message.get("tool_calls")):
        fn = call.get("function") if isinstance(call, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        parts.append(tool_use_part(call.get("id") if isinstance(call, dict) else None, fn.get("name"),
                                   _json_or_text(fn.get("arguments"))))
    if message.get("role") == "tool":
        text = "".join(p.text for p in parts)
        return [Part("tool_result", tool_use_id=_ident(message.get("tool_call_id")), text=text)]
    return parts


def _parts_of_content(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_part(content)] if content else []
    if isinstance(content, list):
        return [p for block in content for p in _parts_of_block(block)]
    return [Part("opaque", data=content)]


def _parts_of_block(block: Any) -> list[Part]:
    if isinstance(block, str):
        return [text_part(block)]
    if not isinstance(block, dict):
        return [Part("opaque", data=block)]
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text"):
        return [text_part(_as_text(block.get("text")))]
    if kind == "thinking":
        extra = {"signature": block["signature"]} if "signature" in block else {}
        return [Part("thinking", text=_as_text(block.get("thinking")), extra=extra)]
    if kind == "redacted_thinking":
        return [Part("redacted_thinking", data=block.get("data"))]
    if kind == "reasoning":  # OpenAI Responses reasoning item
        summary = "\n".join(_as_text(s.get("text")) for s in _list(block.get("summary")) if isinstance(s, dict))
        return [Part("thinking", text=summary, data=block)]
    if kind == "tool_use":
        return [tool_use_part(block.get("id"), block.get("name"), block.get("input"))]
    if kind == "function_call":  # OpenAI Responses
        return [tool_use_part(block.get("call_id"), block.get("name"), _json_or_text(block.get(CALL_INPUTS[kind])))]
    if kind == "custom_tool_call":  # OpenAI Responses custom (freeform) tool: Codex's `exec` takes JavaScript
        return [tool_use_part(block.get("call_id"), block.get("name"), block.get(CALL_INPUTS[kind]))]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [Part("tool_result", tool_use_id=_ident(block.get("call_id")), text=_as_text(block.get("output")))]
    if kind == "web_search_call":  # a search the Responses API ran itself: a tool step, its query and status
        action = block.get("action")
        # the pages it found are many, and kept in the raw payload and the message
        step = {k: v for k, v in action.items() if k != "sources"} if isinstance(action, dict) else {}
        if "status" in block:
            step["status"] = block["status"]
        return [tool_use_part(block.get("id"), "web_search", step), _web_search_result(block, action)]
    if kind in SETTING_TYPES:
        return [text_part(_NOTE_ITEMS.get(kind, _setting_note)(block))]
    if kind == "tool_result":
        return [Part("tool_result", tool_use_id=_ident(block.get("tool_use_id")), text=_as_text(block.get("content")),
                     is_error=bool(block.get("is_error")))]
    if kind == "message":  # OpenAI Responses output message
        return _parts_of_content(block.get("content"))
    if kind in ("image", "image_url", "input_image"):
        return [Part("image", data=block)]
    return [Part("opaque", name=_ident(kind), data=block)]


def _web_search_result(block: dict, action: Any) -> Part:
    """What a web search step found, as its result: the pages it names (a search's sources, the page it opened),
    else its status."""
    action = action if isinstance(action, dict) else {}
    pages = [_as_text(s["url"]) for s in _list(action.get("sources")) if isinstance(s, dict) and s.get("url")]
    pages = pages or ([action["url"]] if isinstance(action.get("url"), str) else [])
    status = block.get("status")
    return Part("tool_result", tool_use_id=_ident(block.get("id")), name="web_search",
                text="\n".join(pages) or _as_text(status), is_error=status in ("failed", "incomplete"))


def _tool_names(tools: Any) -> list[str]:
    """The names of the tools listed (those inside a namespace as `namespace.name`)."""
    names: list[str] = []
    for tool in _list(tools):
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            names += [f"{tool.get('name')}.{n}" for n in _tool_names(tool.get("tools"))]
        elif isinstance(tool, dict):
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _settings(block: dict) -> str:
    return orjson.dumps({k: v for k, v in block.items() if k not in ("type", "id")}).decode()


def _setting_note(block: dict) -> str:
    """A Responses input item that configures the conversation rather than says something in it (Codex 0.171, its
    `configuration_update`), as a note: its kind and settings."""
    return f"{str(block.get('type')).replace('_', ' ')}: {_settings(block)}"


_NOTE_ITEMS = {"additional_tools": lambda b: f"tools offered: {', '.join(_tool_names(b.get('tools')))}"}


def _parts_of_gemini(part: Any) -> list[Part]:
    """One part of a Gemini message: text (a thought when `thought` is set), functionCall, functionResponse."""
    if not isinstance(part, dict):
        return [Part("opaque", data=part)]
    if isinstance(part.get("text"), str):
        return [Part("thinking", text=part["text"]) if part.get("thought") else text_part(part["text"])]
    call, reply = part.get("functionCall"), part.get("functionResponse")
    if isinstance(call, dict):
        return [tool_use_part(call.get("id"), call.get("name"), call.get("args"))]
    if isinstance(reply, dict):
        return [Part("tool_result", tool_use_id=_ident(reply.get("id")), name=_ident(reply.get("name")),
                     text=_as_text(reply.get("response")))]
    return [Part("opaque", data=part)]


# Stored messages are any JSON the agent sent; reading must never fail on one, whatever its shape.


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _ident(value: Any) -> str | None:
    """An id or a name as text: readers pair tool calls by it, so it must be hashable and printable."""
    return value if value is None or isinstance(value, str) else _as_text(value)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p.text for b in value for p in _parts_of_block(b) if p.text)
    return orjson.dumps(value).decode()


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


# Keys whose string values are identifiers or encodings, not words anyone searches for.
_UNSEARCHED_KEYS = frozenset({
    "type", "id", "tool_use_id", "tool_call_id", "call_id", "role", "signature", "data", "media_type",
    "encrypted_content", "cache_control", "source", "image_url", "status",
})


def searchable_text(value: Any) -> str:
    """Every human-readable string inside a message, joined by newlines, for the full-text index."""
    out: list[str] = []
    _collect_text(value, out)
    return "\n".join(out)


def _collect_text(value: Any, out: list[str]) -> None:
    """The strings of `value` in order. The exact JSON types are told by `type`, and a string inside a dict or a
    list is taken without a call of its own (most of a message's leaves). Anything else (a subclass, an SDK
    object) goes to `_collect_any`, the general walk (tests/test_search_text_rules.py holds this to it)."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if key not in _UNSEARCHED_KEYS:
                if type(item) is str:
                    out.append(item)
                else:
                    _collect_text(item, out)
    elif kind is list:
        for item in value:
            if type(item) is str:
                out.append(item)
            else:
                _collect_text(item, out)
    elif kind is str:
        out.append(value)
    elif kind is int or kind is float:
        out.append(str(value))
    elif value is not None and kind is not bool:
        _collect_any(value, out)


def _collect_any(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _UNSEARCHED_KEYS:
                _collect_text(item, out)
    elif isinstance(value, list):
        for item in value:
            _collect_text(item, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))
    elif hasattr(value, "model_dump"):  # an SDK object handed to the recorder as it was
        _collect_text(value.model_dump(mode="json", exclude_unset=True, warnings=False), out)
