"""Replay that runs: a recorded call (or every call of a session) sent again, to the same model or another, with
the user's own key; the answers recorded in the run `replays`, each call linked to the one it re-sent
(`replay_of`), and compared with the recorded answers.

`send.py` prepares and sends one request (translated between providers when asked, see providers/translate.py),
`compare.py` sets two answers side by side, `session.py` plans, prices, sends and records a whole replay.
"""
from __future__ import annotations

RUN = "replays"


class ReplayError(Exception):
    """A replay cannot go ahead (no key, an unsupported protocol, an upstream error); the message is one line."""
