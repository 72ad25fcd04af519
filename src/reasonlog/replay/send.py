"""One recorded request made ready for a provider (model, protocol, non-streamed) and sent with the user's key."""
from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import orjson

from ..providers import GEMINI, OPENAI_RESPONSES, Provider, protocol_of
from ..providers.translate import TARGETS, translate_request
from . import ReplayError

STREAM_KEYS = ("stream", "stream_options")
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Target:
    """Where a replay goes: a protocol, a model (None: each call's recorded model), a base URL and the key."""

    protocol: Provider
    model: str | None
    base_url: str
    key: str


@dataclass(frozen=True)
class Prepared:
    request: dict
    model: str | None
    notices: list[str]  # what the sent request leaves out of the recorded one


@dataclass(frozen=True)
class Sent:
    body: dict
    latency_ms: float
    request_id: str | None


def target_for(provider: str | None, recorded: Provider, model: str | None, base_url: str | None) -> Target:
    """The target of a replay: `provider` (anthropic, openai, gemini) or the recorded protocol; the key from the
    environment, or a one-line ReplayError naming the variable to set."""
    protocol = TARGETS[provider] if provider else recorded
    if provider == "openai" and recorded is OPENAI_RESPONSES:
        protocol = OPENAI_RESPONSES  # an OpenAI call stays on the API it was recorded on
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise ReplayError(f"--base-url {base_url!r}: expected http://host[:port] or https://host[:port]")
    names = protocol.key_variables  # recorded requests never hold a key (keys are masked)
    key = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if key is None:
        raise ReplayError(f"set {' or '.join(names)} to send to {protocol.name}: recorded keys are masked, so a"
                          " replay is sent with your own key")
    return Target(protocol, model, (base_url or protocol.base_url).rstrip("/"), key)


def prepare(request: dict, provider: str | None, target: Target, recorded_model: str | None = None) -> Prepared:
    """The recorded `request` (of `provider`, sent to `recorded_model`) as `target` takes it: translated when the
    protocol differs, on the target's model, and non-streamed (the answer is compared whole)."""
    recorded = protocol_of(provider, request)
    sent = request.get("model") if isinstance(request.get("model"), str) else None
    model = target.model or sent or recorded_model  # Gemini's bodies name no model: the call's column does
    notices: list[str] = []
    if recorded is target.protocol:
        body = dict(request, model=model) if model else dict(request)
    elif recorded is OPENAI_RESPONSES or target.protocol is OPENAI_RESPONSES:
        raise ReplayError("translating to or from the OpenAI Responses API is not supported; replay it on OpenAI")
    else:
        translated = translate_request(request, recorded, target.protocol, model)
        body, notices = translated.request, list(translated.notices)
    if any(body.pop(key, None) for key in STREAM_KEYS):
        notices.append("stream: sent non-streamed (the answer is compared whole)")
    if target.protocol is GEMINI:
        body.pop("model", None)  # Gemini names the model in the URL
    return Prepared(body, model, notices)


def send(target: Target, prepared: Prepared, timeout_s: float = TIMEOUT_S) -> Sent:
    """POST the request; the JSON answer, or a one-line ReplayError naming the URL and what went wrong."""
    url = target.base_url + target.protocol.path.format(model=prepared.model or "")
    request = urllib.request.Request(url, data=orjson.dumps(prepared.request), headers=_headers(target),
                                     method="POST")
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            raw, request_id = answer.read(), answer.headers.get("request-id") or answer.headers.get("x-request-id")
    except urllib.error.HTTPError as exc:
        raise ReplayError(f"{url}: HTTP {exc.code}: {_error_message(exc.read())}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ReplayError(f"{url}: {getattr(exc, 'reason', exc)}") from None

    latency_ms = (time.perf_counter() - start) * 1000
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ReplayError(f"{url}: the answer is not JSON ({raw[:80]!r})") from None
    if not isinstance(body, dict):
        raise ReplayError(f"{url}: expected a JSON object, got {type(body).__name__}")
    return Sent(body, latency_ms, request_id)


def _headers(target: Target) -> dict[str, str]:
    headers = {"content-type": "application/json", "user-agent": "reasonlog-replay"}
    return {**headers, **target.protocol.auth_headers(target.key)}


def _error_message(raw: bytes) -> str:
    """The provider's own error message when the body has one (all three nest it under `error`)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return " ".join(raw[:200].decode("utf-8", "replace").split()) or "no body"
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message or body).split())[:300]
