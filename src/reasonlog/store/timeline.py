"""The session timeline, built as calls are written: each message of the conversation once, in order.

`Timeline.extend` aligns a call's context with the previous call's context plus its reply (see
`reasonlog.conversation`) and returns the new timeline entries and the call's window: what it kept, added,
trimmed, edited or compacted, and which timeline entry each position of its context stands for. The window is
stored on the call (`calls.window_json`, migration 12) as runs into the previous call's slots, so it costs
a few numbers a call and every reader (show, the dashboard, the API, the exports) reads the same facts.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..conversation import (
    Slot,
    Window,
    align,
    decode_map,
    key_of,
    reader_form,
    reader_role,
    reply_slots,
    reply_units,
    reply_variants,
)
from ..providers import role_of
from ..wire import jsonable
from ..wire.codec import CANONICAL, canonical
from .content import decode_context

# Reader keys by content id, across sessions; cleared past this many (a key and its entry take ~150 bytes).
KEY_CACHE_ENTRIES = 100_000
# A call that sends the last call's context and reply again, then new messages, is settled without `align`
# (`Timeline._appended`). False aligns every call: what tests/test_timeline_fast_paths.py compares it with.
APPENDED = True
# A message just written stands in a thread by its content id (a placeholder key, `_lazy`) until a comparison needs
# its reader key: a live agent resends most messages byte for byte, so most keys are never needed. False makes every
# key when its message is met: what tests/test_timeline_fast_paths.py compares it with.
LAZY = True
# What the stored JSON of the messages waiting for their keys may hold in all (each counted with orjson's smallest
# buffer, which it may keep); past it they are forgotten, and a key needed later is read back from the store. Small:
# most are never needed, and a bound of 16 MiB made the recording process visibly larger for nothing.
UNKEYED_BYTES = 1 << 20
_BUFFER = 4096


@dataclass
class Thread:
    """What a session's next call is aligned with: the previous call's view (held + sent) and reply."""

    view_keys: list[bytes] = field(default_factory=list)
    view: list[Slot] = field(default_factory=list)
    sent_keys: list[bytes] = field(default_factory=list)  # keys of what the last call sent, for a resent prefix
    reply_keys: list[bytes] = field(default_factory=list)
    reply: list[Slot] = field(default_factory=list)
    reply_alts: dict[bytes, bytes] = field(default_factory=dict)  # another form of the reply -> its key
    # The reply as stored (plain JSON), until the keys of its other forms (`reply_alts`) are made: only when a message
    # of the next call could be one of them (`Timeline._variants`), which a message in another role cannot.
    reply_form: Any = None
    # Forms in which earlier replies were sent back -> the key of the reply they stand for: a reply resent
    # without its thinking is resent so on every later call too.
    aliases: dict[bytes, bytes] = field(default_factory=dict)
    reply_ref: str | None = None  # the provider's id of the reply, which a chained request names


Entry = tuple[str | None, int]  # a new timeline entry: its role and content id


class Timeline:
    """Reader keys (cached by content id) and the alignment of each call with the one before."""

    def __init__(self, redactor: Any, fresh: dict[int, tuple[bytes, bytes]] | None = None):
        self.redactor = redactor
        self.keys: dict[int, bytes] = {}
        # content id -> its stored JSON and digest, just written (ContentWriter)
        self.fresh: dict[int, tuple[bytes, bytes]] = {} if fresh is None else fresh
        # content id -> its stored JSON and digest, of the messages that stand in threads by placeholder (`LAZY`)
        self.unkeyed: dict[int, tuple[bytes, bytes]] = {}
        self.unkeyed_bytes = 0
        self.reader: Callable[[], Any] | None = None  # makes a `ContentReader` of the writer's transaction

    def reset(self) -> None:
        self.keys.clear()  # ids of a rolled-back transaction may be given to other contents
        self.unkeyed.clear()
        self.unkeyed_bytes = 0

    def key(self, cid: int | None, value: Any) -> bytes:
        """The reader key of a content, from its masked form (so a key read back from the store is the same)."""
        if cid is not None:
            found = self.keys.get(cid)
            if found is not None:
                return found
        stored = None if cid is None else self.fresh.pop(cid, None)
        if stored is None:
            return self._remember(cid, reader_form(self.plain(value)))
        loaded = orjson.loads(stored[0])
        return self._remember(cid, reader_form(loaded), loaded, stored[1])

    def _remember(self, cid: int | None, form: Any, loaded: Any = None, digest: bytes | None = None) -> bytes:
        """The key of a content's reader form (`form`), kept by its id. A content just written (`loaded` from its
        stored JSON, whose `digest` addresses it) that a reader reads as it is has its digest for its key: the key is
        the same hash of the form's JSON with sorted keys, which is that stored JSON (canonical JSON read and written
        again is itself: tests/test_timeline_fast_paths.py), so it is not serialised and hashed again."""
        k = digest if digest is not None and form == loaded else key_of(form)
        if cid is not None:
            if len(self.keys) >= KEY_CACHE_ENTRIES:
                self.keys.clear()
            self.keys[cid] = k
        return k

    def _key_or_lazy(self, cid: int, value: Any) -> bytes:
        """The reader key of a message of a call, or, for a message just written, its placeholder (`LAZY`)."""
        found = self.keys.get(cid)
        if found is not None:
            return found
        if cid in self.unkeyed:
            return _lazy(cid)
        stored = self.fresh.pop(cid, None) if LAZY else None
        if stored is None:
            return self.key(cid, value)
        self._defer(cid, stored)
        return _lazy(cid)

    def _defer(self, cid: int, stored: tuple[bytes, bytes]) -> None:
        """Keep a message's stored JSON until its key is needed (all of them forgotten past `UNKEYED_BYTES`)."""
        size = len(stored[0]) + _BUFFER
        if self.unkeyed_bytes + size > UNKEYED_BYTES:
            self.unkeyed.clear()
            self.unkeyed_bytes = 0
        self.unkeyed[cid] = stored
        self.unkeyed_bytes += size

    def real(self, keys: list[bytes]) -> list[bytes]:
        """`keys` with each placeholder replaced by its message's reader key, in place: a placeholder stands for the
        key of its content, whichever list holds it."""
        for i, k in enumerate(keys):
            if len(k) == _LAZY_LEN:
                keys[i] = self._resolve(k)
        return keys

    def same(self, a: list[bytes], b: list[bytes]) -> bool:
        """Whether two runs of keys are a reader's same messages. Equal placeholders name one content, so equal runs
        are; runs that differ are compared again by their reader keys when a placeholder is among them."""
        if a == b:
            return True
        if len(a) != len(b) or not any(len(k) == _LAZY_LEN for k in (*a, *b)):
            return False
        return self.real(list(a)) == self.real(list(b))

    def _resolve(self, k: bytes) -> bytes:
        cid = int.from_bytes(k[1:], "big")
        found = self.keys.get(cid)
        if found is not None:
            return found
        stored = self.unkeyed.pop(cid, None)
        if stored is not None:
            self.unkeyed_bytes -= len(stored[0]) + _BUFFER
            loaded = orjson.loads(stored[0])
            return self._remember(cid, reader_form(loaded), loaded, stored[1])
        assert self.reader is not None, "a placeholder outlived its transaction"
        return self.key(cid, self.reader().get(cid))  # as stored: masked already, and masking it again changes nothing

    def plain(self, value: Any) -> Any:
        """`value` as plain JSON data, masked as the store masks it (without counting the secrets again)."""
        masked = self.redactor.masked
        try:
            data = orjson.dumps(value, default=jsonable, option=CANONICAL)
        except TypeError:
            data = canonical(value)
        data = self.redactor.json(data, canonical)  # as `ContentWriter` masks a content
        self.redactor.masked = masked
        return orjson.loads(data)

    def extend(self, th: Thread, ids: list[int], messages: list, known: int, chained: bool,
               next_entry: int) -> tuple[list[Entry], Window, list[Slot], list]:
        """Align a call's context (`ids`, `messages`; its first `known` the last call's, unchanged) with `th`.

        Returns the new entries (numbered from `next_entry`), the window, the slots of the call's view and
        the map to store (runs into the previous slots, new entries as themselves)."""
        key = self._key_or_lazy
        fresh = [key(cid, m) for cid, m in zip(ids[known:], messages[known:], strict=True)]
        if th.aliases:  # (an alias is a reader key: a placeholder would miss it)
            self.real(fresh)
        if th.reply_form is not None:
            skip = self._resent_prefix(th, known, fresh)
            self._variants(th, messages[known + skip:], fresh[skip:])
        if th.reply_alts:  # the reply sent back in another form a reader calls the same
            self.real(fresh)
            th.aliases.update((k, th.reply_alts[k]) for k in fresh if k in th.reply_alts)
        if th.aliases:
            fresh = [th.aliases.get(k, k) for k in fresh]
        sent = None if chained or not APPENDED else self._resent_whole(th, known, fresh)
        if sent is not None:
            return self._appended(th, ids, messages, sent, next_entry)
        sent = self.real(th.sent_keys[:known] + fresh)
        before_keys, before = self.real(th.view_keys + th.reply_keys), th.view + th.reply
        held = len(before_keys) if chained else 0
        after = before_keys + sent if chained else sent
        w = align(before_keys, after, len(th.view_keys), held)
        view: list[Slot] = [0] * len(after)
        entries: list[Entry] = []
        stored: list = []
        for tag, i1, i2, j1, j2 in w.ops:
            if tag == "equal":
                view[j1:j2] = before[i1:i2]
                stored.append([i1, i2])
                continue
            for j in range(j1, j2):
                view[j] = next_entry + len(entries)
                stored.append(view[j])
                entries.append((role_of(messages[j - held]), ids[j - held]))
        w.edits = [(before[i], view[j]) for i, j in w.edits]  # type: ignore[misc]  # as timeline entries
        th.view_keys, th.view, th.sent_keys = after, view, sent
        return entries, w, view, stored

    def _appended(self, th: Thread, ids: list[int], messages: list, sent: list[bytes],
                  next_entry: int) -> tuple[list[Entry], Window, list[Slot], list]:
        """`extend` of a call that sent the last call's context and reply again, then new messages (most calls do):
        what `align` finds then (one kept run, one insert), without aligning or copying the kept run."""
        n = len(th.view) + len(th.reply)  # the kept run (`_resent_whole` may have extended `th.view_keys` already)
        entries = [(role_of(messages[j]), ids[j]) for j in range(n, len(sent))]
        new = range(next_entry, next_entry + len(entries))
        view = th.view
        view += th.reply  # (the thread's own lists: nothing else holds them)
        view += new
        w = Window(ops=([("equal", 0, n, 0, n)] if n else []) + ([("insert", n, n, n, len(sent))] if entries else []),
                   added=len(entries))
        th.view_keys = th.sent_keys = sent
        return entries, w, view, ([[0, n]] if n else []) + list(new)

    def set_reply(self, th: Thread, response: Any, response_id: int | None, entry: int, ref: str | None) -> int:
        """Remember the call's reply (timeline entry `entry`) for the next call; returns its item count."""
        if response is None or response_id is None:
            th.reply_keys, th.reply, th.reply_alts, th.reply_ref, th.reply_form = [], [], {}, ref, None
            return 0
        stored = self.fresh.get(response_id)
        form = self.plain(response) if stored is None else orjson.loads(stored[0])
        units = reply_units(form)
        items = len(units) if units[0] is not form else 0
        th.reply = reply_slots(entry, items)
        if items:
            th.reply_keys, th.reply_alts, th.reply_form = [key_of(reader_form(u)) for u in units], {}, None
        else:
            key = self.keys.get(response_id)
            if key is None and LAZY and stored is not None:
                self._defer(response_id, self.fresh.pop(response_id))
                key = _lazy(response_id)
            th.reply_keys = [key or self._remember(response_id, reader_form(form),
                                                   *((form, stored[1]) if stored else ()))]
            th.reply_alts, th.reply_form = {}, form
        th.reply_ref = ref
        return items

    def load(self, cur, session_id: str, reader) -> Thread:
        """The thread of a session written before (by another process, or before a restart)."""
        ids: list[int] | None = None
        view: list[Slot] | None = None  # None while the calls read so far predate migration 12
        reply: list[Slot] = []
        row = None
        for row in cur.execute("SELECT id, context_json, window_json, response_id, provider_message_id FROM calls"
                               " WHERE session_id = ? ORDER BY idx", (session_id,)):
            window = orjson.loads(row[2]) if row[2] else None
            if window is not None and view is None and ids is not None:
                view = _legacy_view(cur, session_id, ids)  # the call before the first one with a window
            ids = decode_context(orjson.loads(row[1]), ids)
            view = decode_map(window["map"], (view or []) + reply) if window else None
            reply = reply_slots(*window["reply"]) if window and window.get("reply") else []
        th = Thread()
        if row is None or ids is None:
            return th
        if view is None:
            view = _legacy_view(cur, session_id, ids)
            reply = [_last_entry(cur, session_id, row[0])] if row[3] is not None else []
        contents = _entry_contents(cur, session_id, {s if isinstance(s, int) else s[0] for s in view + reply})
        replies = _assistant_entries(cur, session_id, set(contents))
        reader.load([*contents.values(), *ids, row[3]])
        th.view, th.reply_ref = view, row[4]
        th.view_keys = [self._slot_key(s, contents, reader) for s in view]
        # replies an earlier call may have sent back in another form (that call may be gone from the last context)
        for slot, k in zip(view, th.view_keys, strict=True):
            if isinstance(slot, int) and slot in replies:
                th.aliases.update((key_of(v), k) for v in reply_variants(reader_form(self.plain(
                    reader.get(contents[slot])))))
        th.sent_keys = [self.key(cid, reader.get(cid)) for cid in ids]
        held = len(view) - len(ids)
        for p, k in enumerate(th.sent_keys):  # forms of replies sent back, as the calls before aligned them
            if held + p >= 0 and k != th.view_keys[held + p]:
                th.aliases[k] = th.view_keys[held + p]
        th.sent_keys = [th.aliases.get(k, k) for k in th.sent_keys]
        if row[3] is not None and reply:
            first = reply[0]
            self.set_reply(th, reader.get(row[3]), row[3], first if isinstance(first, int) else first[0], row[4])
        return th

    def _slot_key(self, slot: Slot, contents: dict[int, int], reader) -> bytes:
        if isinstance(slot, int):
            cid = contents.get(slot)
            return self.key(cid, reader.get(cid)) if cid is not None else b"?%d" % slot
        cid = contents.get(slot[0])
        units = reply_units(self.plain(reader.get(cid))) if cid is not None else []
        return key_of(reader_form(units[slot[1]])) if slot[1] < len(units) else b"?%d" % slot[0]

    def _variants(self, th: Thread, messages: list, fresh: list[bytes]) -> None:
        """Make the keys of the forms in which the last reply may be sent back (`reply_variants`) if one of this
        call's new messages (`messages`, their keys `fresh`) could be one. Each variant keeps the reply's role, and a
        message whose role is a string other than Gemini's `model` keeps it in its reader form too: a message in
        another role cannot be a variant, nor can the reply itself, sent back as it came. (An imported call's new
        messages are the reply and the user's next message: its reply's variants were made for every call, and
        never met.)"""
        form, th.reply_form = th.reply_form, None
        role: Any = _UNSET
        reply = th.reply_keys[0]
        for k, m in zip(fresh, messages, strict=True):
            if type(m) is dict and type(r := m.get("role")) is str and r != "model":
                if role is _UNSET:
                    role = reader_role(form)
                if r != role:
                    continue
            if self.same([k], [reply]):
                continue
            th.reply_keys[0] = reply = self.real([reply])[0]  # what the variants stand for: a reader key
            th.reply_alts = {key_of(v): reply for v in reply_variants(reader_form(form))}
            return

    def _resent_prefix(self, th: Thread, known: int, fresh: list[bytes]) -> int:
        """How many of a call's keys after its first `known` (`fresh`) resend the rest of the last call's context,
        key for key: all of them or none. None of those is the last reply sent back in another form, even when a
        reader calls one of them the same (an earlier "Done." and a reply of thinking and "Done."): each stands for
        a message the last call sent before its reply."""
        last, aliases = th.sent_keys, th.aliases
        n = len(last) - known
        if n <= 0 or len(fresh) < n:
            return 0
        head = [aliases.get(k, k) for k in fresh[:n]] if aliases else fresh[:n]
        return n if self.same(head, last[known:]) else 0

    def _resent_whole(self, th: Thread, known: int, fresh: list[bytes]) -> list[bytes] | None:
        """The keys of a call's context (its first `known` keys the last call's, then `fresh`) when it begins with
        the last call's context and reply, as most calls do; None otherwise (`align` then finds what changed). The
        list is the thread's own, extended, when the whole last context was resent unchanged."""
        last, reply = th.sent_keys, th.reply_keys
        m, r = len(last), len(reply)
        if th.view_keys is not last or known > m:  # the last call was chained: its view is not what it sent
            return None
        if known == m:
            if not self.same(fresh[:r], reply):
                return None
            last += fresh
            return last
        if not self.same(fresh[:m - known], last[known:]) or not self.same(fresh[m - known:m - known + r], reply):
            return None
        return last[:known] + fresh if known else fresh


def _lazy(cid: int) -> bytes:
    """The placeholder key of a content: its id, tagged (a reader key is 16 bytes, a placeholder never is)."""
    return b"\xff" + cid.to_bytes(8, "big")


_LAZY_LEN = 9
_UNSET = object()


def _legacy_view(cur, session_id: str, ids: list[int]) -> list[Slot]:
    """The view of a call written before migration 12: each content's latest timeline entry."""
    latest = {cid: idx for idx, cid in cur.execute(
        "SELECT idx, content_id FROM messages WHERE session_id = ? ORDER BY idx", (session_id,))}
    return [latest.get(cid, -1) for cid in ids]


def _last_entry(cur, session_id: str, call_id: str) -> int:
    """The timeline entry a call wrote last (its reply, when it has one)."""
    return cur.execute("SELECT MAX(idx) FROM messages WHERE session_id = ? AND call_id = ?",
                       (session_id, call_id)).fetchone()[0]


def _assistant_entries(cur, session_id: str, entries: set[int]) -> set[int]:
    """Which of these timeline entries are the model's (role assistant): the replies."""
    wanted = sorted(entries)
    found: set[int] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update(idx for (idx,) in cur.execute(
            f"SELECT idx FROM messages WHERE session_id = ? AND role = 'assistant' AND idx IN"
            f" ({', '.join('?' * len(chunk))})", (session_id, *chunk)))
    return found


def _entry_contents(cur, session_id: str, entries: set[int]) -> dict[int, int]:
    """Timeline entry -> content id, for these entries."""
    wanted = sorted(e for e in entries if e >= 0)
    found: dict[int, int] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        found.update(cur.execute(f"SELECT idx, content_id FROM messages WHERE session_id = ? AND idx IN"
                                 f" ({', '.join('?' * len(chunk))})", (session_id, *chunk)).fetchall())
    return found
