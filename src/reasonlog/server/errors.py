"""A store error's HTTP status, by its kind (never by its words): the API and the dashboard answer alike."""
from __future__ import annotations

from ..store import Ambiguous, Invalid, NotFound, ReadOnly, StoreError, Unavailable

STATUS: tuple[tuple[type[StoreError], int], ...] = (
    (NotFound, 404), (Ambiguous, 400), (Invalid, 400), (Unavailable, 503), (ReadOnly, 503))


def status_of(exc: BaseException) -> int:
    """404 for an id nothing has, 503 for a database that cannot be used (or written) now, else 400."""
    return next((status for kind, status in STATUS if isinstance(exc, kind)), 400)
