"""Annotations as the store's methods and the public `reasonlog.annotate` (docs/review.md), and the review queue,
which reads the sessions' list rows: above store/annotation.py (the rows, which reading uses) in store/'s order.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..wire.api import AnnotationJSON
from . import reading
from .annotation import add, items_of, list_for
from .terms import SessionFilter


def review_queue(cur, limit: int) -> list[dict]:
    """Sessions no person reviewed yet (no annotation with source `human` on them or anything in them), top-level
    ones only: failed and interrupted first, then by their lowest score (a code check's or a judge's, lowest
    first), then newest first. Each its list row with `lowest_score` (None: none scored)."""
    found = cur.execute(
        "SELECT id, lowest FROM (SELECT s.id, s.status, s.started_at, (SELECT MIN(a.number) FROM annotations a"
        " WHERE a.session_id = s.id AND a.kind = 'score') AS lowest FROM sessions s"
        " WHERE s.parent_session_id IS NULL AND NOT EXISTS (SELECT 1 FROM annotations h"
        " WHERE h.session_id = s.id AND h.source = 'human')) q"
        " ORDER BY CASE WHEN status IN ('failed', 'interrupted') THEN 0 ELSE 1 END,"
        " CASE WHEN lowest IS NULL THEN 1 ELSE 0 END, lowest, started_at DESC, id DESC"
        f" LIMIT {int(limit)}").fetchall()
    if not found:
        return []
    rows = {r["id"]: r for r in reading.list_sessions(cur, SessionFilter(limit=None), [sid for sid, _ in found])}
    return [{**rows[sid], "lowest_score": lowest} for sid, lowest in found]


class AnnotationStore:
    """The store's annotation methods, for `SQLStore` (which provides `_read` and `_write`)."""

    _read: Callable[..., Any]
    _write: Callable[..., Any]

    def annotate(self, target: str, note: str | None = None, labels: dict[str, str] | None = None,
                 scores: dict[str, float | int | str] | None = None, by: str | None = None,
                 source: str = "human", replace: bool = False) -> list[AnnotationJSON]:
        """Add a note, labels and scores to a session, an exchange or a call (`SESSION#N`); the rows added.
        `replace`: first remove what `by` (with `source`) gave this target under the same names."""
        return self._write(add, target, items_of(note, labels, scores), by, source, replace)

    def list_annotations(self, target: str | None = None) -> list[AnnotationJSON]:
        """The annotations of a session (with its exchanges' and calls'), an exchange or a call; oldest first."""
        return self._read(list_for, target)

    def review_queue(self, limit: int = 50) -> list[dict]:
        """The sessions a person has not reviewed yet, failing and low-scored ones first (see `review_queue`)."""
        return self._read(review_queue, limit)
