"""The sums a batch adds to `usage_rollup` (store/kept.py `Tally`), counted call by call as the writer stores them:
the same rows as the rule written before the writer handed over its usage's counters as they are (a tuple in
TOKENS' order), for any calls, in any order."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.accounting import TOKENS
from reasonlog.store.kept import Tally

COUNTS = st.one_of(st.none(), st.integers(0, 3), st.integers(0, 10**12))
CALLS = st.lists(st.tuples(
    st.sampled_from(["s1", "s2"]),
    st.sampled_from(["2025-01-01T10:00:00.000000Z", "2025-01-01T09:00:00.000000Z", "2025-01-02T00:00:00.000000Z"]),
    st.sampled_from([None, "", "claude-haiku-4-5"]), st.sampled_from(["ok", "error"]),
    st.one_of(st.none(), st.floats(0, 1e6), st.integers(0, 10**6)),
    st.tuples(*(COUNTS for _ in TOKENS)), st.one_of(st.none(), st.floats(0, 100))), max_size=12)


def rows_as_they_were(calls) -> dict:
    """`Tally.add` as it was: the counters copied to a list, each added as `value or 0`, the last instant by max."""
    rows: dict = {}
    for session_id, started_at, model, status, latency_ms, tokens, cost_usd in calls:
        key = (session_id, started_at[:10], model or "")
        row = rows.get(key)
        if row is None:
            row = rows[key] = [0, 0, *(0 for _ in TOKENS), None, 0, 0.0, 0, started_at]
        figures = list(tokens)
        row[0] += 1
        row[1] += status == "error"
        for n, value in enumerate(figures, 2):
            row[n] += value or 0
        at = 2 + len(TOKENS)
        if cost_usd is not None:
            row[at] = (row[at] or 0.0) + cost_usd
        row[at + 1] += cost_usd is None and figures[0] is not None
        if latency_ms is not None:
            row[at + 2] += latency_ms
            row[at + 3] += 1
        row[at + 4] = max(row[at + 4], started_at)
    return rows


@settings(max_examples=500, deadline=None)
@given(calls=CALLS)
def test_a_batch_sums_its_calls_as_the_rule_before(calls):
    tally = Tally()
    for call in calls:
        tally.add(*call)
    expected = rows_as_they_were(calls)
    assert {k: [repr(v) for v in row] for k, row in tally.rows.items()} == \
        {k: [repr(v) for v in row] for k, row in expected.items()}
