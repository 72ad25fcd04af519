"""Writing the neutral form (translate_form.Conversation) as a request of each protocol. What a protocol has no
place for is named on the conversation (`drop`), never left out silently."""
from __future__ import annotations

import re
from typing import Any

import orjson

from ..parts import Part
from .translate_form import Conversation, arguments_object, arguments_text, name_untranslatable

DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens; a request from elsewhere may not carry one


# ------------------------------------------------------------------------------------------ OpenAI Chat


def write_openai(conv: Conversation, model: str | None) -> dict:
    messages: list[dict] = [{"role": "system", "content": text} for text in conv.system]
    for role, parts in conv.messages:
        messages += _openai_assistant(conv, parts) if role == "assistant" else _openai_user(conv, parts)
    request: dict[str, Any] = {"model": model, "messages": messages}
    if conv.tools:
        request["tools"] = [{"type": "function", "function": _without_none(
            name=t["name"], description=t["description"], parameters=t["schema"])} for t in conv.tools]
    params = conv.params
    if "max_tokens" in params:  # OpenAI's reasoning models refuse max_tokens; the servers that copy it take this
        request["max_completion_tokens"] = params["max_tokens"]
    request.update({k: params[k] for k in ("temperature", "top_p", "stop") if k in params})
    choice = params.get("tool_choice")
    if choice is not None:
        request["tool_choice"] = choice if isinstance(choice, str) else \
            {"type": "function", "function": {"name": choice["name"]}}
    return request


def _openai_user(conv: Conversation, parts: list[Part]) -> list[dict]:
    """Tool results become `tool` messages (first, as Anthropic puts them first); the rest one user message."""
    out: list[dict] = []
    content: list[dict] = []
    for part in parts:
        if part.kind == "tool_result":
            if part.is_error:
                conv.drop("is_error on a tool result (OpenAI tool messages have no error flag)")
            out.append({"role": "tool", "tool_call_id": part.tool_use_id, "content": part.text})
        elif part.kind == "text":
            content.append({"type": "text", "text": part.text})
        elif part.kind == "image" and _image_url(part.data):
            content.append({"type": "image_url", "image_url": {"url": _image_url(part.data)}})
        else:
            name_untranslatable(conv, part, "OpenAI")
    if content:
        out.append({"role": "user", "content": _openai_content(content)})
    return out


def _openai_assistant(conv: Conversation, parts: list[Part]) -> list[dict]:
    texts = [{"type": "text", "text": p.text} for p in parts if p.kind == "text"]
    calls = [{"id": p.tool_use_id, "type": "function", "function": {"name": p.name, "arguments": arguments_text(
        p.input)}} for p in parts if p.kind == "tool_use"]
    for part in parts:
        if part.kind not in ("text", "tool_use"):
            name_untranslatable(conv, part, "OpenAI")
    message: dict[str, Any] = {"role": "assistant", "content": _openai_content(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _openai_content(blocks: list[dict]) -> str | list[dict]:
    """One text block as a string (what most callers send); several blocks as the list of parts."""
    return blocks[0]["text"] if len(blocks) == 1 and blocks[0]["type"] == "text" else blocks


def _image_url(block: object) -> str | None:
    """An Anthropic image block's source as a URL (a data URL for base64); None for other shapes."""
    source = block.get("source") if isinstance(block, dict) else None
    if not isinstance(source, dict):
        url = (block.get("image_url") or {}) if isinstance(block, dict) else {}
        return url.get("url") if isinstance(url, dict) else None
    if source.get("type") == "base64":
        return f"data:{source.get('media_type')};base64,{source.get('data')}"
    return source.get("url") if source.get("type") == "url" else None


# ---------------------------------------------------------------------------------------- Anthropic


def write_anthropic(conv: Conversation, model: str | None) -> dict:
    request: dict[str, Any] = {"model": model}
    if conv.system:
        request["system"] = conv.system[0] if len(conv.system) == 1 else \
            [{"type": "text", "text": text} for text in conv.system]
    request["messages"] = _anthropic_messages(conv)
    if conv.tools:
        request["tools"] = [_without_none(name=t["name"], description=t["description"], input_schema=t["schema"])
                            for t in conv.tools]
    params = conv.params
    if "max_tokens" not in params:
        conv.drop(f"max_tokens: the recorded request set none; {DEFAULT_MAX_TOKENS} sent (Anthropic requires it)")
    request["max_tokens"] = params.get("max_tokens", DEFAULT_MAX_TOKENS)
    request.update({k: params[k] for k in ("temperature", "top_p") if k in params})
    if "stop" in params:
        request["stop_sequences"] = [params["stop"]] if isinstance(params["stop"], str) else params["stop"]
    choice = params.get("tool_choice")
    if choice is not None:
        request["tool_choice"] = {"type": {"required": "any"}.get(choice, choice)} if isinstance(choice, str) else \
            {"type": "tool", "name": choice["name"]}
    return request


def _anthropic_messages(conv: Conversation) -> list[dict]:
    """Messages with blocks; OpenAI's tool messages join the user message after them, as Anthropic wants tool
    results inside the next user turn."""
    out: list[dict] = []
    for role, parts in conv.messages:
        blocks = [b for b in (_anthropic_block(conv, p) for p in parts) if b is not None]
        previous = out[-1] if out else None
        if previous and role == "user" == previous["role"] and all(
                b.get("type") == "tool_result" for b in previous["content"]):
            previous["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    for message in out:
        content = message["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            message["content"] = content[0]["text"]
    return out


def _anthropic_block(conv: Conversation, part: Part) -> dict | None:
    if part.kind == "text":
        return {"type": "text", "text": part.text}
    if part.kind == "tool_use":
        return {"type": "tool_use", "id": part.tool_use_id, "name": part.name, "input": arguments_object(part.input)}
    if part.kind == "tool_result":
        block = {"type": "tool_result", "tool_use_id": part.tool_use_id, "content": part.text}
        return {**block, "is_error": True} if part.is_error else block
    url = _image_url(part.data) if part.kind == "image" else None
    if url:
        found = re.match(r"data:([^;]+);base64,(.*)", url, re.DOTALL)
        return {"type": "image", "source": {"type": "base64", "media_type": found[1], "data": found[2]} if found
                else {"type": "url", "url": url}}
    name_untranslatable(conv, part, "Anthropic")
    return None


# ------------------------------------------------------------------------------------------------ Gemini


def write_gemini(conv: Conversation, model: str | None) -> dict:
    """A generateContent body (the model goes in the URL, not the body)."""
    names = {p.tool_use_id: p.name for _, parts in conv.messages for p in parts if p.kind == "tool_use"}
    request: dict[str, Any] = {}
    if conv.system:
        request["system_instruction"] = {"parts": [{"text": text} for text in conv.system]}
    request["contents"] = [{"role": "model" if role == "assistant" else "user",
                            "parts": [g for g in (_gemini_part(conv, p, names) for p in parts) if g is not None]}
                           for role, parts in conv.messages]
    if conv.tools:
        request["tools"] = [{"functionDeclarations": [_without_none(
            name=t["name"], description=t["description"], parametersJsonSchema=t["schema"]) for t in conv.tools]}]
    config = {gemini_key: conv.params[key] for key, gemini_key in (
        ("max_tokens", "maxOutputTokens"), ("temperature", "temperature"), ("top_p", "topP")) if key in conv.params}
    if "stop" in conv.params:
        config["stopSequences"] = [conv.params["stop"]] if isinstance(conv.params["stop"], str) else conv.params["stop"]
    if config:
        request["generationConfig"] = config
    choice = conv.params.get("tool_choice")
    if choice is not None:
        mode = {"auto": "AUTO", "required": "ANY", "none": "NONE"}.get(choice, "ANY") if isinstance(choice, str) \
            else "ANY"
        calling: dict[str, Any] = {"mode": mode}
        if isinstance(choice, dict):
            calling["allowedFunctionNames"] = [choice["name"]]
        request["toolConfig"] = {"functionCallingConfig": calling}
    return request


def _gemini_part(conv: Conversation, part: Part, names: dict) -> dict | None:
    if part.kind == "text":
        return {"text": part.text}
    if part.kind == "tool_use":
        return {"functionCall": _without_none(id=part.tool_use_id, name=part.name, args=arguments_object(part.input))}
    if part.kind == "tool_result":
        try:
            response = orjson.loads(part.text)
        except orjson.JSONDecodeError:
            response = None
        body = response if isinstance(response, dict) else {"content": part.text}
        return {"functionResponse": _without_none(id=part.tool_use_id, name=names.get(part.tool_use_id) or part.name,
                                                  response=body)}
    name_untranslatable(conv, part, "Gemini")
    return None


def _without_none(**fields: object) -> dict:
    return {k: v for k, v in fields.items() if v is not None}
