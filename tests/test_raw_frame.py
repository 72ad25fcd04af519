"""A raw payload is stored as a zstd frame: a short one in a frame of one raw block built without compressing
(`content.raw_frame`), a longer one compressed. Any zstd decoder reads both, and `unpack_raw` gives the bytes back."""
from __future__ import annotations

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.store.content import RAW_FRAME_BELOW, pack_raw, raw_frame, unpack_raw


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3 * RAW_FRAME_BELOW))
def test_a_packed_raw_payload_reads_back_as_it_was(data):
    packed = pack_raw(data)
    assert unpack_raw(packed, "bytes") == data
    assert zstandard.ZstdDecompressor().decompress(packed) == data
    assert zstandard.frame_content_size(packed) == len(data)
    assert (packed == raw_frame(data)) == (len(data) < RAW_FRAME_BELOW)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 65_535 + 256))
def test_a_raw_frame_of_any_size_it_takes_is_a_zstd_frame(size):
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert zstandard.ZstdDecompressor().decompress(raw_frame(data)) == data
