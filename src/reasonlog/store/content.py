"""Content addressing: compression and the context encoding (canonical JSON and the hash: `wire/codec.py`).

Agents resend their whole history on every call. Each distinct content is stored once, keyed
by the hash of its canonical JSON, and a call's context is written as runs into the previous
call's context plus the ids that are new, so storage grows with the session, not its square.
"""
from __future__ import annotations

import threading
from typing import Any

import orjson
import zstandard

from ..wire import jsonable

CODEC_PLAIN = 0
CODEC_ZSTD = 1
CODEC_ZSTD_DICT = 2  # zstd with the database's trained dictionary `dict_id`
# Below this many bytes zstd's frame header costs more than it saves.
COMPRESS_MIN_BYTES = 96
# A dictionary is trained once this many contents (and bytes) have been seen without one.
DICT_TRAIN_SAMPLES = 500
DICT_TRAIN_MIN_BYTES = 128 << 10
DICT_SIZE = 64 << 10
COMPRESS_LEVEL = 1  # contents with the database's dictionary (see `Dictionaries.get`)

# zstd contexts are not thread-safe and release the GIL while they work: two stores (or two
# threads of one) sharing a context crashed the process. Every thread gets its own contexts.
_local = threading.local()


def _plain() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    """This thread's compressor and decompressor without a dictionary."""
    pair = getattr(_local, "plain", None)
    if pair is None:
        pair = _local.plain = (zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False),
                               zstandard.ZstdDecompressor())
    return pair


class Dictionaries:
    """The zstd dictionaries of one database: their bytes loaded once, their contexts per thread.

    Small contents compress about twice as well with a dictionary trained on the database's own
    first contents. A dictionary's id is the database's, so contexts are per store as well.
    """

    def __init__(self):
        self._data: dict[int, bytes] = {}
        self._local = threading.local()

    def get(self, cur, dict_id: int) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        data = self._data.get(dict_id)
        if data is None:
            row = cur.execute("SELECT data FROM zstd_dicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                raise ValueError(f"zstd dictionary {dict_id} is missing")
            data = self._data[dict_id] = bytes(row[0])
        mine = self._local.__dict__.setdefault("contexts", {})
        cached = mine.get(dict_id)
        if cached is None or cached[0] is not data:  # a forgotten id may come back with other bytes
            d = zstandard.ZstdCompressionDict(data)
            # Its tables built once, not again for every content compressed: 17 % less CPU in zstd over the 6,188
            # contents of a 42 MB Claude Code import (docs/performance.md). Level 1: each content is compressed
            # between Python's work, where level 3's larger tables are copied and missed in the cache (zstd took
            # two to three times as long there as in a loop), for slightly larger contents (docs/performance.md,
            # session 16).
            d.precompute_compress(level=COMPRESS_LEVEL)
            cached = mine[dict_id] = (data, zstandard.ZstdCompressor(dict_data=d, write_checksum=False),
                                      zstandard.ZstdDecompressor(dict_data=d))
        return cached[1], cached[2]

    def forget(self, dict_id: int | None) -> None:
        self._data.pop(dict_id, None)  # type: ignore[arg-type]


def train_dictionary(samples: list[bytes]) -> bytes | None:
    """A zstd dictionary from sample contents, or None when zstd finds too little to learn from."""
    try:
        # k and d fixed: without them zstd searches its parameters, five times the CPU (0.094 s against 0.019 s
        # on the medium workload's first 500 contents) for the same ratio (0.2685 against 0.269 of the next 3,500).
        # accel=2 (zstd's default is 1): its frequency count looks at fewer positions, for fewer instructions and a
        # ratio as good (the medium write's database is the same size: docs/performance.md, session 17); accel=3
        # and a smaller frequency table (f=18) compressed worse.
        return zstandard.train_dictionary(DICT_SIZE, list[Any](samples), k=1024, d=8, accel=2).as_bytes()
    except zstandard.ZstdError:
        return None


def compress(data: bytes, compressor=None) -> tuple[int, bytes]:
    """Return (codec, stored bytes); `compressor` is a dictionary's, when there is one."""
    if len(data) < COMPRESS_MIN_BYTES:
        return CODEC_PLAIN, data
    packed = (compressor or _plain()[0]).compress(data)
    if len(packed) >= len(data):
        return CODEC_PLAIN, data
    return (CODEC_ZSTD_DICT if compressor else CODEC_ZSTD), packed


def decompress(codec: int, data: bytes, decompressor=None) -> bytes:
    if codec == CODEC_PLAIN:
        return bytes(data)
    if codec == CODEC_ZSTD:
        return _plain()[1].decompress(data)
    if codec == CODEC_ZSTD_DICT and decompressor is not None:
        return decompressor.decompress(data)
    raise ValueError(f"unknown content codec {codec} (or its dictionary is missing)")


# ------------------------------------------------------------------ raw payloads

RESPONSE_REF = {"$reasonlog": "response"}
CONTENT_REF = {"$reasonlog": "response.content"}


def plain_json(value: Any) -> Any:
    """`value` as plain JSON data: SDK objects (which adapters hand over as they are) are dumped."""
    if value is None or (type(value) is dict and _PLAIN.issuperset(map(type, value.values()))
                         and (type(content := value.get("content")) is not list
                              or _DICTS.issuperset(map(type, content)))):  # (each test one pass in C)
        return value
    return orjson.loads(orjson.dumps(value, default=jsonable, option=orjson.OPT_NON_STR_KEYS))


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
_DICTS = frozenset({dict})


def raw_skeleton(raw: Any, response: dict | None, depth: int = 3) -> Any:
    """The raw payload with the response message (or its content) replaced by a reference.

    A provider's payload repeats the message that is already stored as the call's response;
    the skeleton keeps everything else (ids, usage, metadata) at a few hundred bytes.
    """
    if response is None or depth < 0:
        return raw
    # A string, number, bool or null inside equals neither a dict response nor content that is a list, a dict or
    # null (falsy, never a reference): it stays as it is, without a call (most of a payload's ids and counters).
    leaf = _LEAVES if type(response) is dict and type(response.get("content")) in _CONTENTS else _NONE
    return _skeleton(raw, response, leaf, depth)


def _skeleton(raw: Any, response: Any, leaf: frozenset, depth: int) -> Any:
    """`raw_skeleton` of `raw` (depth >= 0), `leaf` the types that stay as they are (the same at every depth).

    A dict or list in which nothing is replaced is the value itself, and one in which something is, a copy made at the
    first replacement: a skeleton is only serialised, and copying a payload's usage and metadata was most of a call's
    skeleton, with the garbage collections its allocations brought on."""
    if raw == response:
        return RESPONSE_REF
    if "content" in response and raw == response["content"] and raw:
        return CONTENT_REF
    if isinstance(raw, (dict, list)):
        plain = dict if isinstance(raw, dict) else list
        out = raw if type(raw) is plain else plain(raw)  # (a subclass is written as a plain copy, as it always was)
        if depth:
            for k, v in raw.items() if isinstance(raw, dict) else enumerate(raw):
                if type(v) not in leaf:
                    found = _skeleton(v, response, leaf, depth - 1)
                    if found is not v:
                        if out is raw:
                            out = plain(raw)
                        out[k] = found
        return out
    return raw


_LEAVES = frozenset({str, int, float, bool, type(None)})
_CONTENTS = frozenset({list, dict, type(None)})
_NONE: frozenset = frozenset()


def fill_skeleton(skeleton: Any, response: dict | None) -> Any:
    """Inverse of `raw_skeleton`, given the stored response."""
    if skeleton == RESPONSE_REF:
        return response
    if skeleton == CONTENT_REF:
        return (response or {}).get("content")
    if isinstance(skeleton, dict):
        return {k: fill_skeleton(v, response) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [fill_skeleton(v, response) for v in skeleton]
    return skeleton


# A raw payload shorter than this is stored in a zstd frame of one raw (uncompressed) block, built here: a skeleton
# of a few hundred bytes saves about a third compressed, and compressing it took a tenth of the call's row in the
# write (a level 3 context's tables missed in the cache between Python's work).
RAW_FRAME_BELOW = 1024


def pack_raw(data: bytes) -> bytes:
    """A raw payload as stored: a zstd frame (which `unpack_raw` and any zstd decoder read)."""
    if len(data) < RAW_FRAME_BELOW:
        return raw_frame(data)
    return _plain()[0].compress(data)


def raw_frame(data: bytes) -> bytes:
    """`data` (under 64 KiB) as a zstd frame of one raw block (RFC 8878 3.1.1): the magic number; a frame header
    descriptor saying a single segment whose content size follows in 1 byte (size < 256) or 2 (size - 256); then
    the block header (3 bytes, little endian: last block, type 0 raw, the size) and the bytes as they are."""
    size = len(data)
    if size < 256:
        header = b"\x28\xb5\x2f\xfd\x20" + bytes((size,))
    elif size < 65_536 + 256:
        header = b"\x28\xb5\x2f\xfd\x60" + (size - 256).to_bytes(2, "little")
    else:
        raise ValueError(f"raw_frame: {size} bytes is more than a frame of one raw block here takes")
    return header + ((size << 3) | 1).to_bytes(3, "little") + data


def unpack_raw(data: bytes, fmt: str, response_bytes: bytes | None = None) -> bytes:
    """The stored bytes of a raw payload.

    Formats `skeleton` and `bytes` are plain zstd. Databases written before schema 3 hold
    `json` and `text`, compressed with the response message as a raw-content dictionary.
    """
    if fmt in ("skeleton", "bytes") or not response_bytes:
        return _plain()[1].decompress(data)
    dictionary = zstandard.ZstdCompressionDict(response_bytes, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdDecompressor(dict_data=dictionary).decompress(data)


# ------------------------------------------------------------------ context encoding


def encode_context(ids: list[int], previous: list[int] | None) -> list:
    """Write `ids` as runs `[start, end]` into `previous` and literal ids for the rest."""
    if not previous:
        return list(ids)
    out: list = []
    i, n = 0, len(ids)
    if len(previous) >= 2 and ids[:len(previous)] == previous:  # most calls: the history resent, then new messages
        out.append([0, len(previous)])  # the longest run there is, and the first
        i = len(previous)
        if set(ids[i:]).isdisjoint(previous):  # and new messages only
            return out + ids[i:]
    where: dict[int, list[int]] = {}
    for pos, cid in enumerate(previous):
        where.setdefault(cid, []).append(pos)
    while i < n:
        start, length = _longest_run(ids, i, previous, where.get(ids[i], ()))
        if length >= 2:  # a single id is shorter written as itself
            out.append([start, start + length])
            i += length
        else:
            out.append(ids[i])
            i += 1
    return out


def _longest_run(ids: list[int], i: int, previous: list[int], starts) -> tuple[int, int]:
    best_start, best_len = -1, 0
    for start in starts:
        length = 0
        while (i + length < len(ids) and start + length < len(previous)
               and ids[i + length] == previous[start + length]):
            length += 1
        if length > best_len:
            best_start, best_len = start, length
    return best_start, best_len


def decode_context(encoded: list, previous: list[int] | None) -> list[int]:
    """Inverse of `encode_context`."""
    out: list[int] = []
    for item in encoded:
        if isinstance(item, list):
            if previous is None:
                raise ValueError("context refers to a previous call that is missing")
            out.extend(previous[item[0]:item[1]])
        else:
            out.append(item)
    return out


