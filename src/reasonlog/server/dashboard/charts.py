"""Bar charts as server-rendered SVG (no script, no library): one bar per row, its value written beside it."""
from __future__ import annotations

from markupsafe import Markup, escape

WIDTH, BAR, GAP = 640, 18, 6
CHAR_PX, LONGEST = 7.2, 34  # a 12 px sans-serif character is at most about 7 px wide; longer labels are shortened


def bars(rows: list[tuple[str, float | None]], unit: str = "") -> Markup:
    """A horizontal bar chart of (label, value) rows, labels and values as text; a value of None (a cost no price
    gives) is written "—" with no bar, never as a zero.

    The label column is as wide as the longest label drawn (`claude-haiku-4-5-20251001` was cut at both ends in a
    fixed column); a label over LONGEST characters loses its middle, and its bar's tooltip names it whole."""
    if not rows:
        return Markup('<p class="muted">Nothing in this range.</p>')
    top = max((v for _, v in rows if v is not None), default=0) or 1
    height = len(rows) * (BAR + GAP)
    drawn = [_shortened(label) for label, _ in rows]
    column = round(max(len(d) for d in drawn) * CHAR_PX) + 12
    out = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" '
           f'preserveAspectRatio="xMinYMin meet">']
    for i, ((label, value), text) in enumerate(zip(rows, drawn, strict=True)):
        y = i * (BAR + GAP)
        if value is None:
            out.append(f'<text x="{column - 6}" y="{y + BAR - 5}" text-anchor="end" class="label">{escape(text)}</text>'
                       f'<g class="unknown"><title>{escape(label)}: not priced</title>'
                       f'<text x="{column + 6}" y="{y + BAR - 5}">—</text></g>')
            continue
        w = max(1.0, (WIDTH - column - 110) * value / top)
        shown = f"{value:,.4f}" if unit == "$" and value < 1 else f"{value:,.2f}" if unit == "$" else f"{value:,.0f}"
        out.append(f'<text x="{column - 6}" y="{y + BAR - 5}" text-anchor="end" class="label">{escape(text)}</text>'
                   f'<rect x="{column}" y="{y}" width="{w:.1f}" height="{BAR}" class="bar"><title>{escape(label)}:'
                   f' {escape(unit)}{shown}</title></rect>'
                   f'<text x="{column + w + 6:.1f}" y="{y + BAR - 5}">{escape(unit)}{shown}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _shortened(label: str) -> str:
    if len(label) <= LONGEST:
        return label
    half = (LONGEST - 1) // 2
    return f"{label[:half]}…{label[-(LONGEST - 1 - half):]}"


def fullness(used: int | None, window: int | None) -> Markup:
    """How full a call's context window was, as a bar (its numbers beside it)."""
    if not used:
        return Markup("")
    if not window:
        return Markup(f'<span class="muted">{used:,} tokens in the window</span>')
    share = min(1.0, used / window)
    return Markup(f'<span class="window"><svg viewBox="0 0 100 8" width="120" height="10" role="img">'
                  f'<rect width="100" height="8" class="track"/><rect width="{share * 100:.1f}" height="8" '
                  f'class="{"bar full" if share > 0.8 else "bar"}"/></svg> {used:,} of {window:,} tokens '
                  f'({share:.0%})</span>')
