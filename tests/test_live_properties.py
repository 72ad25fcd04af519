"""Properties of the live pages' page cache and of the judge's reply reading (issue 38), over generated inputs."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reasonlog.evaluation import CheckError
from reasonlog.evaluation.judge import number_of
from reasonlog.server.live import PageCache

puts = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["/", "/usage", "/sessions/a", "/review"]),
                          st.text(max_size=300)), max_size=60)


@given(puts)
def test_the_page_cache_holds_only_the_newest_markers_pages_within_its_bytes(steps):
    cache = PageCache(max_bytes=1000)
    for marker, address, body in steps:
        cache.put((marker, address), body)
    if not steps:
        return
    last_marker = steps[-1][0]
    kept = {a: cache.get((m, a)) for m, a, _ in steps if cache.get((m, a)) is not None}
    assert all(cache.get((m, a)) is None for m, a, _ in steps if m != last_marker)
    newest = {}
    run = []
    for marker, address, body in reversed(steps):  # the last run of puts under the last marker
        if marker != last_marker:
            break
        run.append((address, body))
    for address, body in reversed(run):
        newest.setdefault(address, body)  # a page is kept as first rendered under its marker
    assert all(newest[a] == body for a, body in kept.items())
    assert sum(len(b) for b in kept.values()) <= 1000


@given(st.floats(0, 1, allow_nan=False), st.sampled_from(["{}", "Score: {}", "I rate it {}.", "{}\n\nbecause…"]))
def test_the_judges_number_is_found_in_any_wording(value, wording):
    text = f"{value:.3f}".rstrip("0").rstrip(".") if value not in (0, 1) else str(int(value))
    assert number_of(wording.format(text)) == float(text)


@given(st.text(alphabet="abcdefghij .,:!?", max_size=80))
def test_a_reply_without_a_number_is_a_check_error(reply):
    with pytest.raises(CheckError, match="no number between 0 and 1"):
        number_of(reply)
