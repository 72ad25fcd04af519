"""Gemini `generateContent`: `contents` with `parts`, `system_instruction`, usage whose prompt count includes
cached tokens and whose thoughts come beside the candidates."""
from __future__ import annotations

from ..model import Usage
from ..wire.usage import getter
from .common import Unwrapped
from .provider import Provider

NAME = "google"
BASE_URL = "https://generativelanguage.googleapis.com"
PATH = "/v1beta/models/{model}:generateContent"
MESSAGES = "contents"
SYSTEM = "system_instruction"
KEY_HEADERS = ("x-goog-api-key",)


def usage(raw: object) -> Usage:
    """Disjoint counters from `usageMetadata`: cached tokens split off from the prompt; thoughts are output, as
    reasoning."""
    get = getter(raw)
    prompt, cached = get("promptTokenCount") or 0, get("cachedContentTokenCount") or 0
    thoughts = get("thoughtsTokenCount") or 0
    output = (get("candidatesTokenCount") or 0) + thoughts
    return Usage(input_tokens=max(prompt - cached, 0), output_tokens=output, cache_read_tokens=cached,
                 reasoning_tokens=thoughts)


def unwrap(body: dict) -> Unwrapped | None:
    """A generateContent body (its first candidate's content); None for any other body."""
    candidates = body.get("candidates")
    if not (isinstance(candidates, list) and candidates and isinstance(candidates[0], dict)
            and isinstance(candidates[0].get("content"), dict)):
        return None
    raw = body.get("usageMetadata")
    return Unwrapped(candidates[0]["content"], usage(raw) if isinstance(raw, dict) else None,
                     candidates[0].get("finishReason"), body.get("responseId"))


# Part fields the client adds when it sends a reply back: Gemini CLI signs a turn's first function call
# (`thoughtSignature`, "skip_thought_signature_validator" when the model gave none).
CLIENT_PART_KEYS = frozenset({"thoughtSignature", "thought_signature"})


def reader_message(message: dict) -> dict:
    """A `contents` entry as a reader reads it: the model's role named `assistant`, as the other protocols name
    it; a part without what the client adds (`CLIENT_PART_KEYS`); a function call by its name and arguments, not
    the `id` a client makes for it when the model gave none (Gemini CLI sends `run_shell_command_<epoch ms>_0`)."""
    parts = message.get("parts")
    if not isinstance(parts, list) or "content" in message:
        return message
    role = "assistant" if message.get("role") == "model" else message.get("role")
    return {**message, "role": role, "parts": [_reader_part(p) for p in parts]}


def without_thinking(message: dict) -> dict | None:
    """The reply as a client sends it back without its thought parts (Gemini CLI drops them); None when it has
    none."""
    parts = message.get("parts")
    if not isinstance(parts, list) or not any(isinstance(p, dict) and p.get("thought") for p in parts):
        return None
    return {**message, "parts": [p for p in parts if not (isinstance(p, dict) and p.get("thought"))]}


def _reader_part(part: object) -> object:
    if not isinstance(part, dict):
        return part
    out = {k: v for k, v in part.items() if k not in CLIENT_PART_KEYS}
    call = out.get("functionCall")
    if isinstance(call, dict) and "id" in call:
        out["functionCall"] = {k: v for k, v in call.items() if k != "id"}
    return out


def curl(body: str, model: str = "MODEL") -> str:
    return (f"curl {BASE_URL}{PATH.format(model=model)} -H 'content-type: application/json'"
            f" -H \"x-goog-api-key: $GEMINI_API_KEY\" \\\n  -d {body}")


PYTHON_CALL = "google.genai.Client().models.generate_content"


# ---------------------------------------------------------------------- streams


def streams(path: str) -> bool:
    """Whether a request to `path` streams (`:streamGenerateContent`; the model and method live in the path)."""
    return ":streamGenerateContent" in path


def model_of(path: str) -> str | None:
    """The model a generateContent path names (`/v1beta/models/gemini-2.5-flash:generateContent`)."""
    name = path.split("?", 1)[0].rpartition("/models/")[2]
    return name.partition(":")[0] or None


class Stream:
    """Folds `streamGenerateContent` chunks (each a response holding the next parts) into the one response the
    unstreamed call returns: adjacent text parts of the same kind joined, the last usage and finish reason kept.

    `add` says whether the chunk carried parts (the first such is the first token).
    """

    def __init__(self) -> None:
        self.head: dict = {}
        self.content: dict = {"role": "model", "parts": []}
        self.candidate: dict = {}
        self.ended = False

    def add(self, chunk: object) -> bool:
        if not isinstance(chunk, dict):
            return False
        self.head.update({k: v for k, v in chunk.items() if k != "candidates"})
        candidates = chunk.get("candidates")
        first = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) \
            else {}
        self.candidate.update({k: v for k, v in first.items() if k != "content"})
        found = first.get("content")
        content: dict = found if isinstance(found, dict) else {}
        self.content["role"] = content.get("role", self.content["role"])
        listed = content.get("parts")
        parts = [p for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []
        for part in parts:
            self._add_part(dict(part))
        self.ended = self.ended or "finishReason" in first
        return bool(parts)

    def _add_part(self, part: dict) -> None:
        last = self.content["parts"][-1] if self.content["parts"] else None
        if (last is not None and set(last) <= {"text", "thought"} and set(part) <= {"text", "thought"}
                and isinstance(last.get("text"), str) and isinstance(part.get("text"), str)
                and last.get("thought") == part.get("thought")):
            last["text"] += part["text"]
        else:
            self.content["parts"].append(part)

    def body(self) -> dict:
        """The response so far."""
        candidate = {"content": self.content, **self.candidate}
        return {"candidates": [candidate], **self.head}


def error_body(status: int, kind: str, message: str) -> dict:
    """An error as Google's SDKs read one (they show `message`)."""
    return {"error": {"code": status, "message": message, "status": kind.upper()}}


def auth_headers(key: str) -> dict[str, str]:
    return {"x-goog-api-key": key}


PROVIDER = Provider(
    api="gemini", name=NAME, base_url=BASE_URL, path=PATH, path_suffixes=(":generateContent", ":streamGenerateContent"),
    messages=MESSAGES, system=SYSTEM, key_headers=KEY_HEADERS, client_headers=("x-goog-api-key",),
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"), usage=usage, unwrap=unwrap, reader_message=reader_message,
    Stream=Stream, error_body=error_body, auth_headers=auth_headers, curl=curl, python_call=PYTHON_CALL,
    path_prefixes=("/v1beta/", "/v1alpha/", "/upload/"), path_streams=streams, path_model=model_of)
