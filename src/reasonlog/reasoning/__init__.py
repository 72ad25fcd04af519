"""Tiered reasoning records: what an agent saves of its reasoning per phase, compact in the database and the
long form in an artifact file, without flooding anyone's context window (see docs/reasoning-records.md).

`save(...)` is the one way in (Python's `session.reason`, the CLI's `reason save`, `POST /v1/reasoning-records`).
"""
from __future__ import annotations

PHASES = ("understanding", "approach", "decisions", "risks", "blockers", "pivot", "completion")


class ReasonError(ValueError):
    """A record that cannot be saved as given; the message names the field and the limit."""
