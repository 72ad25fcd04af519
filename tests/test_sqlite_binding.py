"""bytes and None bound without sqlite3's failing adapter lookup (issue 34): the SQLite store registers adapters that
return the value itself (`store/sqlite.py`), so a value binds as it did without them, and a program's own adapter,
registered first, is kept."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlog.store.sqlite  # noqa: F401  (registers the adapters)

OURS = [(bytes, sqlite3.PrepareProtocol), (type(None), sqlite3.PrepareProtocol)]


@contextmanager
def without_ours():
    kept = {key: sqlite3.adapters.pop(key) for key in OURS}
    try:
        yield
    finally:
        sqlite3.adapters.update(kept)


def _stored(rows: list[tuple]) -> list[tuple]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    for row in rows:
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", row)
    return conn.execute("SELECT typeof(a), a, typeof(b), b, typeof(c), c FROM t ORDER BY rowid").fetchall()


VALUES = st.one_of(st.binary(max_size=20), st.none(), st.integers(-2**63, 2**63 - 1), st.text(max_size=10),
                   st.floats(allow_nan=False), st.builds(bytearray, st.binary(max_size=8)))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(VALUES, VALUES, VALUES), min_size=1, max_size=5))
def test_values_are_stored_as_without_the_adapters(rows):
    with without_ours():
        want = _stored(rows)
    assert _stored(rows) == want


def test_bytes_bind_as_a_blob_and_none_as_null():
    conn = sqlite3.connect(":memory:")
    assert conn.execute("SELECT typeof(?), ?, typeof(?)", (b"\x00k", b"\x00k", None)).fetchone() == \
        ("blob", b"\x00k", "null")


def test_an_adapter_the_program_registered_first_is_kept():
    code = ("import sqlite3\n"
            "sqlite3.register_adapter(bytes, lambda b: b.hex())\n"
            "import reasonlog.store.sqlite\n"
            "print(sqlite3.connect(':memory:').execute('SELECT typeof(?), ?', (b'ab', b'ab')).fetchone())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "('text', '6162')"
