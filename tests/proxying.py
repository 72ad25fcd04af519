"""A recording proxy for tests: `with recording_proxy(db, upstream_url) as proxied:` serves on a free port of
127.0.0.1 and, when the block ends, has recorded everything into `db` (the recorder closed, its writer flushed)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from helpers import SECRETS

import reasonlog
from reasonlog.capture.proxy import Proxy, Running
from reasonlog.capture.proxy_record import Recording
from reasonlog.capture.proxy_routes import parse_upstreams
from reasonlog.capture.proxy_sessions import Sessions

# The keys clients send the proxy: none may reach the database, in any form.
ANTHROPIC_KEY, OPENAI_KEY, GOOGLE_KEY = SECRETS["anthropic_key"], SECRETS["openai_key"], SECRETS["google_api_key"]


@dataclass
class Proxied:
    url: str
    recording: Recording


@contextmanager
def recording_proxy(db, upstream: str, replayer=None, **session_args):
    recorder = reasonlog.Recorder(db)
    recording = Recording(Sessions(recorder, **session_args))
    running = Running(Proxy(parse_upstreams([upstream]), recording, replayer))
    try:
        yield Proxied(running.url, recording)
    finally:
        running.stop()
        recording.close()
        recorder.close()


def database_bytes(db) -> bytes:
    """Every byte of a SQLite database and its side files (WAL, spill folders)."""
    from pathlib import Path

    path = Path(db)
    files = [p for p in path.parent.rglob("*") if p.is_file() and p.name.startswith(path.name)]
    return b"".join(p.read_bytes() for p in files)
