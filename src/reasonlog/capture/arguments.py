"""What the recorder's methods are given, made into the values an event holds: the request body, the
response message, usage and an error. Bad arguments raise `RecordError` naming the argument."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import providers
from ..model import Usage
from ..parts import check_block
from ..providers import openai_responses
from ..providers.common import Unwrapped
from ..wire.rules import RecordError


def build_request(model, messages, system, tools, params) -> dict:
    if messages is None:
        messages = []
    elif type(messages) is not list and type(messages) is not tuple:
        # Any other iterable is refused: a generator would be used up here, and a str is not a message list.
        raise RecordError(f"messages: expected a list of messages, got {type(messages).__name__}")
    if params is not None and not isinstance(params, dict):
        raise RecordError(f"params: expected a dict, got {type(params).__name__}")
    request = dict(params) if params else {}
    if model is not None:
        request.setdefault("model", model)
    if system is not None:
        request["system"] = system
    if tools is not None:
        if not isinstance(tools, (list, tuple)):
            raise RecordError(f"tools: expected a list of tool schemas, got {type(tools).__name__}")
        request["tools"] = list(tools)
    request["messages"] = list(messages)
    return request


def snapshot(request: dict) -> dict:
    """A copy of the request whose message list the agent may go on appending to."""
    request = request.copy()
    for key in ("messages", "input"):
        value = request.get(key)
        if type(value) is list:
            request[key] = value.copy()
    return request


def response_message(response: Any) -> dict | None:
    """The assistant message as the agent will append it to its history."""
    if response is None or (type(response) is dict and "role" in response):
        return response
    if hasattr(response, "model_dump"):  # an SDK message object: the writer thread turns it into JSON
        return response
    if isinstance(response, str):
        return {"role": "assistant", "content": [{"type": "text", "text": response}]}
    if isinstance(response, (list, tuple)):
        if openai_responses.is_output(response):  # Responses output items: kept as the adapter keeps them
            return {"role": "assistant", "content": list(response)}
        return {"role": "assistant", "content": [check_block(b, f"response[{i}]") for i, b in enumerate(response)]}
    if isinstance(response, dict) and openai_responses.is_body(response):
        return {"role": "assistant", "content": response["output"]}
    if isinstance(response, dict):
        raise RecordError("response: a dict must be a message with a 'role'; pass content blocks as a list")
    raise RecordError(f"response: expected a message dict, a list of parts or a str, got {type(response).__name__}")


def unwrap_response(response: dict) -> tuple[dict, Usage | None, Any, Any] | None:
    """(message, usage, stop reason, id) of an Anthropic Message, an OpenAI chat completion, an OpenAI Responses
    body or a Gemini response (`providers.unwrap`); None otherwise.

    Agents append the *message* to their history, so that is what the conversation holds; the
    response's id, stop reason and usage are the call's, and the whole response is kept as raw."""
    return providers.unwrap(response)


def answer_fields(body: Any, unwrap: Callable[[dict], Unwrapped | None] = providers.unwrap) -> dict[str, Any]:
    """A provider's whole response body as a call's fields (the one place the proxy and replay make them): the message
    the agent appends (`response`), `usage`, `stop_reason` and `provider_message_id` (as text); {} when `body` is
    no response of a protocol reasonlog knows (or of the one whose `unwrap` is given)."""
    unwrapped = unwrap(body) if isinstance(body, dict) else None
    if unwrapped is None:
        return {}
    return {"response": unwrapped.message, "usage": unwrapped.usage, "stop_reason": _text(unwrapped.stop_reason),
            "provider_message_id": _text(unwrapped.id)}


def _text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def usage_of(usage: Any) -> Usage:
    if isinstance(usage, dict):
        return Usage.from_dict(usage)
    raise RecordError(f"usage: expected a Usage or a dict, got {type(usage).__name__}")


def error_of(error: Any) -> dict | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        return {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, dict):
        return error
    return {"type": "error", "message": str(error)}
