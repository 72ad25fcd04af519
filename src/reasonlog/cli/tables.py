"""Tables that fit the terminal (or $COLUMNS, or 80 when piped): whole columns go, by rank, before names are cut."""
from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .main import console

Cell = str | Text


@dataclass(frozen=True)
class Column:
    header: str
    keep: int | None = None  # columns of the lowest rank are dropped first; None: never dropped
    numeric: bool = False    # right-aligned
    whole: bool = False      # never cut (ids people copy)


def print_table(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None = None) -> None:
    """Print the rows under the columns that fit the console's width, with an optional totals row."""
    width = console.width
    shown = list(range(len(columns)))
    while True:
        table = _table([columns[i] for i in shown], [[r[i] for i in shown] for r in rows],
                       None if totals is None else [totals[i] for i in shown])
        droppable = [i for i in shown if columns[i].keep is not None]
        if _natural_width(table) <= width or not droppable:
            break
        shown.remove(min(droppable, key=lambda i: (columns[i].keep, -i)))
    console.print(table, width=width)


def _table(columns: list[Column], rows: list[list[Cell]], totals: list[Cell] | None) -> Table:
    # Totals go in the footer, under a rule; collapsed padding leaves two spaces between columns.
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, collapse_padding=True,
                  show_footer=totals is not None)
    for n, c in enumerate(columns):
        longest = max([len(c.header), *(len(str(r[n])) for r in rows)]) if c.whole else None
        table.add_column(c.header, footer=totals[n] if totals is not None else "",
                         justify="right" if c.numeric else "left", no_wrap=c.whole or c.numeric, min_width=longest)
    for row in rows:
        table.add_row(*row)
    return table


def _natural_width(table: Table) -> int:
    # Measured against a very wide console, so the result is what the table wants, not what it gets.
    return Measurement.get(console, console.options.update_width(100_000), table).maximum
