"""API keys for `reasonlog serve`: made, listed, revoked and checked; only their SHA-256 is stored."""
from __future__ import annotations

import hashlib
import secrets

from ..model import new_id, utc_now
from .terms import Ambiguous

SCOPES = ("read", "write", "admin")  # each includes the ones before it
PREFIX = "rlk_"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def create(cur, scope: str, name: str | None) -> dict:
    """A new key: its record, and the secret itself (shown once, never stored)."""
    if scope not in SCOPES:
        raise ValueError(f"scope: expected one of {', '.join(SCOPES)}, got {scope!r}")
    secret = PREFIX + secrets.token_urlsafe(32)
    row = {"id": new_id(), "name": name, "scope": scope, "prefix": secret[:12], "created_at": utc_now(),
           "revoked_at": None}
    cur.execute("INSERT INTO api_keys (id, name, scope, hash, prefix, created_at) VALUES (?,?,?,?,?,?)",
                (row["id"], name, scope, digest(secret), row["prefix"], row["created_at"]))
    return {**row, "secret": secret}


def list_keys(cur) -> list[dict]:
    rows = cur.execute("SELECT id, name, scope, prefix, created_at, revoked_at FROM api_keys ORDER BY created_at")
    return [dict(zip(("id", "name", "scope", "prefix", "created_at", "revoked_at"), r, strict=True)) for r in rows]


def revoke(cur, key: str) -> int:
    """Revoke the working key whose id or prefix is `key` or starts with it (as `keys list` shows either, or
    the start of one); how many were revoked (0: none matched). A start that several keys share revokes none."""
    rows = cur.execute("SELECT id FROM api_keys WHERE revoked_at IS NULL AND (id = ? OR prefix = ?)",
                       (key, key)).fetchall()
    if not rows and key:
        working = cur.execute("SELECT id, prefix FROM api_keys WHERE revoked_at IS NULL").fetchall()
        rows = [(i,) for i, prefix in working if i.startswith(key) or prefix.startswith(key)]
    if len(rows) > 1:
        raise Ambiguous(f"{key}: {len(rows)} working keys start so ({', '.join(r[0] for r in rows[:5])}); "
                        "give more of the id")
    if not rows:
        return 0
    return cur.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (utc_now(), rows[0][0])).rowcount


def scope_of(cur, secret: str) -> str | None:
    """The scope of a working key, or None."""
    row = cur.execute("SELECT scope FROM api_keys WHERE hash = ? AND revoked_at IS NULL", (digest(secret),)).fetchone()
    return None if row is None else row[0]


def any_made(cur) -> bool:
    """Whether a key was ever made: from then on every request needs a working one, even once all are revoked."""
    return cur.execute("SELECT 1 FROM api_keys LIMIT 1").fetchone() is not None


def allows(scope: str, needed: str) -> bool:
    return SCOPES.index(scope) >= SCOPES.index(needed)
