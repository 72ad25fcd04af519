"""A field of a foreign record read leniently: what an importer takes from an agent's file, where a value of another
type than expected reads as missing (or as its text) instead of failing the record."""
from __future__ import annotations


def text_of(value: object) -> str | None:
    """A field read as text: a text as it is, null as None, any other value as its `str`."""
    return value if isinstance(value, str) else None if value is None else str(value)


def object_of(value: object) -> dict:
    """A field read as an object: an object as it is, anything else as an empty one (a field of another type reads
    as missing)."""
    return value if isinstance(value, dict) else {}


def list_of(value: object) -> list:
    """A field read as a list: a list as it is, anything else as an empty one."""
    return value if isinstance(value, list) else []


def number_of(value: object) -> float | None:
    """A field read as a non-negative number (not a boolean), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None
