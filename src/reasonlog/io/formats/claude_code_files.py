"""What the Claude Code importer reads of whole files before it reads their lines: how deep each sub-agent's file
is nested (so parents are read first); and its titles (read with the lines, by a state of an earlier version
before them)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import orjson

_AGENT_ID = re.compile(rb'"agentId":"([^"]+)"')


def nesting(subagent_files: Iterable[Path]) -> dict[Path, int]:
    """How deep each subagent file's agent is nested under its session: a file whose lines name another agent's
    id (its Task result, its progress lines) spawned that agent."""
    own: dict[tuple[Path, str], Path] = {}
    spawned: dict[Path, set[str]] = {}
    for p in subagent_files:
        agent = p.stem.removeprefix("agent-")
        own[(p.parent, agent)] = p
        try:
            spawned[p] = {m.decode() for m in _AGENT_ID.findall(p.read_bytes())} - {agent}
        except OSError:
            spawned[p] = set()
    parent = {own[(p.parent, child)]: p for p, children in spawned.items() for child in children
              if (p.parent, child) in own}
    depth: dict[Path, int] = {}
    for p in spawned:
        seen, q = set(), p
        while q in parent and q not in seen:  # a cycle (a damaged file) stops the walk
            seen.add(q)
            q = parent[q]
        depth[p] = len(seen)
    return depth


TITLE_FIELDS = {"custom-title": "customTitle", "ai-title": "aiTitle"}  # a title record's type -> its field


def best_title(titles: list | None) -> str | None:
    """A session's title label of its [last custom title, last AI title]: a rename wins."""
    return (titles[0] or titles[1]) if titles else None


def titles_in(path: Path, end: int) -> dict[str, list]:
    """Each session's [last custom title, last AI title] in the file's first `end` bytes (for a state written by a
    version that did not keep them: the reader keeps the titles it reads in its state)."""
    found: dict[str, list] = {}
    read = 0
    with open(path, "rb") as f:
        for raw in f:
            read += len(raw)
            if read > end:
                break
            if b'-title"' not in raw:
                continue
            try:
                v = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            kind = v.get("type") if isinstance(v, dict) else None
            text = v.get(TITLE_FIELDS[kind]) if kind in TITLE_FIELDS else None
            if isinstance(v.get("sessionId"), str) and isinstance(text, str) and text.strip():
                found.setdefault(v["sessionId"], [None, None])[int(kind == "ai-title")] = text
    return found
