"""Writing contents: each distinct message, system prompt or tool schema once, compressed and indexed.

Dialect-neutral: the backend supplies the few statements that differ (see `ContentBackend`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from ..parts import searchable_text
from ..redact import Redactor
from ..wire import jsonable, refuse_non_finite
from ..wire.codec import CANONICAL, canonical, content_hash
from .content import (
    CODEC_ZSTD_DICT,
    COMPRESS_MIN_BYTES,
    DICT_TRAIN_MIN_BYTES,
    DICT_TRAIN_SAMPLES,
    Dictionaries,
    compress,
    train_dictionary,
)

# Canonical bytes -> content id, across sessions; cleared past this many bytes. Resent history is that
# of the few sessions recording now, so a small cache catches it: on the large workload 16 MiB kept the
# recorder at 184 MB and was faster than 256 MiB (733 MB), which the allocator paid for in GC and pages
# (benchmarks/bench_backpressure.py; docs/performance.md).
CACHE_BYTES = 16 << 20
# What one cache entry costs beyond its key's length: the bytes object's header and the dict's slot.
ENTRY_BYTES = 96


def _exact(data: bytes) -> bytes:
    """A copy of `data` that occupies its own length.

    orjson returns its output in the buffer it wrote into, at least 4 KiB and up to about 15 times
    the text's length for long strings (sys.getsizeof does not show it): kept as it is, a 30-byte
    key holds 4 KiB and the cache's budget means nothing (issue 19 item 9).
    """
    return bytes(memoryview(data))


class ContentBackend(Protocol):
    def find_content(self, cur, digest: bytes) -> int | None: ...
    def find_contents(self, cur, digests: list[bytes]) -> dict[bytes, int]: ...
    def insert_contents(self, cur, rows: list[tuple[bytes, int, str, int, int | None, bytes]]) -> list[int]: ...
    def insert_content(self, cur, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                       blob: bytes) -> int: ...
    def add_content(self, cur, digest: bytes, size: int, kind: str, codec: int, dict_id: int | None,
                    blob: bytes) -> tuple[int, bool]: ...
    def index_texts(self, cur, rows: list[tuple[int, str]]) -> None: ...
    def insert_dictionary(self, cur, data: bytes) -> int: ...
    def latest_dictionary(self, cur) -> int | None: ...


class _Plain:
    """The redactor of a store opened with `redactor=False`: masks nothing."""

    masked = 0

    @staticmethod
    def bytes(data: bytes) -> bytes:
        return data

    @staticmethod
    def text(text: str) -> str:
        return text

    @staticmethod
    def value(value: Any) -> Any:
        return value

    @staticmethod
    def json(data: Any, dumps: Any) -> Any:  # bytes in, bytes out (`bytes` is the method above, in here)
        return data

    @staticmethod
    def scan(data: Any) -> tuple[bool, bool]:
        return False, b"null" in data


@dataclass
class ContentWriter:
    """Turns values into content ids inside a write transaction.

    Resent history costs one serialisation and one dict lookup per message: the canonical
    bytes of every content written are remembered with its id. Only new contents are masked,
    hashed, compressed and indexed. Index rows wait in `pending_text` until `finish()`, so
    the full-text index gets one `executemany` per batch.
    """

    backend: ContentBackend
    redactor: Any = None
    dicts: Dictionaries = field(default_factory=Dictionaries)
    cache: dict[bytes, int] = field(default_factory=dict)  # canonical bytes -> id; -id when they hold `null`
    cache_bytes: int = 0
    pending_text: list[tuple[int, str]] = field(default_factory=list)
    _dict_id: int | None = None
    _dict_checked: bool = False
    _samples: list[bytes] = field(default_factory=list)
    _packer: tuple[int, Any] | None = None  # (dictionary id, this batch's compressor of it): not asked per content
    _added: list[bytes] | None = None  # cache keys since the last checkpoint, while events are isolated
    # The stored (masked, canonical) JSON of the messages made in this batch and its digest, by id, until the
    # timeline takes it (`Timeline.key`): it would otherwise serialise and mask each new message a second time, and
    # hash it again for its reader key when a reader reads it as it is.
    fresh: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)
    # The values `prefetch` was given, by identity, with their (signed, as in `cache`) ids, until the batch ends: the
    # batch's `id_of` of the very same object needs no second serialisation (the bulk path's calls resend their
    # history, so each message would be serialised twice a call).
    prefetched: dict[int, tuple[Any, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # None: the default patterns (every store masks, whoever writes to it); False: nothing is masked.
        self.redactor = Redactor() if self.redactor is None else self.redactor or _Plain()

    def reset(self) -> None:
        """Forget everything learnt in a transaction that rolled back."""
        self.cache.clear()
        self.cache_bytes = 0
        self.pending_text.clear()
        self.fresh.clear()
        self.prefetched.clear()
        self.dicts.forget(self._dict_id)
        self._dict_id, self._dict_checked, self._packer = None, False, None

    def checkpoint(self) -> tuple[int, int | None]:
        self._added: list[bytes] = []
        return len(self.pending_text), self._dict_id

    def rollback_to(self, mark: tuple[int, int | None]) -> None:
        """Undo what one event added, after its savepoint was rolled back."""
        pending, dict_id = mark
        for key in self._added or ():  # set by checkpoint(), which comes first
            self.cache.pop(key, None)
        del self.pending_text[pending:]
        self.fresh.clear()  # the ids it names may be given to other contents now
        self.prefetched.clear()
        if self._dict_id != dict_id:
            self.dicts.forget(self._dict_id)
            self._dict_id, self._packer = dict_id, None
        self._added = []

    def id_of(self, cur, value: Any, kind: str) -> int:
        """The id of a content, inserting it when new."""
        cid = self.signed_id(cur, value, kind)
        return -cid if cid < 0 else cid

    def signed_id(self, cur, value: Any, kind: str) -> int:
        """`id_of`, negative when the content's JSON holds `null` (whose bytes NaN writes too): a caller that
        remembers the id for the same bytes must walk the value again for NaN, as a cache hit here does."""
        known = self.prefetched.get(id(value))
        if known is not None and known[0] is value:
            return self._cached(known[1], value, kind)
        try:
            data = orjson.dumps(value, default=jsonable, option=CANONICAL)  # canonical(), inlined: hot
        except TypeError:
            data = canonical(value)  # raises with the message that names what is not JSON
        cid = self.cache.get(data)
        if cid is not None:
            return self._cached(cid, value, kind)
        may_hold, nulls = self.redactor.scan(data)  # once per distinct content, not per resent message
        if nulls:
            refuse_non_finite(value, kind)  # NaN or an infinity has no JSON form: never stored as null
        key = data
        if may_hold:
            data = self.redactor.held_json(data, canonical)  # each string alone: never across structure
        if data is not key:  # masked: index what is stored, not what was given
            value = orjson.loads(data)
        digest = content_hash(data)
        cid, new = self._store(cur, digest, data, kind)
        if new and kind != "tool":
            self.pending_text.append((cid, searchable_text(value)))
        if kind == "message":
            self.fresh[cid] = data, digest
        if self.cache_bytes > CACHE_BYTES:
            self.cache.clear()
            self.cache_bytes = 0
        key = _exact(key)
        signed = -cid if nulls else cid  # negative: a hit walks the value (see above)
        self.cache[key] = signed
        self.cache_bytes += len(key) + ENTRY_BYTES
        if self._added is not None:
            self._added.append(key)
        return signed

    @staticmethod
    def _cached(cid: int, value: Any, kind: str) -> int:
        if cid < 0:  # its JSON holds null, whose bytes NaN writes too: this value may hold NaN
            refuse_non_finite(value, kind)
        return cid

    def prefetch(self, cur, values: Iterable[tuple[Any, str]]) -> None:
        """Store, in a few statements, the contents among `values` ((value, kind) in the order `id_of` would meet
        them) that the cache does not hold, and remember their ids: the batch's `id_of` calls then find them all
        in the cache. The bulk path of a store whose every statement is a round trip (PostgreSQL): one lookup of
        every new digest and one pipelined insert, where `id_of` alone makes two round trips per new content.

        Equivalent to calling `id_of` on each in order: the same masking, kind (the first use's), dictionary,
        compression, ids (inserted in the same order) and index rows. A value that cannot be stored (not JSON,
        NaN) raises as `id_of` would, failing the batch, which is then written event by event."""
        if self.cache_bytes > CACHE_BYTES:
            self.cache.clear()
            self.cache_bytes = 0
        pending: dict[bytes, tuple[bool, bytes, bytes, str, Any]] = {}  # canonical bytes -> what to store
        given: dict[int, tuple[Any, bytes]] = {}  # id(value) -> (value, its canonical bytes)
        for value, kind in values:
            seen = given.get(id(value))
            if seen is not None and seen[0] is value:  # the same object again (a history resent call after call)
                continue
            try:
                data = orjson.dumps(value, default=jsonable, option=CANONICAL)
            except TypeError:
                data = canonical(value)
            given[id(value)] = (value, data)
            if data in self.cache or data in pending:
                continue
            nulls = b"null" in data
            if nulls:
                refuse_non_finite(value, kind)
            stored = self.redactor.json(data, canonical)
            if stored is not data:
                value = orjson.loads(stored)
            pending[_exact(data)] = (nulls, content_hash(stored), stored, kind, value)
        if pending:
            self._store_pending(cur, pending)
        self.prefetched.update((key, (value, self.cache[data])) for key, (value, data) in given.items())

    def _store_pending(self, cur, pending: dict[bytes, tuple[bool, bytes, bytes, str, Any]]) -> None:
        """`prefetch`'s second half: the contents the store does not hold inserted, and all of them remembered."""
        found = self.backend.find_contents(cur, sorted({p[1] for p in pending.values()}))
        rows, texts = [], []
        for _nulls, digest, stored, kind, value in pending.values():
            if digest in found:
                continue
            found[digest] = 0  # planned: a second value masked to the same bytes is this content
            dict_id = self._dictionary(cur, stored)
            codec, blob = compress(stored, self.dicts.get(cur, dict_id)[0] if dict_id is not None else None)
            rows.append((digest, len(stored), kind, codec, dict_id if codec == 2 else None, blob))
            texts.append(None if kind == "tool" else value)
        for row, cid, value in zip(rows, self.backend.insert_contents(cur, rows), texts, strict=True):
            found[row[0]] = cid
            if value is not None:
                self.pending_text.append((cid, searchable_text(value)))
        for key, (nulls, digest, stored, kind, _value) in pending.items():
            self.cache[key] = -found[digest] if nulls else found[digest]
            self.cache_bytes += len(key) + ENTRY_BYTES
            if kind == "message":  # as `id_of` keeps it: the timeline reads it, not the value masked again
                self.fresh[found[digest]] = stored, digest

    def finish(self, cur) -> None:
        """Index the texts of this batch's new contents (call before commit)."""
        if self.pending_text:
            self.backend.index_texts(cur, [(cid, text) for cid, text in self.pending_text if text])
            self.pending_text.clear()
        self.fresh.clear()
        self.prefetched.clear()
        self._added = None
        self._packer = None  # the next batch may run in another thread, which has contexts of its own

    def _store(self, cur, digest: bytes, data: bytes, kind: str) -> tuple[int, bool]:
        """The id of the content of `digest`, and whether it was inserted now.

        Once the database has its dictionary, a content is compressed before the store is asked, and one statement
        inserts it unless its hash is stored (`add_content`): a content this writer has not met is nearly always new
        (every one but 5 of 6,688 on a 42 MB Claude Code import), and SQLite uses up no id on a conflict, so the ids
        are those of a lookup and an insert. Before the dictionary, a content stored already must not become one of
        its training samples: it is looked up first."""
        dict_id = self._dict_id
        if dict_id is not None:  # (never before the first new content: `_dictionary` reads it then)
            packer = self._packer
            if packer is None or packer[0] != dict_id:
                packer = self._packer = dict_id, self.dicts.get(cur, dict_id)[0]
            codec, blob = compress(data, packer[1])
            return self.backend.add_content(cur, digest, len(data), kind, codec,
                                            dict_id if codec == CODEC_ZSTD_DICT else None, blob)
        cid = self.backend.find_content(cur, digest)
        if cid is not None:
            return cid, False
        return self.backend.insert_content(cur, digest, len(data), kind, *self._compressed(cur, data)), True

    def _compressed(self, cur, data: bytes) -> tuple[int, int | None, bytes]:
        """(codec, dictionary id or None, stored bytes) of a new content."""
        dict_id = self._dictionary(cur, data)
        compressor = self.dicts.get(cur, dict_id)[0] if dict_id is not None else None
        codec, blob = compress(data, compressor)
        return codec, dict_id if codec == 2 else None, blob

    def _dictionary(self, cur, data: bytes) -> int | None:
        """The dictionary to compress with; trains one from the first contents of a database."""
        if not self._dict_checked:
            self._dict_id, self._dict_checked = self.backend.latest_dictionary(cur), True
        if self._dict_id is None and len(data) >= COMPRESS_MIN_BYTES:
            self._samples.append(_exact(data))  # 500 samples of orjson's buffers could hold 500 MB
            if len(self._samples) >= DICT_TRAIN_SAMPLES and sum(map(len, self._samples)) >= DICT_TRAIN_MIN_BYTES:
                trained = train_dictionary(self._samples)
                self._samples = [] if trained else self._samples[-DICT_TRAIN_SAMPLES:]
                if trained:
                    self._dict_id = self.backend.insert_dictionary(cur, trained)
        return self._dict_id
