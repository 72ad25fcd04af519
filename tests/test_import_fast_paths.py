"""The import's fast paths against the general ones they stand in for: each gives the same answer on every input
(hypothesis), so a transcript imports to the same rows either way."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.model import format_instant, is_utc_text, utc_text
from reasonlog.wire.rules import UTC_TEXT

_OTHER = st.sampled_from("d-T:.Z0٠١٢٣٤٥٦٧٨٩０１２３") | st.characters()


@st.composite
def _near_instants(draw) -> str:
    """UTC text, and text a character or two or a length away from it (other digits, a `d`, a missing part)."""
    parts = ["dddd", "-", "dd", "-", "dd", "T", "dd", ":", "dd", ":", "dd"]
    if draw(st.booleans()):
        parts += [".", "d" * draw(st.integers(0, 8))]
    parts.append(draw(st.sampled_from(["Z", "Z", "z", "+00:00", "", "ZZ"])))
    text = "".join(draw(st.sampled_from("0123456789")) if ch == "d" else ch for part in parts for ch in part)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(_OTHER) + text[at + 1:]
    return text


@settings(max_examples=1500, deadline=None)
@given(_near_instants() | st.text(max_size=30))
def test_utc_text_is_told_as_the_pattern_tells_it(text):
    """`is_utc_text` reads ASCII text by its shape (digits as `d`) instead of `UTC_TEXT`, whose `\\d` takes any
    Unicode digit: both say the same of every text, and `format_instant` pads the fraction as it did."""
    matched = UTC_TEXT.fullmatch(text) is not None
    assert is_utc_text(text) == matched
    if matched:
        fraction = text[20:-1] if len(text) > 20 else ""
        assert utc_text(text) == format_instant(text) == f"{text[:19]}.{fraction:0<6}Z"
    else:
        assert utc_text(text) is None


def test_named_instants():
    assert utc_text("2026-02-12T14:11:56.103Z") == "2026-02-12T14:11:56.103000Z"
    assert utc_text("2026-02-12T14:11:56Z") == "2026-02-12T14:11:56.000000Z"
    assert utc_text("2026-02-12T14:11:56.103000Z") == "2026-02-12T14:11:56.103000Z"
    assert utc_text("2026-02-12T14:11:56.1030000Z") is None
    assert utc_text("2026-02-12T14:11:56.Z") is None
    assert utc_text("dddd-dd-ddTdd:dd:ddZ") is None
    assert utc_text("٢٠٢٦-02-12T14:11:56Z") == "٢٠٢٦-02-12T14:11:56.000000Z"  # as the pattern takes it
    assert utc_text("2026-02-12 14:11:56Z") is None
