"""Reading a recorded request of each protocol into the neutral form (translate_form.Conversation), naming what
only that provider understands."""
from __future__ import annotations

from ..parts import parts_of
from .translate_form import Conversation

_ANTHROPIC_PARAMS = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                     "stop_sequences": "stop"}
_ANTHROPIC_ONLY = ("top_k", "thinking", "metadata", "service_tier", "container", "mcp_servers", "context_management")


def read_anthropic(request: dict) -> Conversation:
    conv = Conversation()
    system = request.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        _note_cache(conv, block)
        conv.system.append(block if isinstance(block, str) else str(block.get("text", "")))
    for message in request.get("messages") or []:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            _note_cache(conv, block)
        conv.messages.append((message.get("role", "user"), parts_of(message)))
    for tool in request.get("tools") or []:
        _read_anthropic_tool(conv, tool)
    _read_params(conv, request, _ANTHROPIC_PARAMS, _ANTHROPIC_ONLY, "Anthropic")
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        kind = str(choice.get("type"))
        conv.params["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(
            kind, {"name": choice.get("name")})
    return conv


def _read_anthropic_tool(conv: Conversation, tool: dict) -> None:
    _note_cache(conv, tool)
    if tool.get("type") not in (None, "custom"):  # web_search_*, bash_*, code_execution_*, ... run by Anthropic
        conv.drop(f"Anthropic server tool {tool.get('name') or tool.get('type')} ({tool.get('type')})")
        return
    conv.tools.append({"name": tool.get("name"), "description": tool.get("description"),
                       "schema": tool.get("input_schema") or {"type": "object"}})


def _note_cache(conv: Conversation, block: object) -> None:
    if isinstance(block, dict) and "cache_control" in block:
        conv.drop("cache_control (Anthropic prompt caching mark)")


def _read_params(conv: Conversation, request: dict, names: dict, only: tuple, provider: str) -> None:
    for key, neutral in names.items():
        if request.get(key) is not None:
            conv.params[neutral] = request[key]
    for key in only:
        if key in request:
            conv.drop(f"{provider} parameter {key}")


_OPENAI_PARAMS = {"max_tokens": "max_tokens", "max_completion_tokens": "max_tokens", "temperature": "temperature",
                  "top_p": "top_p", "stop": "stop"}
_OPENAI_ONLY = ("frequency_penalty", "presence_penalty", "seed", "response_format", "logprobs", "top_logprobs",
                "n", "logit_bias", "parallel_tool_calls", "reasoning_effort", "user", "store", "modalities",
                "prediction", "audio", "web_search_options", "verbosity")


def read_openai(request: dict) -> Conversation:
    conv = Conversation()
    for message in request.get("messages") or []:
        role = message.get("role")
        if role in ("system", "developer"):
            conv.system.append("\n".join(p.text for p in parts_of(message) if p.kind == "text"))
        else:
            conv.messages.append(("assistant" if role == "assistant" else "user", parts_of(message)))
    for tool in request.get("tools") or []:
        fn = tool.get("function") if tool.get("type") == "function" else None
        if not isinstance(fn, dict):
            conv.drop(f"OpenAI built-in tool {tool.get('type')}")
            continue
        conv.tools.append({"name": fn.get("name"), "description": fn.get("description"),
                           "schema": fn.get("parameters") or {"type": "object"}})
    _read_params(conv, request, _OPENAI_PARAMS, _OPENAI_ONLY, "OpenAI")
    choice = request.get("tool_choice")
    if isinstance(choice, str):
        conv.params["tool_choice"] = choice
    elif isinstance(choice, dict):
        conv.params["tool_choice"] = {"name": (choice.get("function") or {}).get("name")}
    return conv


def read_gemini(request: dict) -> Conversation:
    conv = Conversation()
    system = request.get("system_instruction") or request.get("systemInstruction")
    if isinstance(system, dict):
        conv.system.append("\n".join(p.text for p in parts_of(system) if p.kind == "text"))
    for content in request.get("contents") or []:
        conv.messages.append(("assistant" if content.get("role") == "model" else "user", parts_of(content)))
    for group in request.get("tools") or []:
        for fn in group.get("functionDeclarations") or group.get("function_declarations") or []:
            conv.tools.append({"name": fn.get("name"), "description": fn.get("description"),
                               "schema": fn.get("parameters") or fn.get("parametersJsonSchema") or {"type": "object"}})
        for other in set(group) - {"functionDeclarations", "function_declarations"}:
            conv.drop(f"Gemini built-in tool {other}")
    config = request.get("generationConfig") or request.get("generation_config") or {}
    _read_params(conv, config, {"maxOutputTokens": "max_tokens", "temperature": "temperature", "topP": "top_p",
                                "stopSequences": "stop"}, ("topK", "thinkingConfig", "responseMimeType"), "Gemini")
    return conv
