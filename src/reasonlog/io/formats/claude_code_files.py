"""What the Claude Code importer reads of whole files before it reads their lines: how deep each sub-agent's file
is nested (so parents are read first), and each session's title."""
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


def titles_in(path: Path) -> dict[str, str]:
    """Each session's title in the file: its last `custom-title` (a rename), else its last `ai-title`."""
    custom: dict[str, str] = {}
    generated: dict[str, str] = {}
    with open(path, "rb") as f:
        for raw in f:
            if b'-title"' not in raw:
                continue
            try:
                v = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(v, dict) or not isinstance(v.get("sessionId"), str):
                continue
            for kind, key, into in (("custom-title", "customTitle", custom), ("ai-title", "aiTitle", generated)):
                if v.get("type") == kind and isinstance(v.get(key), str) and v[key].strip():
                    into[v["sessionId"]] = v[key]
    return {**generated, **custom}
