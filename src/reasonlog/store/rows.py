"""The rows both sides of the store share: how a request is split into its columns and joined again, the calls
table's columns as the writer fills them, and the reader of stored contents. The bottom of store/'s inner order
(docs/architecture.md): reading and writing build on it, and it imports neither.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson

from .. import providers
from ..accounting import TOKENS
from .content import Dictionaries, decompress
from .terms import StoreError

MESSAGE_KEYS = providers.MESSAGE_KEYS
SYSTEM_KEYS = providers.SYSTEM_KEYS
TOOLS_KEY = "tools"
DEFAULT_SHAPE = {"messages": "messages", "system": "system"}


@dataclass
class Split:
    """A request body apart: its inline parameters, and the system prompt, messages and tools stored by reference."""

    params: dict
    system: Any
    messages: list
    tools: list | None
    shape: dict | None
    has_system: bool = False


def split_request(request: dict) -> Split:
    """Separate a request body into what is stored by reference and the parameters kept inline."""
    get, found = request.get, None  # (plain loops: the writer splits every call)
    for key in MESSAGE_KEYS:
        if isinstance(get(key), list):
            found = key
            break
    if found is None and isinstance(get(providers.STRING_INPUT), str):  # one user message, as a string
        return _split_string_input(request)
    sys_key = "system"
    for key in SYSTEM_KEYS:
        if key in request:
            sys_key = key
            break
    tools = get(TOOLS_KEY)
    tools = tools if isinstance(tools, list) else None
    # A `messages` that is not a list (a str, a tuple) stays a parameter, so replay gives it back as sent.
    params = dict(request)
    has_system = params.pop(sys_key, _ABSENT) is not _ABSENT
    if found is not None:
        del params[found]
    if tools is not None:
        del params[TOOLS_KEY]
    shape: dict[str, Any] | None = None
    if found != "messages" or sys_key != "system":
        shape = {"messages": found or "messages", "system": sys_key}
        if found is None:
            shape["no_messages"] = True
    return Split(params, get(sys_key), request[found] if found is not None else [], tools, shape,
                 has_system=has_system)


_ABSENT = object()


def _split_string_input(request: dict) -> Split:
    """A Responses request whose `input` is a string: that string is one user message (which the timeline,
    show and search read), given back as the string it was by `join_request`."""
    split = split_request({k: v for k, v in request.items() if k != providers.STRING_INPUT})
    split.messages = [providers.string_message(request[providers.STRING_INPUT])]
    split.shape = {**(split.shape or DEFAULT_SHAPE), "messages": providers.STRING_INPUT, "string": True}
    split.shape.pop("no_messages", None)
    return split


def join_request(params: dict, shape: dict | None, system: Any, has_system: bool, messages: list,
                 tools: list | None) -> dict:
    """Inverse of `split_request`."""
    shape = shape or DEFAULT_SHAPE
    out = dict(params)
    if shape.get("string") and len(messages) == 1 and isinstance(messages[0], dict):
        out[shape["messages"]] = messages[0].get("content")
    elif not shape.get("no_messages"):
        out[shape["messages"]] = messages
    if has_system:
        out[shape["system"]] = system
    if tools is not None:
        out[TOOLS_KEY] = tools
    return out


# The calls table's columns as the writer fills them: the one list each row and the INSERT follow.
CALL_INSERT_COLUMNS = (
    "id", "session_id", "idx", "exchange_id", "provider", "model", "started_at", "latency_ms", "ttft_ms", "status",
    "stop_reason", "error_json", *TOKENS, "cost_usd", "cost_source", "provider_message_id", "request_id",
    "params_json", "shape_json", "system_id", "tools_json", "context_json", "context_len", "response_id", "raw",
    "raw_format", "context_facts_json", "window_json", "replay_of", "counted_in")
INSERT_CALL = (f"INSERT INTO calls ({', '.join(CALL_INSERT_COLUMNS)})"
               f" VALUES ({', '.join('?' * len(CALL_INSERT_COLUMNS))})")
# Rows of calls one INSERT takes on SQLite, largest first: 16 of 37 values stay under the 999 variables older SQLite
# builds allow. Few sizes, so that few statements are compiled and cached.
_CALLS_AT_ONCE = (16, 4, 1)
_INSERT_CALLS = {n: INSERT_CALL + "".join(
    f", ({', '.join('?' * len(CALL_INSERT_COLUMNS))})" for _ in range(n - 1)) for n in _CALLS_AT_ONCE}


def insert_calls(cur, rows: list[tuple]) -> None:
    """Insert calls rows (values in `CALL_INSERT_COLUMNS`' order), several to a statement on SQLite.

    A calls row fires a trigger (`latency_daily_insert`), so SQLite keeps each INSERT's changed pages in a statement
    journal, to undo the statement alone: a copy of every page it touches (calls, its four indexes, latency_daily),
    16 KiB each, made once a statement. One statement a row made those copies for every row: two thirds of the
    trigger's cost, and a third of the calls' whole INSERT. PostgreSQL's cursor takes `executemany` as one COPY."""
    if len(rows) < 2 or hasattr(cur, "copy_rows"):
        cur.executemany(INSERT_CALL, rows)
        return
    at = 0
    for n in _CALLS_AT_ONCE:
        while len(rows) - at >= n:
            cur.execute(_INSERT_CALLS[n], list(chain.from_iterable(rows[at:at + n])))
            at += n


class ContentReader:
    """Fetches and decodes contents by id, memoised for one read."""

    def __init__(self, cur, dicts: Dictionaries):
        self.cur, self.dicts = cur, dicts
        self.memo: dict[int, Any] = {}

    def load(self, ids) -> None:
        wanted = [i for i in set(ids) if i is not None and i not in self.memo]
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            rows = self.cur.execute(f"SELECT id, codec, dict_id, data FROM contents"
                                    f" WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            for cid, codec, dict_id, data in rows:
                self.memo[cid] = orjson.loads(self.bytes_of(codec, dict_id, data))

    def bytes_of(self, codec: int, dict_id: int | None, data: bytes) -> bytes:
        return decompress(codec, data, self.dicts.get(self.cur, dict_id)[1] if dict_id is not None else None)

    def get(self, cid: int) -> Any:
        if cid not in self.memo:
            self.load([cid])
        if cid not in self.memo:
            raise StoreError(f"content {cid} is missing from the store")
        return self.memo[cid]
