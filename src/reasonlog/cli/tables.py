"""Tables that fit the terminal (or $COLUMNS, or 80 when piped): whole columns go, by rank, before names are cut.

An id column too wide to leave room for the rest (Claude Code's 52-character sub-agent ids at 80 columns)
is taken out of the table: each row is then its id on a line of its own, with the row's other cells indented
on the line below, so ids stay whole and the row keeps its columns."""
from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from .group import console

Cell = str | Text
INDENT = "  "


@dataclass(frozen=True)
class Column:
    header: str
    keep: int | None = None  # columns of the lowest rank are dropped first; None: never dropped
    numeric: bool = False    # right-aligned
    whole: bool = False      # never cut (ids people copy)
    shrink: int | None = None  # may be cut to this width, with an ellipsis, before other columns go (titles)


def print_table(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None = None) -> None:
    """Print the rows under the columns that fit the console's width, with an optional totals row."""
    width = console.width
    ids = [n for n, c in enumerate(columns) if c.whole]
    if ids and rows and sum(_longest(columns[n], rows, n) for n in ids) > width // 2:
        return _print_stacked(columns, rows, totals, ids[0], width)
    console.print(_fitted(columns, rows, totals, width), width=width)


def _fitted(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None, width: int,
            one_line: bool = False) -> Table:
    """The table of the columns of highest rank whose natural width fits `width`."""
    shown = list(range(len(columns)))
    while True:
        table = _table([columns[i] for i in shown], [[r[i] for i in shown] for r in rows],
                       None if totals is None else [totals[i] for i in shown], one_line)
        droppable = [i for i in shown if columns[i].keep is not None]
        over = _natural_width(table) - width
        if over <= _slack(columns, rows, shown) or not droppable:
            return _shrunk(table, columns, rows, shown, over) if over > 0 else table
        shown.remove(min(droppable, key=lambda i: (columns[i].keep, -i)))


def _shrunk(table: Table, columns: list[Column], rows: list[list[Cell]], shown: list[int], over: int) -> Table:
    """The table with its shrinkable columns cut by `over` characters in all, the widest first."""
    for at, i in enumerate(shown):
        if columns[i].shrink is None or over <= 0:
            continue
        longest = _longest(columns[i], rows, i)
        cut = min(over, longest - (columns[i].shrink or 0))
        table.columns[at].width = longest - cut
        over -= cut
    return table


def _slack(columns: list[Column], rows: list[list[Cell]], shown: list[int]) -> int:
    """How many characters the shrinkable columns among `shown` can give up."""
    return sum(max(0, _longest(columns[i], rows, i) - (columns[i].shrink or 0)) for i in shown
               if columns[i].shrink is not None)


def _print_stacked(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None, at: int,
                   width: int) -> None:
    """Each row as its id on one line, then its other cells indented below, one line each."""
    rest = [c for n, c in enumerate(columns) if n != at]
    table = _fitted(rest, [_without(r, at) for r in rows], None if totals is None else _without(totals, at),
                    width - len(INDENT), one_line=True)
    lines = console.render_lines(table, console.options.update_width(width - len(INDENT)), pad=False)
    console.print(Text(columns[at].header, style="bold"))
    for line in lines[:2]:  # the header and its rule
        _print_indented(line)
    for row, line in zip(rows, lines[2:], strict=False):
        cell = row[at]
        console.print(cell if isinstance(cell, Text) else Text(cell), no_wrap=True, overflow="ignore", crop=False)
        _print_indented(line)
    for line in lines[2 + len(rows):]:  # the totals
        _print_indented(line)


def _print_indented(line: list[Segment]) -> None:
    console.print(Segments([Segment(INDENT), *line, Segment.line()]), end="")


def _without(row: list[Cell], at: int) -> list[Cell]:
    return [cell for n, cell in enumerate(row) if n != at]


def _longest(column: Column, rows: list[list[Cell]], n: int) -> int:
    return max([len(column.header), *(len(str(r[n])) for r in rows)])


def _table(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None, one_line: bool = False) -> Table:
    # Totals go in the footer, under a rule; collapsed padding leaves two spaces between columns.
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, collapse_padding=True,
                  show_footer=totals is not None)
    for n, c in enumerate(columns):
        table.add_column(c.header, footer=totals[n] if totals is not None else "",
                         justify="right" if c.numeric else "left",
                         no_wrap=c.whole or c.numeric or one_line or c.shrink is not None,
                         overflow="ellipsis" if c.shrink is not None else "fold",
                         min_width=_longest(c, rows, n) if c.whole else None)
    for row in rows:
        table.add_row(*row)
    return table


def _natural_width(table: Table) -> int:
    # Measured against a very wide console, so the result is what the table wants, not what it gets.
    return Measurement.get(console, console.options.update_width(100_000), table).maximum
