"""Content addressing: canonical JSON, hashes, compression, and the context encoding.

Agents resend their whole history on every call. Each distinct content is stored once, keyed
by the hash of its canonical JSON, and a call's context is written as runs into the previous
call's context plus the ids that are new, so storage grows with the session, not its square.
"""
from __future__ import annotations

import hashlib
from typing import Any

import orjson
import zstandard

CODEC_PLAIN = 0
CODEC_ZSTD = 1
# Below this many bytes zstd's frame header costs more than it saves.
COMPRESS_MIN_BYTES = 96

_compressor = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=False)
_decompressor = zstandard.ZstdDecompressor()


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8. Equal values give equal bytes."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise TypeError(f"not JSON-serialisable: {exc}") from None


def content_hash(data: bytes) -> bytes:
    """The 128-bit BLAKE2b digest that addresses a content."""
    return hashlib.blake2b(data, digest_size=16).digest()


def compress(data: bytes) -> tuple[int, bytes]:
    """Return (codec, stored bytes)."""
    if len(data) < COMPRESS_MIN_BYTES:
        return CODEC_PLAIN, data
    packed = _compressor.compress(data)
    return (CODEC_ZSTD, packed) if len(packed) < len(data) else (CODEC_PLAIN, data)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == CODEC_PLAIN:
        return bytes(data)
    if codec == CODEC_ZSTD:
        return _decompressor.decompress(data)
    raise ValueError(f"unknown content codec {codec}")


def compress_against(data: bytes, reference: bytes | None) -> bytes:
    """Compress `data` with `reference` as a raw-content dictionary.

    A raw response payload repeats the response message it carries; compressing it against
    that message (already stored) makes the repeated part nearly free.
    """
    if not reference:
        return _compressor.compress(data)
    dictionary = zstandard.ZstdCompressionDict(reference, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdCompressor(level=3, dict_data=dictionary).compress(data)


def decompress_against(data: bytes, reference: bytes | None) -> bytes:
    if not reference:
        return _decompressor.decompress(data)
    dictionary = zstandard.ZstdCompressionDict(reference, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdDecompressor(dict_data=dictionary).decompress(data)


# ------------------------------------------------------------------ context encoding


def encode_context(ids: list[int], previous: list[int] | None) -> list:
    """Write `ids` as runs `[start, end]` into `previous` and literal ids for the rest."""
    if not previous:
        return list(ids)
    where: dict[int, list[int]] = {}
    for pos, cid in enumerate(previous):
        where.setdefault(cid, []).append(pos)
    out: list = []
    i, n = 0, len(ids)
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


def new_in_timeline(ids: list[int], previous: list[int] | None, previous_response: int | None) -> list[int]:
    """The messages of a context that the session's timeline has not shown yet.

    They are what follows the previous response (or the end of the previous context) in
    this context; when neither is there (a compaction rewrote the window), every message
    the previous context did not hold.
    """
    if not previous:
        return list(ids)
    anchors = {previous_response, previous[-1]} - {None}
    for pos in range(len(ids) - 1, -1, -1):
        if ids[pos] in anchors:
            return ids[pos + 1:]
    seen = set(previous)
    return [cid for cid in ids if cid not in seen]
