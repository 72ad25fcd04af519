"""`Provider`: what reasonlog knows of one provider protocol, as one typed value.

Each protocol module (anthropic, openai_chat, openai_responses, gemini) ends with its `PROVIDER`; the proxy's
routing, replay, the dashboard and `providers/__init__.py` read these values instead of lists of their own, so a
new protocol is one module and one line in `providers.PROTOCOLS` (docs/architecture.md, "How to add a provider").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..model import Usage
from .common import Unwrapped


class StreamFold(Protocol):
    """Folds a protocol's stream events into the body the same call returns unstreamed."""

    ended: bool

    def add(self, event: object) -> bool:
        """Take one event (a dict as sent or an SDK object); whether it carried output (the first token)."""
        ...

    def body(self) -> dict | None:
        """The response so far; whole once the stream ended."""
        ...


def _never(path: str) -> bool:
    return False


def _no_model(path: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider protocol: its names, where a request keeps its context, how its answers read, where it is
    served and how a client proves who it is."""

    api: str  # the protocol's own name: anthropic, openai_chat, openai_responses, gemini (the replay rules' key)
    name: str  # the provider a call records, and whose upstream it goes to: anthropic, openai, google
    base_url: str
    path: str  # the endpoint; Gemini's names the model (`{model}`)
    path_suffixes: tuple[str, ...]  # how the proxy knows a model call of this protocol by its path
    messages: str  # the request key holding the context (messages, input items, contents)
    system: str | None  # the request key of a system prompt kept outside the messages, if any
    key_headers: tuple[str, ...]  # the headers its clients carry their key in: never written down
    client_headers: tuple[str, ...]  # headers only its clients send: a request on no known path goes here
    key_variables: tuple[str, ...]  # where a replay reads the user's key from, in order
    usage: Callable[[object], Usage]
    unwrap: Callable[[dict], Unwrapped | None]
    reader_message: Callable[[dict], dict]
    Stream: Callable[[], StreamFold]
    error_body: Callable[[int, str, str], dict]  # an error as its SDKs read one: (status, kind, message)
    auth_headers: Callable[[str], dict[str, str]]  # the headers that send a key
    curl: Callable[[str, str], str]  # a shell command sending a (shell-quoted) body to a model
    python_call: str  # the SDK call that sends a request
    path_prefixes: tuple[str, ...] = ()  # paths only its clients use (a request on no known route goes here)
    path_streams: Callable[[str], bool] = _never  # whether the path itself asks for a stream
    path_model: Callable[[str], str | None] = _no_model  # the model the path names
