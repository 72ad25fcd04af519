"""Tokens and cost over time in one server-rendered SVG: a bar per day with usage, stacked by model (or agent),
tokens above and cost below on one shared axis of days. Days with nothing to draw are not drawn: a run of them
between two drawn days is one narrow break (`⋯`) that says how many there were. A cost no price gives is drawn
as "—", never as a zero bar."""
from __future__ import annotations

from collections.abc import Iterable
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


def series_of(totals: Iterable[tuple[str | None, float, float | None]]) -> list[str]:
    """The series drawn, the largest first (tokens, and a dollar as a million tokens), from each name's totals over
    the range (name or None, tokens, cost or None), as the usage page's table by model or agent holds them; a name
    with neither is not drawn. None is '' (the store's name for none)."""
    size = {name or "": tokens + 1e6 * (cost or 0) for name, tokens, cost in totals}
    return sorted((n for n in size if size[n] > 0), key=lambda n: -size[n])


def columns(names: list[str]) -> list[str]:
    """The names the store sums a column each (`usage_series`): all of them, or the COLOURS - 1 largest when there
    are more than COLOURS (the rest are one column, drawn as "other")."""
    return names[:COLOURS - 1] if len(names) > COLOURS else names


def days_of(rows: Iterable[tuple[str, tuple[int, ...], tuple[float | None, ...], int]],
            names: list[str]) -> tuple[list[Day], list[str]]:
    """Days with usage, in order, from the store's `usage_series(split, flt, columns(names))` rows (day, tokens of
    each column, their costs, calls without a cost); and the series as drawn and named in the legend."""
    kept = columns(names)
    shown = [n or "(none)" for n in kept] + ([OTHER] if len(kept) < len(names) else [])
    labels = [*shown[:len(kept)], OTHER]  # the store's last column: every other name (none when all are kept)
    out = []
    for day, tokens, costs, unpriced in rows:
        d = Day(day, {n: float(v) for n, v in zip(labels, tokens, strict=True) if v},
                {n: v for n, v in zip(labels, costs, strict=True) if v is not None}, unpriced)
        if d.token_total or d.cost_total:
            out.append(d)
    return out, shown


def chart(days: list[Day], names: list[str]) -> Markup:
    """The SVG, or a line saying there is nothing to draw. Each series is one path (its segments of every day);
    each day is a group over its column whose title says the day's totals and each series' share, the tooltip a
    stacked-bar chart gives (a title a segment was 4,000-8,000 elements at 500 days and 20 models)."""
    if not days:
        return Markup('<p class="muted">No tokens or cost recorded in this range.</p>')
    slots = _slots(days)
    step = (WIDTH - LEFT - RIGHT) / len(slots)
    scale = Scale(max(d.token_total for d in days) or 1, max((d.cost_total or 0) for d in days) or 1)
    series = [(name, n, str(escape(name))) for n, name in enumerate(names)]  # each name escaped once, not a bar
    height = TOP + TOKENS_H + GAP_H + COST_H + LABELS_H
    paths: list[list[str]] = [[] for _ in names]
    groups, labels, label_every, year = [], [], max(1, round(len(slots) / 16)), ""
    for n, slot in enumerate(slots):
        x = LEFT + n * step
        if isinstance(slot, int):
            groups.append(f'<g class="break"><title>{slot} day{"s" if slot != 1 else ""} with no usage</title>'
                          f'<text x="{x + step / 2:.1f}" y="{TOP + TOKENS_H - 4}" text-anchor="middle">⋯</text></g>')
            continue
        groups.append(_day(slot, (x, step), scale, series, paths))
        if n % label_every == 0:  # the year where it changes (the first label has it)
            shown, year = (slot.day if slot.day[:4] != year else slot.day[5:]), slot.day[:4]
            labels.append(f'<text class="day" x="{x + step / 2:.1f}" y="{height - LABELS_H + 14}"'
                          f' text-anchor="middle">{shown}</text>')
    return Markup("".join([
        f'<svg class="chart over-time" role="img" aria-label="Tokens and cost by day" viewBox="0 0 {WIDTH}'
        f' {height}" width="100%" preserveAspectRatio="xMinYMin meet">',
        *_axis(TOP, TOKENS_H, scale.tokens, "tokens"), *_axis(TOP + TOKENS_H + GAP_H, COST_H, scale.cost, "$"),
        *(f'<path class="seg s{n}" d="{"".join(segments)}"/>' for n, segments in enumerate(paths) if segments),
        *groups, *labels, "</svg>"]))


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


@dataclass(frozen=True)
class Scale:
    tokens: float  # the value at the top of the tokens' panel
    cost: float    # and of the cost's


def _day(d: Day, column: tuple[float, float], scale: Scale, series: list[tuple[str, int, str]],
         paths: list[list[str]]) -> str:
    """A day's group: a target over its whole column titled with its totals and each series' tokens and cost, and
    "—" (no price known) or "+" (some calls unpriced) titled; its segments go to each series' path in `paths`.
    `column`: the slot's left edge and width; `series`: (name, colour, the name escaped)."""
    day = escape(d.day)  # from a recorded instant: text, as every recorded value
    x, w = column[0] + column[1] * 0.15, column[1] * 0.7
    bar = (f"{x:.1f}", f"{w:.1f}")
    _stack(paths, bar, TOP + TOKENS_H, (TOKENS_H, scale.tokens), d.tokens, series)
    base = TOP + TOKENS_H + GAP_H + COST_H
    lines = [f"{day}: {d.token_total:,.0f} tokens · {'—' if d.cost_total is None else _usd(d.cost_total)}"]
    for name, _, shown in series:
        tokens, cost = d.tokens.get(name), d.cost.get(name)
        if tokens or cost:
            lines.append(f"{shown}: {tokens or 0:,.0f} tokens{f' · {_usd(cost)}' if cost else ''}")
    out = [f'<g class="day-bars" data-day="{day}"><rect class="hit" x="{column[0]:.1f}" y="{TOP}"'
           f' width="{column[1]:.1f}" height="{base - TOP}"/>']
    if d.cost_total is None:
        out.append(f'<text class="unknown" x="{x + w / 2:.1f}" y="{base - 4}" text-anchor="middle">—'
                   f'<title>{day}: {_calls(d.unpriced)}, no price known</title></text>')
    else:
        y = _stack(paths, bar, base, (COST_H, scale.cost), d.cost, series)
        if d.unpriced:
            out.append(f'<text class="unknown" x="{x + w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">+'
                       f'<title>{day}: and {_calls(d.unpriced)} with no price known</title></text>')
    out.append(f'<title>{chr(10).join(lines)}</title></g>')
    return "".join(out)


def _stack(paths: list[list[str]], bar: tuple[str, str], base: float, scale: tuple[float, float],
           values: dict[str, float], series: list[tuple[str, int, str]]) -> float:
    """Stack the day's segments of `values` up from `base` into each series' path, `bar` = (x, width) as written,
    `scale` = (the area's height, the value at its top); the stack's top."""
    height, top = scale
    x, w = bar
    y = float(base)
    for name, colour, _ in series:
        value = values.get(name)
        if value:
            h = height * value / top
            paths[colour].append(f"M{x} {y:.1f}h{w}V{y - h:.1f}H{x}z")
            y -= h
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
