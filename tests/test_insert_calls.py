"""The writer inserts a batch's calls several rows to a statement (store/rows.py `insert_calls`), writing a column
that is NULL in every row of a statement as a literal NULL rather than binding None: the table holds what one
INSERT a row, every value bound, stored, for any rows (whichever columns are NULL, in as many patterns as make the
writer stop making new statements)."""
from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.store.rows import CALL_INSERT_COLUMNS, INSERT_CALL, insert_calls

WIDTH = len(CALL_INSERT_COLUMNS)
VALUES = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3), st.binary(max_size=3))


@st.composite
def batches(draw) -> list[tuple]:
    """Rows whose columns are NULL often together (as a recorder's are: no error, no replay), now and then not."""
    nulls = draw(st.lists(st.booleans(), min_size=WIDTH, max_size=WIDTH))
    count = draw(st.integers(1, 21))
    return [tuple(None if null and draw(st.integers(0, 9)) else draw(st.one_of(st.none(), VALUES))
                  for null in nulls) for _ in range(count)]


def stored(insert, rows: list[tuple]) -> list[tuple]:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE calls ({', '.join(CALL_INSERT_COLUMNS)})")  # no affinity: values as they were given
    insert(db.cursor(), rows)
    return db.execute(f"SELECT {', '.join(f'{c}, typeof({c})' for c in CALL_INSERT_COLUMNS)} FROM calls"
                      " ORDER BY rowid").fetchall()


@settings(max_examples=60, deadline=None)
@given(rows=batches())
def test_any_calls_are_stored_as_one_insert_a_row_stores_them(rows):
    assert stored(insert_calls, rows) == stored(lambda cur, rows: cur.executemany(INSERT_CALL, rows), rows)
