"""The searchable text of a content (parts.py `searchable_text`) walks exact JSON types without `isinstance` and takes
the strings of a dict or a list in place; a block of text (store/text_blocks.py `write_block`) is encoded once, joined,
with each text's end from its length when it is ASCII. Both give what the rules they replaced gave, for any value and
any texts: the same index, so the same answers."""
from __future__ import annotations

import enum
import sqlite3
import sys
from array import array
from typing import Any

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.parts import _UNSEARCHED_KEYS, searchable_text
from reasonlog.store import text_blocks


class Level(enum.IntEnum):
    HIGH = 3


class Tag(str):
    pass


class Dumped:
    """An SDK object as adapters hand it over."""

    def __init__(self, fields: dict) -> None:
        self.fields = fields

    def model_dump(self, **_: Any) -> dict:
        return self.fields


def collected_with_isinstance(value: Any, out: list[str]) -> None:
    """`searchable_text`'s walk as it was."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _UNSEARCHED_KEYS:
                collected_with_isinstance(item, out)
    elif isinstance(value, list):
        for item in value:
            collected_with_isinstance(item, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))
    elif hasattr(value, "model_dump"):
        collected_with_isinstance(value.model_dump(mode="json", exclude_unset=True, warnings=False), out)


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5),
                   st.sampled_from([Level.HIGH, Tag("tagged"), (1, "in a tuple"), b"bytes"]))
KEYS = st.one_of(st.sampled_from(["text", "content", "type", "id", "input", "data", "role"]), st.integers(0, 2))
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4),
    st.dictionaries(KEYS, inner, max_size=3).map(Dumped)), max_leaves=20)


@settings(max_examples=1500, deadline=None)
@given(VALUES)
def test_searchable_text_is_the_isinstance_walks(value):
    out: list[str] = []
    collected_with_isinstance(value, out)
    assert searchable_text(value) == "\n".join(out)


def block_as_it_was(rows: list[tuple[int, str]]) -> tuple[list[int], list[int], bytes]:
    """(ids, ends, uncompressed data) of `write_block` as it was: each text encoded alone, then its NUL."""
    ids, ends, parts, size = array("q"), array("I"), [], 0
    for rid, text in rows:
        if text:
            data = text.encode("utf-8", "surrogatepass") + b"\x00"
            parts.append(data)
            size += len(data)
            ids.append(rid)
            ends.append(size)
    return list(ids), list(ends), b"".join(parts)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=8), st.text(alphabet="ab\x00", max_size=4),
                          st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2)),
                max_size=8))
def test_a_block_holds_the_bytes_each_text_encoded_alone_gave(texts):
    rows = list(enumerate(texts, start=1))
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE search_blocks (id INTEGER PRIMARY KEY, kind, lo, hi, ids, ends, data)")
        text_blocks.write_block(conn.cursor(), 0, rows)
        stored = conn.execute("SELECT ids, ends, data FROM search_blocks").fetchall()
    if not any(texts):
        assert stored == []
        return
    ids, ends, data = stored[0]
    assert sys.byteorder == "little"  # (the order blocks are stored in)
    assert (list(array("q", ids)), list(array("I", ends)),
            zstandard.ZstdDecompressor().decompress(data)) == block_as_it_was(rows)
