"""One session as one self-contained HTML file (`reasonlog export --format html`): the dashboard's session page
with its stylesheet inline, no script, and a Content-Security-Policy that lets the file load nothing at all."""
from __future__ import annotations

from ...store import SearchStore
from . import pages
from .render import page, stylesheet


def session_html(store: SearchStore, session_id: str) -> str:
    context = pages.session(store, session_id, "full", 0, limit=0)  # limit 0: the whole timeline
    return page("session.html", export=True, css=stylesheet(), **context)
