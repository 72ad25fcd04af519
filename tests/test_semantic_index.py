"""Vector search by sign codes and an exact rescore (store/vector_index.py), against the exact scan it replaces:
with as many candidates as vectors the answers are the exact scan's; with few, the answer is still in exact cosine
order and a filter never lets another session's unit through; vectors added or deleted after the index was read are
seen by the next search; recall@10 on fixed clustered vectors is pinned."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.store import SessionFilter, vector_index
from reasonlog.store.vectors import sign_code

MODEL = "test@vectors"
ALL = SessionFilter(limit=None)


def _unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype("<f4")
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _fill(store, matrix: np.ndarray, sessions: int, first: int = 0) -> None:
    """Sessions s0..s{sessions-1} (agent a0 or a1 by parity) and one unit and text per row of `matrix`, in turn."""
    def write(cur) -> None:
        for n in range(sessions):
            cur.execute("INSERT INTO sessions (id, started_at, status, agent) VALUES (?, ?, 'completed', ?)"
                        " ON CONFLICT (id) DO NOTHING", (f"s{n}", "2026-01-01T00:00:00.000000Z", f"a{n % 2}"))
        for i in range(first, first + len(matrix)):
            cur.execute("INSERT INTO unit_texts (id, hash, size, codec, data) VALUES (?, ?, 1, 0, ?)",
                        (i + 1, i.to_bytes(16, "big"), f"text {i}".encode()))
            cur.execute("INSERT INTO search_units (session_id, kind, message_idx, part, chunk, text_id)"
                        " VALUES (?, 'user', ?, 0, 0, ?)", (f"s{i % sessions}", i, i + 1))
    store._write(write)
    store.save_vectors(MODEL, [(first + i + 1, row.tobytes()) for i, row in enumerate(matrix)])


def _ranked(store, query: np.ndarray, flt: SessionFilter, limit: int, exact: bool) -> list[tuple[str, int, float]]:
    store.exact_vectors = exact
    try:
        return [(h["session_id"], h["message_idx"], h["score"])
                for h in store.vector_search(query.astype("<f4").tobytes(), MODEL, flt, limit)]
    finally:
        store.exact_vectors = False


@pytest.fixture
def store(db):
    opened = reasonlog.open_store(db)
    yield opened
    opened.close()


def test_the_sign_code_is_the_packed_sign_bits_in_whole_words():
    v = np.array([0.5, -1.0, 0.0, 2.0] + [-1.0] * 60 + [1.0], dtype="<f4")
    code = sign_code(v.tobytes())
    assert len(code) == 16 and code[0] == 0b1001_0000 and code[8] == 0b1000_0000 and code[9:] == bytes(7)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 120), seed=st.integers(0, 2**32 - 1), limit=st.integers(1, 15))
def test_with_candidates_for_every_vector_the_answer_is_the_exact_scans(n, seed, limit):
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as folder:
        store = reasonlog.open_store(Path(folder) / "s.db")
        try:
            _fill(store, _unit_vectors(rng, n, 32), sessions=7)
            (query,) = _unit_vectors(rng, 1, 32)
            for flt in (ALL, SessionFilter(agent="a1", limit=None)):
                fast, exact = _ranked(store, query, flt, limit, False), _ranked(store, query, flt, limit, True)
                assert [h[:2] for h in fast] == [h[:2] for h in exact]
                assert [h[2] for h in fast] == pytest.approx([h[2] for h in exact], abs=2e-6)
        finally:
            store.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(20, 300), seed=st.integers(0, 2**32 - 1), limit=st.integers(1, 10),
       agent=st.sampled_from([None, "a0", "a1"]), narrow=st.sampled_from([1, 4, 10**6]))
def test_with_few_candidates_the_answer_is_in_exact_order_and_in_the_filter(monkeypatch, n, seed, limit, agent,
                                                                           narrow):
    monkeypatch.setattr(vector_index, "CANDIDATES", 4)
    monkeypatch.setattr(vector_index, "PER_HIT", 1)
    monkeypatch.setattr(vector_index, "NARROW", narrow)  # 1: the texts the filter selects are listed at once
    rng = np.random.default_rng(seed)
    matrix = _unit_vectors(rng, n, 64)
    with tempfile.TemporaryDirectory() as folder:
        store = reasonlog.open_store(Path(folder) / "s.db")
        try:
            _fill(store, matrix, sessions=5)
            (query,) = _unit_vectors(rng, 1, 64)
            hits = _ranked(store, query, SessionFilter(agent=agent, limit=None), limit, False)
            assert hits and len(hits) <= limit
            for sid, idx, score in hits:
                assert score == pytest.approx(float(matrix[idx] @ query), abs=2e-6)
                assert agent is None or int(sid[1:]) % 2 == int(agent[1:])
            assert [h[2] for h in hits] == sorted((h[2] for h in hits), reverse=True)
        finally:
            store.close()


def test_vectors_added_or_deleted_after_a_search_are_seen_by_the_next(store, monkeypatch):
    rng = np.random.default_rng(5)
    matrix = _unit_vectors(rng, 40, 384)
    _fill(store, matrix[:30], sessions=3)
    query = matrix[35]
    assert _ranked(store, query, ALL, 1, False)[0][1] != 35
    _fill(store, matrix[30:], sessions=3, first=30)  # added after the index was read
    assert _ranked(store, query, ALL, 1, False)[0][1] == 35
    store.delete_sessions([f"s{35 % 3}"])  # its units, texts and vectors go; the index still holds their codes
    hits = _ranked(store, query, ALL, 40, False)
    assert {idx for _, idx, _ in hits} == {i for i in range(40) if i % 3 != 35 % 3}
    assert [h[:2] for h in hits] == [h[:2] for h in _ranked(store, query, ALL, 40, True)]


def test_codes_read_ahead_of_a_search_are_caught_up_by_it(store):
    """A CLI search reads the codes while the model loads (`warm_vectors`): vectors saved between that and the
    search are found, and the answer is the exact scan's."""
    rng = np.random.default_rng(8)
    matrix = _unit_vectors(rng, 40, 384)
    _fill(store, matrix[:30], sessions=3)
    store.warm_vectors(MODEL, 384)
    store.warm_vectors("another model", 384)  # nothing of it stored: nothing read, nothing fails
    _fill(store, matrix[30:], sessions=3, first=30)
    assert _ranked(store, matrix[35], ALL, 1, False)[0][1] == 35
    codes, exact = _ranked(store, matrix[35], ALL, 40, False), _ranked(store, matrix[35], ALL, 40, True)
    assert [h[:2] for h in codes] == [h[:2] for h in exact]
    assert [h[2] for h in codes] == pytest.approx([h[2] for h in exact], abs=2e-6)  # rounded to 6 places


def test_recall_at_10_on_fixed_clustered_vectors_is_pinned():
    """5,000 vectors in 50 clusters (seeded), 100 of them as queries, 60 candidates (1.2 %) rescored: how many of
    the exact top 10 the prefilter keeps. The real embeddings' figures are in docs/search.md."""
    rng = np.random.default_rng(24)
    centres = _unit_vectors(rng, 50, 384)
    matrix = centres[rng.integers(0, 50, 5000)] + 0.08 * rng.standard_normal((5000, 384)).astype("<f4")
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype("<f4")
    index = vector_index.VectorIndex(MODEL, 384)
    bits = np.packbits(matrix > 0, axis=1)
    index.append(np.arange(5000, dtype=np.int64), bits.view("<u8"))
    found = []
    for i in range(0, 5000, 50):
        scores = matrix @ matrix[i]
        exact = set(np.argsort(-scores, kind="stable")[:10].tolist())
        near = index.nearest(matrix[i].tobytes(), 60)
        best = set(near[np.argsort(-scores[near], kind="stable")[:10]].tolist())
        found.append(len(best & exact) / 10)
    assert round(float(np.mean(found)), 3) == pytest.approx(RECALL_PINNED)
    assert min(found) >= 0.5


RECALL_PINNED = 0.933  # measured once; the data and the code are fixed, so it moves only when the ranking does
# (0.929 while a partition chose among the codes at the k-th distance; counting takes the first of them)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 384), min_size=2, max_size=3000), st.data())
def test_the_nearest_codes_are_the_k_smallest_distances_for_any_distances(distances, data):
    """Counting replaced a partition (5x faster at 500,000 codes): for any distances and any k, the k positions
    chosen are distinct, hold the k smallest distances, and at the k-th distance the first positions are taken."""
    dist = np.array(distances, dtype=np.uint16)
    k = data.draw(st.integers(1, len(dist) - 1))
    chosen = vector_index.nearest_of(dist, k)
    assert len(chosen) == len(set(chosen.tolist())) == k
    assert sorted(dist[chosen].tolist()) == sorted(distances)[:k]
    kth = max(dist[chosen].tolist())
    at_kth = np.flatnonzero(dist == kth)
    assert sorted(chosen[dist[chosen] == kth].tolist()) == at_kth[:int((dist[chosen] == kth).sum())].tolist()
