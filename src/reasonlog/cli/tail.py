"""`reasonlog tail`: follow new calls as they land, whichever process records them (docs/dashboard.md, "Live").

Like the dashboard's live pages, it looks at the store's change marker a few times a second and reads only when
it moved: the sessions followed (one, an agent's, or every open and newest one), and of each the calls past the
last one printed. One line a call; a line when a session ends. Ctrl-C ends it quietly.
"""
from __future__ import annotations

import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import click
from rich.text import Text

from ..parts import parts_of
from ..store import SessionFilter, StoreReader
from ..titles import shorten
from ..wire import SessionJSON
from .group import cli, console, own_process
from .show import money

EVERY_S = 0.25  # how often the change marker is read
NEWEST = 50  # the newest sessions followed besides the open ones, when no session is named
PAGE = 200  # calls read at once from a session


@cli.command()
@click.argument("session", required=False, metavar="[SESSION]")
@click.option("--agent", help="Follow this agent's sessions.")
@click.option("-n", "--last", "last", type=click.IntRange(min=0), default=5, show_default=True,
              help="With SESSION: print its last N calls first.")
@click.pass_obj
def tail(obj, session, agent, last):
    """Print each new call as it is recorded (all sessions, one SESSION, or an --agent's), until Ctrl-C."""
    store = obj.store
    sid = store.resolve_id("session", session) if session else None
    what = f"session {sid}" if sid else f"agent {agent}'s sessions" if agent else "every session"
    try:  # a Ctrl-C as soon as the first line shows stops it too (it may come while that line is being printed)
        console.print(Text(f"following {what} (Ctrl-C stops)", style="dim"), soft_wrap=True)
        for line in follow(store, sid, agent, last, EVERY_S):
            console.print(line, soft_wrap=True)
    except KeyboardInterrupt:  # a second Ctrl-C (`timeout`'s signal to the group, late on a loaded machine) is one
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            with console.capture():  # a Ctrl-C after rich wrote a line, before it cleared it, left it to print again
                pass
            console.print(Text("stopped", style="dim"))
        finally:
            if not own_process():  # a process that called it in-process gets its Ctrl-C back
                signal.signal(signal.SIGINT, previous)


def follow(store: StoreReader, session_id: str | None, agent: str | None, last: int,
           every_s: float) -> Iterator[Text]:
    """Lines for each call recorded from now on (and `last` earlier ones of `session_id`), forever."""
    seen: dict[str, tuple[int, str]] = {}  # session id -> (calls printed, status)
    for s in _followed(store, session_id, agent):
        seen[s["id"]] = (s["call_count"], s["status"])
    if session_id is not None:
        count, status = seen[session_id]
        seen[session_id] = (max(0, count - last), status)
    marker: object = None
    while True:
        now = store.change_marker()
        if now != marker:
            marker = now
            yield from _news(store, _followed(store, session_id, agent), seen)
        time.sleep(every_s)


def _followed(store: StoreReader, session_id: str | None, agent: str | None) -> list[SessionJSON]:
    if session_id is not None:
        return [store.session_row(session_id)]
    rows = store.list_sessions(SessionFilter(agent=agent, status="open", limit=None))
    return rows + store.list_sessions(SessionFilter(agent=agent, limit=NEWEST))


def _news(store: StoreReader, rows: list[SessionJSON], seen: dict[str, tuple[int, str]]) -> Iterator[Text]:
    for s in {r["id"]: r for r in rows}.values():
        printed, status = seen.get(s["id"], (0, "open"))
        for start in range(printed, s["call_count"], PAGE):
            for call in store.get_calls(s["id"], (start, min(start + PAGE, s["call_count"]))):
                yield call_line(s, call)
        if s["status"] != status and s["status"] != "open":
            yield Text(f"{_short(s)} {s['status']}", style="bold")
        seen[s["id"]] = (max(printed, s["call_count"]), s["status"])


def call_line(session: Mapping[str, Any], call: dict) -> Text:
    """`HH:MM:SS agent SESSION#N model in→out $cost latency  reply…`, the recorded text as plain text."""
    line = Text()
    line.append(f"{(call.get('started_at') or '')[11:19]} ", style="dim")
    line.append(f"{_short(session)}#{call['idx']} ", style="cyan")
    line.append(f"{call.get('model') or '-'} ")
    line.append(f"{call.get('input_tokens') or 0}→{call.get('output_tokens') or 0} ")
    line.append(money(call.get("cost_usd")))
    if call.get("latency_ms") is not None:
        line.append(f" {call['latency_ms'] / 1000:.1f}s")
    if call.get("status") == "error":
        line.append(" error", style="red")
    reply = _reply_text(call.get("response"))
    if reply:
        line.append("  " + shorten(reply, 100), style="dim")
    return line


def _short(session: Mapping[str, Any]) -> str:
    return f"{session.get('agent') or 'session'} {session['id'][-8:]}"


def _reply_text(response) -> str:
    if not isinstance(response, dict):
        return ""
    try:
        return " ".join(p.text for p in parts_of(response) if p.kind == "text" and p.text)
    except (TypeError, ValueError, KeyError):
        return ""
