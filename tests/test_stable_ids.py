"""Importers name what they import with `stable_id`: importing a file again must find the very ids the first import
wrote, whatever version of reasonlog wrote them, so the layout of an id never changes."""
from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.model import stable_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def test_the_ids_earlier_versions_wrote_are_made_again():
    assert [stable_id(None, "claude-code", "msg_01:req_1"),
            stable_id("2026-02-12T14:11:56.103000Z", "a", "b", 3),
            stable_id("1970-01-01T00:00:00Z", "x"),
            stable_id("9999-12-31T23:59:59.999999Z", "y"),
            stable_id("not an instant", "z"),
            stable_id(None),
            stable_id("2026-02-12T14:11:56Z", "\udcff", 1.5)] == [
        "0000000000AB5XWNXA6A54ATAM", "01KH933E2708X6ZEVFES28H7WX", "0000000000GBNNYDPM9R0X9G58",
        "76EZ91ZQ0044MT73D2TRG5MD97", "0000000000Y62VJDRRKPRVN55X", "0000000000DYGXHZ7XE684DNV2",
        "01KH933DZ0BT238CE159S1EQQS"]


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC))
       | st.none(), st.lists(st.text() | st.integers(), max_size=4))
def test_an_id_is_its_millisecond_then_80_bits_of_its_keys_hash(at, key):
    """ULID layout: 26 Crockford digits of 130 bits, the instant's milliseconds (48 bits) then a BLAKE2b digest."""
    text = None if at is None else at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    made = stable_id(text, *key)
    value = 0
    for digit in made:
        value = value * 32 + CROCKFORD.index(digit)
    ms = 0 if at is None else int(at.timestamp() * 1000)
    digest = hashlib.blake2b("\x1f".join(map(str, key)).encode("utf-8", "surrogatepass"), digest_size=10).digest()
    assert len(made) == 26
    assert value == (ms << 80) | int.from_bytes(digest)


class _Shown(str):
    """A text whose `str()` is not its characters (an id's key part is its `str()`)."""

    def __str__(self) -> str:
        return "shown " + super().__str__()


_PARTS = (st.text() | st.text(st.characters(categories=["Cs", "Lo", "Ll"])) | st.integers() | st.floats()
          | st.booleans() | st.none() | st.builds(_Shown, st.text(max_size=5)))


def _milliseconds(at: str | None) -> int:
    """The instant's milliseconds as an id holds them: 0 for none or for text that is not an instant, clamped."""
    try:
        instant = datetime.fromisoformat(at.replace("Z", "+00:00")) if at else None
    except ValueError:
        return 0
    return 0 if instant is None else min(max(int(instant.timestamp() * 1000), 0), 2**48 - 1)


@settings(max_examples=500, deadline=None)
@given(st.none() | st.just("2026-02-12T14:11:56.103000Z") | st.text(max_size=30), st.lists(_PARTS, max_size=4))
def test_the_fast_paths_make_the_ids_the_general_one_made(at, key):
    """`stable_id` joins two plain texts without `str()` and hashes through a copied BLAKE2b: the ids stay those of
    the general path (`str()` of every part, the key's UTF-8 with lone surrogates passed, the digest as one int)."""
    digest = hashlib.blake2b("\x1f".join(map(str, key)).encode("utf-8", "surrogatepass"), digest_size=10).digest()
    x = (_milliseconds(at) << 80) | int.from_bytes(digest)
    assert stable_id(at, *key) == "".join(CROCKFORD[(x >> (5 * i)) & 31] for i in reversed(range(26)))
