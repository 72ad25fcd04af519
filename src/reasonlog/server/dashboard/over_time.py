"""Tokens and cost over time in one server-rendered SVG: a bar per day with usage, stacked by model (or agent),
tokens above and cost below on one shared axis of days. Days with nothing to draw are not drawn: a run of them
between two drawn days is one narrow break (`⋯`) that says how many there were. A cost no price gives is drawn
as "—", never as a zero bar."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date

from markupsafe import Markup, escape

WIDTH, LEFT, RIGHT = 1000, 70, 10
TOP, TOKENS_H, GAP_H, COST_H, LABELS_H = 14, 170, 22, 100, 24  # the tokens' panel, then the cost's
COLOURS = 8  # series drawn in their own colour; the rest are summed as "other"
OTHER = "other"


@dataclass
class Day:
    day: str
    tokens: dict[str, float] = field(default_factory=dict)   # by series
    cost: dict[str, float] = field(default_factory=dict)     # by series, priced calls only
    unpriced: int = 0                                         # calls no price was found for

    @property
    def token_total(self) -> float:
        return sum(self.tokens.values())

    @property
    def cost_total(self) -> float | None:
        return sum(self.cost.values()) if self.cost else None


def days_of(points: Iterable[tuple[str, str, float, float | None, int]]) -> tuple[list[Day], list[str]]:
    """Days with usage, in order, from points (day, series, tokens, cost or None, calls without a cost) as the
    store's `usage_series` gives them; and the series, the largest first (those past COLOURS folded into
    "other")."""
    by_day: dict[str, Day] = {}
    size: dict[str, float] = {}
    for day, series, tokens, cost, unpriced in points:
        series = series or "(none)"
        d = by_day.get(day) or by_day.setdefault(day, Day(day))
        d.tokens[series] = d.tokens.get(series, 0) + tokens
        if cost is not None:
            d.cost[series] = d.cost.get(series, 0) + cost
        d.unpriced += unpriced
        size[series] = size.get(series, 0) + tokens + 1e6 * (cost or 0)
    names = sorted((n for n in size if size[n] > 0), key=lambda n: -size[n])  # only what is drawn
    if len(names) > COLOURS:
        kept = set(names[:COLOURS - 1])
        for d in by_day.values():
            for part in (d.tokens, d.cost):
                rest = sum(v for n, v in part.items() if n not in kept)
                part_kept = {n: v for n, v in part.items() if n in kept}
                part.clear()
                part.update(part_kept, **({OTHER: rest} if rest else {}))
        names = [*names[:COLOURS - 1], OTHER]
    drawn = [d for _, d in sorted(by_day.items()) if d.token_total or d.cost_total]
    return drawn, names


def chart(days: list[Day], names: list[str]) -> Markup:
    """The SVG, or a line saying there is nothing to draw."""
    if not days:
        return Markup('<p class="muted">No tokens or cost recorded in this range.</p>')
    slots = _slots(days)
    step = (WIDTH - LEFT - RIGHT) / len(slots)
    top_tokens = max(d.token_total for d in days) or 1
    top_cost = max((d.cost_total or 0) for d in days) or 1
    series = [(name, n, str(escape(name))) for n, name in enumerate(names)]  # each name escaped once, not a bar
    height = TOP + TOKENS_H + GAP_H + COST_H + LABELS_H
    out = [f'<svg class="chart over-time" role="img" aria-label="Tokens and cost by day" viewBox="0 0 {WIDTH}'
           f' {height}" width="100%" preserveAspectRatio="xMinYMin meet">',
           *_axis(TOP, TOKENS_H, top_tokens, "tokens"), *_axis(TOP + TOKENS_H + GAP_H, COST_H, top_cost, "$")]
    label_every, year = max(1, round(len(slots) / 16)), ""
    for n, slot in enumerate(slots):
        x = LEFT + n * step
        if isinstance(slot, int):
            out.append(f'<g class="break"><title>{slot} day{"s" if slot != 1 else ""} with no usage</title>'
                       f'<text x="{x + step / 2:.1f}" y="{TOP + TOKENS_H - 4}" text-anchor="middle">⋯</text></g>')
            continue
        out += _bars(slot, x + step * 0.15, step * 0.7, top_tokens, top_cost, series)
        if n % label_every == 0:  # the year where it changes (the first label has it)
            shown, year = (slot.day if slot.day[:4] != year else slot.day[5:]), slot.day[:4]
            out.append(f'<text class="day" x="{x + step / 2:.1f}" y="{height - LABELS_H + 14}"'
                       f' text-anchor="middle">{shown}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def legend(names: list[str]) -> Markup:
    items = "".join(f'<li><span class="swatch s{n}"></span>{escape(name)}</li>' for n, name in enumerate(names))
    return Markup(f'<ul class="series-legend">{items}</ul>')


def _slots(days: list[Day]) -> list[Day | int]:
    """The days to draw, with the number of days skipped between two of them where there is a gap."""
    slots: list[Day | int] = []
    for d in days:
        if slots:
            gap = (date.fromisoformat(d.day) - date.fromisoformat(slots[-1].day)).days - 1  # type: ignore[union-attr]
            if gap > 0:
                slots.append(gap)
        slots.append(d)
    return slots


def _axis(y0: float, h: float, top: float, unit: str) -> list[str]:
    shown = (lambda v: f"${v:,.2f}" if top >= 1 else f"${v:,.4f}") if unit == "$" else _compact
    return [f'<line class="tick" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y0 + h * (1 - f):.1f}"'
            f' y2="{y0 + h * (1 - f):.1f}"/><text class="tick" x="{LEFT - 6}" y="{y0 + h * (1 - f) + 4:.1f}"'
            f' text-anchor="end">{shown(top * f)}</text>' for f in (0, 0.5, 1)] + [
        f'<text class="tick axis-name" x="4" y="{y0 + h / 4 + 4:.1f}">{"cost" if unit == "$" else "tokens"}</text>']


def _bars(d: Day, x: float, w: float, top_tokens: float, top_cost: float,
          series: list[tuple[str, int, str]]) -> list[str]:
    """A day's group: its token segments, its cost segments (or "—"), each titled; `series`: (name, colour,
    the name escaped)."""
    day = escape(d.day)  # from a recorded instant: text, as every recorded value
    out = [f'<g class="day-bars" data-day="{day}">']
    _stack(out, day, x, w, TOP + TOKENS_H, (TOKENS_H, top_tokens), d.tokens, series, lambda v: f"{v:,.0f} tokens")
    base = TOP + TOKENS_H + GAP_H + COST_H
    if d.cost_total is None:
        out.append(f'<text class="unknown" x="{x + w / 2:.1f}" y="{base - 4}" text-anchor="middle">—'
                   f'<title>{day}: {_calls(d.unpriced)}, no price known</title></text>')
    else:
        y = _stack(out, day, x, w, base, (COST_H, top_cost), d.cost, series, _usd)
        if d.unpriced:
            out.append(f'<text class="unknown" x="{x + w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">+'
                       f'<title>{day}: and {_calls(d.unpriced)} with no price known</title></text>')
    out.append(f'<title>{day}: {d.token_total:,.0f} tokens · '
               f'{"—" if d.cost_total is None else _usd(d.cost_total)}</title></g>')
    return out


def _stack(out: list[str], day: str, x: float, w: float, base: float, scale: tuple[float, float],
           values: dict[str, float],
           series: list[tuple[str, int, str]], shown_value: Callable[[float], str]) -> float:
    """Stack the day's segments of `values` up from `base`, `scale` = (the area's height, the value at its top), each
    titled; the stack's top."""
    height, top = scale
    y = float(base)
    for name, colour, shown in series:
        value = values.get(name)
        if value:
            h = height * value / top
            y -= h
            out.append(f'<rect class="seg s{colour}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}">'
                       f'<title>{day} · {shown}: {shown_value(value)}</title></rect>')
    return y


def _calls(n: int) -> str:
    return f"{n:,} call{'s' if n != 1 else ''}"


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _compact(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:,.1f}{suffix}".replace(".0", "")
    return f"{value:,.0f}"
