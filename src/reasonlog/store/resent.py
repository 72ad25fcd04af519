"""What a live session sends again on every call, found by its bytes: the last call's messages, system prompt and
tools, as JSON with their content ids (issue 34). One serialisation of what a call sends, compared with the last's,
replaces a canonical serialisation and a content-cache lookup of each message, prompt and tool schema.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import orjson

from ..wire import jsonable, refuse_non_finite

if TYPE_CHECKING:
    from .contents import ContentWriter


class SessionState(Protocol):
    """What `Resent` keeps of a session's last call (the writer's `writing.SessionState` holds it)."""

    history: bytes | None
    history_ids: list[int] | None
    held: dict[str, tuple[bytes | str, list[int]]]

# What the open sessions' last calls (`SessionState.history` and `held`) may hold in all: past it a call's JSON is
# not kept, and its session's next call finds its contents' ids one by one, as before.
HISTORY_BYTES = 64 << 20


class Resent:
    """Finds the content ids of what a call sends again; one per `Applier`, sharing its sessions."""

    def __init__(self, contents: ContentWriter, sessions: Mapping[str, SessionState]) -> None:
        self.contents = contents
        self.sessions = sessions
        self.held = 0  # what the sessions hold, at least (a session that ends is counted until a sum)

    def message_ids(self, cur, st: SessionState, messages: list) -> tuple[int, list[int]]:
        """How many of a live call's messages are its last call's, unchanged, and the content ids of all of them: the
        last call's ids for those, `id_of` for the rest.

        A live agent resends its whole history on every call, and may have edited any message in place since (moved
        a `cache_control`, trimmed a tool result), so neither the objects nor their positions can be trusted. One
        serialisation of the whole list, keys as given (no sorting, no dict lookup per message), settles it: when
        the last call's JSON, without its closing `]`, begins this one's and is followed by `,` or `]`, its messages
        are the first ones here, byte for byte, and so have its ids. `id_of` would have found the same ids for
        them (equal JSON is equal canonical JSON, which masks to the same content). NaN is written as `null`, as
        in `ContentWriter`'s cache: a remembered id of a content holding `null` walks the message again."""
        signed_id = self.contents.signed_id
        if self.contents.prefetched:  # a bulk batch (PostgreSQL): `prefetch` met these very objects already
            st.history = st.history_ids = None
            return 0, list(map(abs, [signed_id(cur, m, "message") for m in messages]))
        try:
            data: bytes | None = orjson.dumps(messages, default=jsonable)
        except TypeError:  # not JSON (`id_of` says why), or keys that are not strings
            data = None
        kept = _unchanged(st.history, data, st.history_ids)
        signed = st.history_ids[:kept] if kept and st.history_ids else []
        if signed and min(signed) < 0:
            for i, cid in enumerate(signed):
                if cid < 0:
                    refuse_non_finite(messages[i], "message")
        signed += [signed_id(cur, m, "message") for m in messages[kept:]]
        self._keep_history(st, data, signed)
        return kept, list(map(abs, signed))

    def same_ids(self, cur, st: SessionState, values: list, kind: str) -> list[int]:
        """The content ids of a call's system prompt (`values`: a list of it) or tools: the last call's when they
        are the same JSON, keys as given, `id_of` for each otherwise.

        An agent sends the same system prompt and tool schemas on every call, most often as new objects, and each
        `id_of` is a canonical serialisation and a lookup hashing all its bytes. Equal JSON is equal canonical
        JSON, which masks to the same content (as `message_ids` argues); a negative id's content holds `null`,
        which NaN writes too, and is walked again for NaN as a cache hit would be. A system prompt that is one
        string is compared as that string, not as its JSON: equal strings have equal JSON, and a string is never
        equal to the bytes of other values' JSON (its serialisation was a fifth of a call's row in the write)."""
        signed_id = self.contents.signed_id
        if self.contents.prefetched:  # a bulk batch: `prefetch` met these very objects already
            st.held.pop(kind, None)
            return [abs(signed_id(cur, v, kind)) for v in values]
        data: bytes | str | None
        if len(values) == 1 and type(values[0]) is str:
            data = values[0]
        else:
            try:
                data = orjson.dumps(values, default=jsonable)
            except TypeError:  # not JSON (`id_of` says why), or keys that are not strings
                data = None
        last = st.held.get(kind)
        if data is not None and last is not None and last[0] == data:
            signed = last[1]
            if signed and min(signed) < 0:
                for value, cid in zip(values, signed, strict=True):
                    if cid < 0:
                        refuse_non_finite(value, kind)
        else:
            signed = [signed_id(cur, v, kind) for v in values]
            old = len(last[0]) if last is not None else 0
            if self._room(old, None if data is None else len(data)) and data is not None:
                st.held[kind] = (data, signed)
            else:
                st.held.pop(kind, None)
        return list(map(abs, signed))

    def _keep_history(self, st: SessionState, data: bytes | None, signed: list[int]) -> None:
        """Remember a live call's messages for the session's next call, while all sessions hold under
        `HISTORY_BYTES` of them."""
        old = len(st.history) if st.history is not None else 0
        if not self._room(old, None if data is None else len(data) - 1) or data is None:
            st.history = st.history_ids = None
            return
        st.history, st.history_ids = data[:-1], signed  # a slice is a copy of its own length (orjson's is more)

    def _room(self, old: int, new: int | None) -> bool:
        """Whether a session may hold `new` bytes of JSON (None: nothing to hold) in place of `old`, all sessions'
        (`_held`) under `HISTORY_BYTES`. Counted if so; if not, its `old` are dropped from the count."""
        if new is not None and self.held - old + new > HISTORY_BYTES:
            self.held = sum(map(_held, self.sessions.values()))
        if new is None or self.held - old + new > HISTORY_BYTES:
            self.held -= old
            return False
        self.held += new - old
        return True


def _held(st: SessionState) -> int:
    """The bytes of JSON a session holds for its next call."""
    return (len(st.history) if st.history is not None else 0) + sum(len(data) for data, _ in st.held.values())


def _unchanged(previous: bytes | None, data: bytes | None, ids: list[int] | None) -> int:
    """How many messages of the call serialised as `data` are the last call's (`previous`: its JSON without the
    closing `]`; `ids`: one per message), unchanged: all of them or none."""
    if previous is None or data is None or not ids or len(data) <= len(previous):
        return 0
    return len(ids) if data.startswith(previous) and data[len(previous)] in _AFTER_ELEMENT else 0


_AFTER_ELEMENT = b",]"
