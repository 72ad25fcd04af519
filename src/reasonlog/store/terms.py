"""The words every part of the store speaks in: its errors by kind, and `SessionFilter` (with `ScoreTest`, a
condition on a score). The bottom of store/: the package's `__init__` re-exports them with the protocols.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

SCORE_TEST = re.compile(r"^\s*([^<>=!\s]+)\s*(<=|>=|!=|<|>|=)\s*(.+?)\s*$")
_NUMERIC_OPS = ("<", "<=", ">", ">=")


class StoreError(RuntimeError):
    """The store cannot do what was asked. Its kinds below say why, so each surface answers once by kind (HTTP
    status, CLI exit code) and never by the words of the message."""


class NotFound(StoreError):
    """No session, call or record has that id (or prefix)."""


class Ambiguous(StoreError):
    """A prefix matches several ids; the message lists them."""


class Invalid(StoreError):
    """What was given cannot be stored or read as asked (a bad record, a bad value); the message names it."""


class Unavailable(StoreError):
    """The database cannot be used now (away, locked past its timeout, damaged); asking again later may work."""


class ReadOnly(StoreError):
    """What was asked writes, and the store cannot write."""


def failure_of(exc: BaseException) -> StoreError | None:
    """The kind of an error a database driver raised past the store (a file damaged past what opening checks, a
    server gone mid-command): Unavailable, with the driver's first line; None when `exc` is no driver's."""
    module = type(exc).__module__
    if module.startswith(("sqlite3", "psycopg")) or module == "_sqlite3":
        return Unavailable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    return None


class ReadOnlyDatabase(ReadOnly):
    """What was asked writes, and the database cannot be written (a read-only file or folder, or a store
    opened for reading)."""

    def __init__(self, target: object):
        super().__init__(f"{target}: read-only (the file or its folder cannot be written), so nothing can be"
                         " written to it; reading commands and `reasonlog serve` read it as it is")


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions a reader wants. Empty fields do not filter; `limit=None` means no limit.

    `model`, `since` and `until` match what the calls did as well as the session's own model and
    start: a session that used two models, or crossed midnight, is found under each.
    """

    run: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    since: str | None = None   # ISO date or instant, inclusive
    until: str | None = None   # ISO date or instant, inclusive when a date
    limit: int | None = 50
    # A page's cursor: sessions strictly after this (started_at, id) in the list's order (newest first).
    # Keyset, not offset, so pages stay right while sessions are being written.
    after: tuple[str, str] | None = None
    # Only the sub-agent sessions this session spawned.
    parent: str | None = None
    # Only sessions whose recorded text (messages, tool results, outcomes) contains this, as `search` finds it.
    text: str | None = None
    # Annotations (docs/review.md): sessions where each test holds for a score on it or on anything in it
    # (`store.annotation.ScoreTest`), and, with has_note, sessions with a note on them or anything in them.
    scores: tuple[ScoreTest, ...] = ()
    has_note: bool = False


@dataclass(frozen=True)
class ScoreTest:
    """A condition on a named score: `task_done<0.5`, `verdict=pass`."""

    name: str
    op: str
    value: str | float

    @classmethod
    def parse(cls, text: str) -> ScoreTest:
        """`NAME<0.5`, `NAME>=1`, `NAME=pass`, `NAME!=pass`; Invalid naming the text otherwise."""
        found = SCORE_TEST.match(text)
        if not found:
            raise Invalid(f"score: {text!r}: expected NAME<NUMBER (or <=, >, >=, =, !=), e.g. task_done<0.5")
        name, op, raw = found.groups()
        number = finite_number(raw)
        if op in _NUMERIC_OPS and number is None:
            raise Invalid(f"score: {text!r}: {op} compares numbers, and {raw!r} is none")
        return cls(name, op, raw if number is None else number)


def finite_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
