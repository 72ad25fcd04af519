"""Annotations and scores (docs/review.md): notes, labels and named scores that a person, a code check or an LLM
judge adds to a session, an exchange or a call after it was recorded. Dialect-neutral (`?` placeholders).

They are no recording: nothing a recorder sends carries them, and a review never changes what was recorded. So
they are written here in one transaction of their own, not as events of the write path; the JSONL export
carries them as `annotation` records (version 4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..model import new_id, utc_now
from ..wire.api import AnnotationJSON
from . import answers, ids
from .terms import SCORE_TEST, Invalid, NotFound, ScoreTest, finite_number

SOURCES = ("human", "code", "llm")
COLUMNS = ("id", "session_id", "exchange_id", "call_id", "kind", "name", "value", "number", "author", "source",
           "created_at")


@dataclass(frozen=True)
class Target:
    """What an annotation is about: a session, or one of its exchanges or calls."""

    session_id: str
    exchange_id: str | None = None
    call_id: str | None = None


def resolve_target(cur, ref: str) -> Target:
    """A session (id, prefix or external id), a call (`SESSION#N`, id or prefix) or an exchange (its id)."""
    if "#" in ref:
        return _call_target(cur, ids.resolve_id(cur, "call", ref))
    try:
        return Target(ids.resolve_id(cur, "session", ref))
    except NotFound:
        pass
    row = cur.execute("SELECT session_id FROM exchanges WHERE id = ?", (ref,)).fetchone()
    if row is not None:
        return Target(row[0], exchange_id=ref)
    try:
        return _call_target(cur, ids.resolve_id(cur, "call", ref))
    except NotFound:
        raise NotFound(f"no session, exchange or call matches {ref!r}") from None


def _call_target(cur, call_id: str) -> Target:
    session_id, exchange_id = cur.execute("SELECT session_id, exchange_id FROM calls WHERE id = ?",
                                          (call_id,)).fetchone()
    return Target(session_id, exchange_id, call_id)


def items_of(note: str | None, labels: dict[str, Any] | None, scores: dict[str, Any] | None) -> list[tuple]:
    """(kind, name, value text, number) of each item given; Invalid naming what cannot be one."""
    items: list[tuple] = []
    if note is not None:
        if not isinstance(note, str) or not note.strip():
            raise Invalid("note: expected non-empty text")
        items.append(("note", None, note, None))
    for key, value in (labels or {}).items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise Invalid(f"label {key!r}: expected a non-empty name and a text value, got {value!r}")
        items.append(("label", key, value, None))
    for name, value in (scores or {}).items():
        items.append(("score", *_score(name, value)))
    if not items:
        raise Invalid("nothing to add: give a note, a label or a score")
    return items


def _score(name: Any, value: Any) -> tuple[str, str, float | None]:
    if not isinstance(name, str) or not name or SCORE_TEST.match(name + "=0") is None:
        raise Invalid(f"score name {name!r}: expected a name without spaces or <, >, =, !")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Invalid(f"score {name}: expected a number or a category (text), got {value!r}")
    if isinstance(value, str):
        number = finite_number(value)
        if not value.strip():
            raise Invalid(f"score {name}: expected a number or a category, got empty text")
        return name, value, number
    if not math.isfinite(value):
        raise Invalid(f"score {name}: {value} is not a finite number")
    return name, repr(float(value)) if isinstance(value, float) else str(value), float(value)


def add(cur, ref: str, items: list[tuple], author: str | None, source: str,
        replace: bool = False) -> list[AnnotationJSON]:
    """Write the items about `ref` (one transaction, the caller's); their rows in the API form. `replace`: first
    remove what the same author and source gave the same target under the same names (a check run again)."""
    if source not in SOURCES:
        raise Invalid(f"source: expected one of {', '.join(SOURCES)}, got {source!r}")
    if author is not None and (not isinstance(author, str) or not author):
        raise Invalid(f"by: expected a non-empty name, got {author!r}")
    target = resolve_target(cur, ref)
    if replace:
        _remove_earlier(cur, target, items, author, source)
    now = utc_now()
    rows = [dict(zip(COLUMNS, (new_id(), target.session_id, target.exchange_id, target.call_id, kind, name, value,
                               number, author, source, now), strict=True)) for kind, name, value, number in items]
    insert_rows(cur, rows)
    return [answers.annotation(r) for r in rows]


def _remove_earlier(cur, target: Target, items: list[tuple], author: str | None, source: str) -> None:
    if author is None:
        raise Invalid("replacing earlier annotations needs `by`: whose earlier ones to replace")
    on = ("call_id = ?", [target.call_id]) if target.call_id else \
        ("exchange_id = ? AND call_id IS NULL", [target.exchange_id]) if target.exchange_id else \
        ("exchange_id IS NULL AND call_id IS NULL", [])
    for kind, name, _, _ in items:
        named = ("name = ?", [name]) if name is not None else ("name IS NULL", [])
        cur.execute(f"DELETE FROM annotations WHERE session_id = ? AND {on[0]} AND kind = ? AND {named[0]}"
                    " AND author = ? AND source = ?", [target.session_id, *on[1], kind, *named[1], author, source])


def insert_rows(cur, rows: list[dict]) -> None:
    cur.executemany(f"INSERT INTO annotations ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                    [[r[c] for c in COLUMNS] for r in rows])


def rows_of(cur, session_id: str) -> list[dict]:
    """A session's annotations as stored, oldest first."""
    return [dict(zip(COLUMNS, r, strict=True)) for r in cur.execute(
        f"SELECT {', '.join(COLUMNS)} FROM annotations WHERE session_id = ? ORDER BY created_at, id", (session_id,))]


def list_for(cur, ref: str | None) -> list[AnnotationJSON]:
    """The annotations of a target (a session: with those of its exchanges and calls), or the newest 1,000."""
    if ref is None:
        rows = [dict(zip(COLUMNS, r, strict=True)) for r in cur.execute(
            f"SELECT {', '.join(COLUMNS)} FROM annotations ORDER BY created_at DESC, id DESC LIMIT 1000")]
        return [answers.annotation(r) for r in rows]
    target = resolve_target(cur, ref)
    rows = rows_of(cur, target.session_id)
    if target.call_id is not None:
        rows = [r for r in rows if r["call_id"] == target.call_id]
    elif target.exchange_id is not None:
        rows = [r for r in rows if r["exchange_id"] == target.exchange_id]
    return [answers.annotation(r) for r in rows]


def filter_sql(scores: tuple[ScoreTest, ...], has_note: bool, alias: str) -> tuple[list[str], list]:
    """Conditions on sessions: each score test holds for some score of that name on the session or on anything
    in it; `has_note`: a note on the session or anything in it."""
    where: list[str] = []
    args: list = []
    inside = f"EXISTS (SELECT 1 FROM annotations a WHERE a.session_id = {alias}.id AND "
    for test in scores:
        column = "a.number" if isinstance(test.value, float) else "a.value"
        where.append(inside + f"a.kind = 'score' AND a.name = ? AND {column} {_sql_op(test.op)} ?)")
        args += [test.name, test.value]
    if has_note:
        where.append(inside + "a.kind = 'note')")
    return where, args


def _sql_op(op: str) -> str:
    return "<>" if op == "!=" else op
