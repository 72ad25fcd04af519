"""A session's timeline as server-rendered SVG (no script): a row per call, its bar on a time axis, what followed it
until the next call (the tools its reply ran, or a wait), the tool runs the agent recorded, and each sub-agent nested
under the call that spawned it with its own calls, at any depth. Hovering a bar shows its model, tokens, cost and
duration (an SVG <title>). Read from `Store.get_spans`, never from the session's messages; paged by calls."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from .tools import milliseconds

PAGE = 200                     # calls of the session per page (sub-agents' calls come with the call that spawned them)
WIDTH, LABEL, COST, THEN, ROW = 1280, 330, 80, 110, 20
PLOT = WIDTH - LABEL - THEN - COST  # the time axis's width
LONG = 120.0                   # a wait longer than this (s) is drawn this long, the axis broken, its length said
INDENT = 14                    # a sub-agent's label moves right by this much per level
SLIVER = 2.0                   # the narrowest bar drawn (a call whose duration was not recorded)


@dataclass
class Row:
    depth: int
    label: str
    kind: str                  # call, failed, agent, tool, tool-failed
    start: float               # seconds since the epoch
    end: float | None          # None: its duration was not recorded
    tip: str
    href: str | None = None
    cost: float | None = None
    after: tuple[float, float, str, str] | None = None   # (start, end, kind "run" or "wait", its tooltip)


def rows_of(spans: dict, depth: int = 0) -> list[Row]:
    """The session's spans as rows in order: each call, then the tool runs recorded in its time and the
    sub-agents it spawned (their rows one level deeper)."""
    calls, rows = spans["calls"], []
    children: dict[str, list[dict]] = {}
    for child in spans["children"]:
        children.setdefault(child["session"]["parent_call_id"], []).append(child)
    runs = sorted(spans["tool_runs"], key=lambda r: r["at"])
    for n, call in enumerate(calls):
        start = instant(call["started_at"])
        upto = instant(calls[n + 1]["started_at"]) if n + 1 < len(calls) else None
        rows.append(_call_row(call, depth, start, upto))
        while runs and (upto is None or instant(runs[0]["at"]) < upto):
            rows.append(_tool_row(runs.pop(0), depth + 1))
        for child in children.get(call["id"], ()):
            rows.append(_agent_row(child, depth + 1))
            rows += rows_of(child, depth + 1)
    return rows


def _call_row(call: dict, depth: int, start: float, upto: float | None) -> Row:
    end = start + call["latency_ms"] / 1000 if call.get("latency_ms") is not None else None
    tools = ", ".join(call["tools"])
    row = Row(depth, f"#{call['idx']} {call.get('model') or ''}".strip() + (f" → {tools}" if tools else ""),
              "failed" if call.get("status") == "error" else "call", start, end, _call_tip(call),
              f"/calls/{call['id']}", call.get("cost_usd"))
    if upto is not None and upto > (end or start):
        took = milliseconds((upto - (end or start)) * 1000)
        if tools:
            what = f"{took} until the next call: the tools ran ({tools})"
            row.after = (end or start, upto, "run", what + ("" if end else "; the model's own time is in it too"))
        else:
            row.after = (end or start, upto, "wait", f"{took} waiting before the next call (for the user, or the"
                                                      " agent's own code)")
    return row


def _call_tip(call: dict) -> str:
    """What hovering a call says: its model, tokens by kind, cost, duration, stop reason and the tools it ran."""
    tokens = " · ".join(f"{call.get(k) or 0:,} {name}" for k, name in (
        ("input_tokens", "in"), ("output_tokens", "out"), ("cache_read_tokens", "cache read"),
        ("cache_write_tokens", "cache write")))
    took = milliseconds(call["latency_ms"]) if call.get("latency_ms") is not None else "duration not recorded"
    tip = f"call #{call['idx']} · {call.get('model') or 'model not recorded'} · {tokens} · " \
          f"{_usd(call.get('cost_usd'))} · {took}"
    if call.get("stop_reason"):
        tip += f" · stop {call['stop_reason']}"
    return tip + (f" · ran {', '.join(call['tools'])}" if call["tools"] else "")


def _tool_row(run: dict, depth: int) -> Row:
    end = instant(run["at"])
    start = end - (run["duration_ms"] or 0) / 1000
    state = "failed" if run["is_error"] else "ok"
    return Row(depth, f"⚙ {run.get('name') or 'tool'}", "tool-failed" if run["is_error"] else "tool", start,
               end if run["duration_ms"] is not None else None,
               f"tool {run.get('name') or ''} · {milliseconds(run['duration_ms']) or 'duration not recorded'}"
               f" · {state}")


def _agent_row(child: dict, depth: int) -> Row:
    s = child["session"]
    cost = sum(c.get("cost_usd") or 0 for c in child["calls"])
    more = child["total_calls"] - len(child["calls"])
    end = instant(s["ended_at"]) if s.get("ended_at") else None
    return Row(depth, f"↳ sub-agent {s.get('agent') or s['id']}", "agent", instant(s["started_at"]), end,
               f"sub-agent {s.get('agent') or ''} ({s['id']}) · {child['total_calls']} calls"
               + (f", {more} more on its own timeline" if more > 0 else "") + f" · {_usd(cost)} in the calls shown",
               f"/sessions/{s['id']}/timeline", cost)


def spent(rows: list[Row]) -> dict[str, Any]:
    """Where the page's time and money went: the session's own calls (model time where recorded, tools running,
    waiting, cost) and its sub-agents' cost, with the times as text, and the shares of the page's wall time."""
    own = [r for r in rows if r.depth == 0 and r.kind in ("call", "failed")]
    timed = [r.end - r.start for r in own if r.end is not None]
    gaps = {"run": 0.0, "wait": 0.0}
    for r in own:
        if r.after is not None:
            gaps[r.after[2]] += r.after[1] - r.after[0]
    model = sum(timed)
    wall = max((max(r.end or r.start, r.after[1] if r.after else 0) for r in own), default=0.0) - \
        min((r.start for r in own), default=0.0)
    untimed = all(r.end is None for r in own)
    parts = [("model", "the model", model), ("run", "the model and tools" if untimed else "tools", gaps["run"]),
             ("wait", "waiting for the user or the agent's code", gaps["wait"])]
    shares = [{"kind": k, "name": name, "took": milliseconds(v * 1000), "share": v / wall if wall else 0.0}
              for k, name, v in parts if v > 0]
    return {"model": milliseconds(model * 1000) if timed else "not recorded",
            "run": milliseconds(gaps["run"] * 1000), "wait": milliseconds(gaps["wait"] * 1000),
            "wall": milliseconds(wall * 1000), "shares": shares, "untimed": untimed and bool(own),
            "cost": sum(r.cost or 0.0 for r in own), "agents": [r for r in rows if r.kind == "agent"],
            "agents_cost": sum(r.cost or 0.0 for r in rows if r.depth > 0 and r.kind in ("call", "failed"))}


def instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _usd(value: Any) -> str:
    if value is None:
        return "cost unknown"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


class Axis:
    """Time to x, with each wait longer than LONG drawn LONG long: a piecewise-linear map through knots of
    (instant, drawn seconds), so an hour away from the keyboard does not leave the calls as hair-lines."""

    def __init__(self, first: float, last: float, rows: list[Row]) -> None:
        waits = sorted((r.after[0], r.after[1]) for r in rows
                       if r.depth == 0 and r.after is not None and r.after[2] == "wait" and
                       r.after[1] - r.after[0] > LONG)
        self.breaks = waits
        self.knots, drawn, at = [(first, 0.0)], 0.0, first
        for a, b in waits:
            drawn += a - at
            self.knots += [(a, drawn), (b, drawn + LONG)]
            drawn, at = drawn + LONG, b
        self.knots.append((last, drawn + last - at))
        self.scale = PLOT / max(self.knots[-1][1], 1e-3)

    def drawn(self, t: float) -> float:
        return _through(self.knots, t)

    def x(self, t: float) -> float:
        return LABEL + self.drawn(t) * self.scale

    def instant_at(self, drawn: float) -> float:
        return _through([(d, t) for t, d in self.knots], drawn)


def _through(knots: list[tuple[float, float]], v: float) -> float:
    """The piecewise-linear map through `knots` (in order of their first member) at `v`, flat past either end."""
    if v <= knots[0][0]:
        return knots[0][1]
    for (a, fa), (b, fb) in zip(knots, knots[1:], strict=False):
        if v <= b:
            return fa + (fb - fa) * (v - a) / (b - a) if b > a else fb
    return knots[-1][1]


def svg(rows: list[Row]) -> Markup:
    """The rows as one SVG: labels on the left, bars on a shared time axis, what followed each call and its cost on
    the right."""
    if not rows:
        return Markup('<p class="muted">No calls on this page.</p>')
    first = min(r.start for r in rows)
    last = max(max(r.end or r.start, r.after[1] if r.after else 0) for r in rows)
    axis = Axis(first, last, rows)
    height = (len(rows) + 1) * ROW
    out = [f'<svg class="timeline-chart" role="img" aria-label="timeline" viewBox="0 0 {WIDTH} {height}" '
           f'width="100%" preserveAspectRatio="xMinYMin meet">', _axis(first, axis, height)]
    for n, r in enumerate(rows):
        out.append(_row(r, (n + 1) * ROW, axis.x))
    out.append("</svg>")
    return Markup("".join(out))


def _row(r: Row, y: int, x) -> str:
    start = x(r.start)
    width = max(SLIVER, x(r.end) - start) if r.end is not None else SLIVER
    label = r.label if len(r.label) <= 44 - 2 * r.depth else r.label[:43 - 2 * r.depth] + "…"
    bar = (f'<rect x="{start:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" class="span {r.kind}">'
           f'<title>{escape(r.tip)}</title></rect>')
    if r.href:
        bar = f'<a href="{escape(r.href)}">{bar}</a>'
    parts = [f'<g class="row depth-{min(r.depth, 9)} {r.kind}">',
             f'<text x="{6 + INDENT * r.depth}" y="{y + ROW - 6}" class="label"><title>{escape(r.label)}</title>'
             f'{escape(label)}</text>']
    if r.after is not None:
        a, b, kind, tip = r.after
        parts.append(f'<rect x="{x(a):.1f}" y="{y + 5}" width="{max(1.0, x(b) - x(a)):.1f}" height="{ROW - 10}" '
                     f'class="after {kind}"><title>{escape(tip)}</title></rect>')
    parts.append(bar)
    if r.after is not None:  # what came after the call, in words: the chart's column before the cost
        a, b, kind, _ = r.after
        parts.append(f'<text x="{WIDTH - COST - 6}" y="{y + ROW - 6}" text-anchor="end" class="then {kind}">'
                     f'{"tools" if kind == "run" else "wait"} {milliseconds((b - a) * 1000)}</text>')
    if r.cost is not None:
        parts.append(f'<text x="{WIDTH - 4}" y="{y + ROW - 6}" text-anchor="end" class="cost">{_usd(r.cost)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _axis(first: float, axis: Axis, height: int) -> str:
    """Ticks at round drawn times, labelled with the real time since the start; each shortened wait a break."""
    span = max(axis.knots[-1][1], 1e-3)
    step = next((s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)
                 if span / s <= 8), 86400 * max(1, int(span / 86400 / 8) + 1))
    ticks, t = [], 0.0
    while t <= span:
        px = LABEL + t * axis.scale
        ticks.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{ROW - 4}" y2="{height}" class="tick"/>'
                     f'<text x="{px + 2:.1f}" y="{ROW - 8}" class="tick">+{_clock(axis.instant_at(t) - first)}</text>')
        t += step
    for a, b in axis.breaks:
        mid = (axis.x(a) + axis.x(b)) / 2
        ticks.append(f'<g class="break"><title>{milliseconds((b - a) * 1000)} waiting, drawn as'
                     f' {milliseconds(LONG * 1000)}</title><line x1="{mid:.1f}" x2="{mid:.1f}" y1="{ROW}"'
                     f' y2="{height}" class="break"/><text x="{mid:.1f}" y="{height - 2}" text-anchor="middle"'
                     f' class="tick">≈ {_clock(b - a)}</text></g>')
    return f'<g class="axis">{"".join(ticks)}</g>'


def _clock(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
