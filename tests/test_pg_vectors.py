"""Search by meaning ranked by pgvector where the PostgreSQL server has it (migration 21, store/pg_vectors.py):
its answers are the codes' and the exact scan's wherever those are exact, with and without a filter; a filtered
search the index answers short falls back to the exact scan; vectors stored before the extension are indexed by the
embedding pass, which a stop leaves resumable; a server (or a role) without pgvector keeps the codes in memory.

The pgvector tests run on the server of REASONLOG_TEST_POSTGRES when it offers the extension (CI's second pass, on
.ci/postgres-vector) and skip on one that does not (Debian's PostgreSQL 15), unless REASONLOG_REQUIRE_PGVECTOR is set:
then a server without it fails them."""
from __future__ import annotations

import itertools
import os
import threading
import uuid

import numpy as np
import psycopg
import pytest
from conftest import NO_POSTGRES, POSTGRES, postgres_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
import reasonlog.store.postgres as postgres_store
from reasonlog.semantic.backlog import embed_backlog
from reasonlog.store import SessionFilter, pg_vectors

ALL = SessionFilter(limit=None)
SESSIONS = 6  # 30 distinct user texts each; session n: agent a{n % 2}, run r{n % 3}, started on day n + 1
FILTERS = {"all": (ALL, {0, 1, 2, 3, 4, 5}), "agent": (SessionFilter(agent="a1", limit=None), {1, 3, 5}),
           "run": (SessionFilter(run="r0", limit=None), {0, 3}),
           "dates": (SessionFilter(since="2026-01-04", until="2026-01-05T12:00:00Z", limit=None), {3, 4})}
MODELS = itertools.count()


def _offers_pgvector() -> bool:
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None


@pytest.fixture(scope="module")
def pgvector_server() -> None:
    if not POSTGRES:
        pytest.skip(NO_POSTGRES)
    if not _offers_pgvector():
        if os.environ.get("REASONLOG_REQUIRE_PGVECTOR"):
            pytest.fail(f"REASONLOG_REQUIRE_PGVECTOR is set but {POSTGRES} offers no pgvector")
        pytest.skip("this PostgreSQL offers no pgvector (.ci/postgres-vector starts one that does)")


@pytest.fixture
def url(pgvector_server):
    yield from postgres_schema()


def _record(target) -> list[str]:
    rec = reasonlog.Recorder(target, writer="sync", strict=True)
    ids = []
    for n in range(SESSIONS):
        with rec.session(agent=f"a{n % 2}", run=f"r{n % 3}", started_at=f"2026-01-0{n + 1}T00:00:00Z") as s:
            for i in range(30):
                s.call(messages=[{"role": "user", "content": f"session {n} asks question {i}"}], response=None)
            ids.append(s.id)
    rec.close()
    return ids


def _unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype("<f4")
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _embed(store, model: str, rng: np.random.Generator, n: int, dim: int) -> int:
    """Random vectors of `model` for `n` of the unit texts chosen at random, through the store's own save; how many."""
    every = store.unit_backlog(model, 10_000)
    texts = [every[i] for i in sorted(rng.choice(len(every), size=min(n, len(every)), replace=False))]
    store.save_vectors(model, [(tid, v.tobytes()) for (tid, _), v in zip(texts, _unit_vectors(rng, len(texts), dim),
                                                                         strict=True)])
    return len(texts)


def _search(store, query: np.ndarray, model: str, flt: SessionFilter, limit: int, how: str) -> list[tuple]:
    store.exact_vectors, store.pgvector = how == "exact", how == "pgvector"
    try:
        return [(h["session_id"], h["message_idx"], h["score"])
                for h in store.vector_search(query.astype("<f4").tobytes(), model, flt, limit)]
    finally:
        store.exact_vectors, store.pgvector = False, True


def _same(a: list[tuple], b: list[tuple]) -> bool:
    return [h[:2] for h in a] == [h[:2] for h in b] and [h[2] for h in a] == pytest.approx([h[2] for h in b],
                                                                                           abs=2e-6)


@pytest.fixture(scope="module")
def recorded(pgvector_server):
    """One store with the sessions recorded and cut into units, shared by the examples (each embeds its own model)."""
    for target in postgres_schema():
        sessions = _record(target)
        store = reasonlog.open_store(target)
        store.cut_units()
        yield store, sessions
        store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 180), seed=st.integers(0, 2**32 - 1), limit=st.integers(1, 15),
       dim=st.sampled_from([8, 64, 384]), which=st.sampled_from(sorted(FILTERS)))
def test_pgvector_answers_are_the_codes_and_the_exact_scans_on_generated_corpora(recorded, n, seed, limit, dim,
                                                                                 which):
    """Fewer vectors than the candidates (400): the codes rescore them all, and pgvector's iterative scan returns
    them all, so both are exact; filtered by agent, run or dates alike, never a unit of another session."""
    store, sessions = recorded
    model, rng = f"gen{next(MODELS)}", np.random.default_rng(seed)
    _embed(store, model, rng, n, dim)
    flt, kept = FILTERS[which]
    (query,) = _unit_vectors(rng, 1, dim)
    assert store.vector_ranking(model, dim) == "pgvector"
    by_index, codes, exact = (_search(store, query, model, flt, limit, how) for how in ("pgvector", "codes", "exact"))
    assert _same(by_index, exact) and _same(codes, exact)
    assert {sid for sid, _, _ in by_index} <= {sessions[k] for k in kept}


def test_a_filtered_search_the_index_answers_short_is_answered_by_the_exact_scan(url, monkeypatch):
    """More vectors than an iterative scan may look at (MAX_SCAN, made 50 here) and a filter that passes too few of
    them: the index's answer may have been cut, so the exact scan restricted by the filter answers."""
    monkeypatch.setattr(pg_vectors, "MAX_SCAN", 50)
    sessions = _record(url)
    store = reasonlog.open_store(url)
    try:
        store.cut_units()
        rng = np.random.default_rng(7)
        assert _embed(store, "m", rng, 180, 64) == 180
        (query,) = _unit_vectors(rng, 1, 64)
        for flt, kept in FILTERS.values():
            by_index, exact = _search(store, query, "m", flt, 10, "pgvector"), _search(store, query, "m", flt, 10,
                                                                                       "exact")
            assert len(by_index) == 10 and _same(by_index, exact)
            assert {sid for sid, _, _ in by_index} <= {sessions[k] for k in kept}
    finally:
        store.close()


class StopAfter(threading.Event):
    """A `stop` that is set once it has been asked `checks` times (a pass stopped between two batches)."""

    def __init__(self, checks: int):
        super().__init__()
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks < 0 or super().is_set()


def test_vectors_stored_before_migration_21_are_indexed_by_the_embedding_pass_resumed_after_a_stop(url, monkeypatch):
    """A database at schema 20 with vectors: upgraded, its vectors have no `embedding`, so the codes rank (and answer
    exactly); a pass stopped after two batches of 40 leaves the rest for the next, which indexes each vector once;
    then pgvector ranks, with the same answers."""
    every = postgres_store.PG_MIGRATIONS
    monkeypatch.setattr(postgres_store, "PG_MIGRATIONS", every[:20])
    _record(url)
    store = reasonlog.open_store(url)
    store.cut_units()
    rng = np.random.default_rng(3)
    assert _embed(store, "m", rng, 180, 32) == 180
    store.close()
    monkeypatch.setattr(postgres_store, "PG_MIGRATIONS", every)
    monkeypatch.setattr(pg_vectors, "FILL", 40)
    store = reasonlog.open_store(url)
    try:
        (query,) = _unit_vectors(rng, 1, 32)
        exact = _search(store, query, "m", ALL, 10, "exact")
        assert store.vector_ranking("m", 32) == "codes"
        assert _same(_search(store, query, "m", ALL, 10, "pgvector"), exact)
        assert store.fill_vector_index(StopAfter(2)) == 80
        assert store.vector_ranking("m", 32) == "codes"
        done = embed_backlog(store, _NoTexts())
        assert (done.indexed, done.embedded) == (100, 0)
        assert store.vector_ranking("m", 32) == "pgvector"
        assert _same(_search(store, query, "m", ALL, 10, "pgvector"), exact)
        assert store.fill_vector_index() == 0
    finally:
        store.close()


class _NoTexts:
    """An embedder of model "m", which has a vector for every text already: asked for none."""

    model = "m"

    def embed(self, texts: list[str]) -> list[bytes]:
        raise AssertionError(f"asked to embed {len(texts)} texts")


def test_a_role_that_may_not_create_the_extension_keeps_the_codes_and_the_same_answers():
    """Creating pgvector needs a superuser: a database owned by a plain role migrates without it (no `embedding`
    column), and search by meaning ranks by the codes in memory, exactly as before. On a server without pgvector
    (Debian's PostgreSQL 15) the same holds for every role."""
    if not POSTGRES:
        pytest.skip(NO_POSTGRES)
    name = "reasonlog_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER")
        admin.execute(f"CREATE DATABASE {name} OWNER {name}")
    info = psycopg.conninfo.conninfo_to_dict(POSTGRES)
    url = f"postgresql://{name}@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/{name}"
    try:
        sessions = _record(url)
        store = reasonlog.open_store(url)
        try:
            store.cut_units()
            rng = np.random.default_rng(11)
            _embed(store, "m", rng, 120, 16)
            (query,) = _unit_vectors(rng, 1, 16)
            assert store.vector_ranking("m", 16) == "codes"
            assert store.fill_vector_index() == 0
            for flt, kept in FILTERS.values():
                codes, exact = _search(store, query, "m", flt, 5, "pgvector"), _search(store, query, "m", flt, 5,
                                                                                      "exact")
                assert _same(codes, exact)
                assert {sid for sid, _, _ in codes} <= {sessions[k] for k in kept}
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name ="
                                    " 'unit_vectors' ORDER BY ordinal_position").fetchall() == \
                    [("id",), ("model",), ("text_id",), ("dim",), ("code",), ("vector",)]
        finally:
            store.close()
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE {name}")
