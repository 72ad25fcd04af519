"""The owner's way in without a key: `reasonlog ui` opens the browser at `/login?token=…` with a token made for
that one server (as Jupyter does). The first request that brings it gets a session cookie (HttpOnly,
SameSite=Strict) and the token is spent; everyone else still needs an API key once keys exist.

Neither the token nor a session id is kept as it is: the server holds their SHA-256 digests, compares in constant
time, and never logs them (uvicorn's access log is off, and the redirect drops the token from the address)."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading

COOKIE = "reasonlog_owner"


def new_token() -> str:
    """A token for one sign-in: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class OwnerLogin:
    """One sign-in token, spent on first use, and the sessions it opened."""

    def __init__(self, token: str | None):
        self._token = _digest(token) if token else None
        self._sessions: set[bytes] = set()
        self._lock = threading.Lock()

    def redeem(self, token: str) -> str | None:
        """A new session id for the cookie when `token` is the unspent one (which it then spends), else None."""
        with self._lock:
            if self._token is None or not hmac.compare_digest(self._token, _digest(token)):
                return None
            self._token = None
            session = secrets.token_urlsafe(32)
            self._sessions.add(_digest(session))
            return session

    def knows(self, session: str | None) -> bool:
        """The cookie's session id is one this server gave out."""
        return bool(session) and _digest(session or "") in self._sessions
