"""The session filters the listing commands share (`--run`, `--agent`, `--since`, ...): a module of their own, so a
command loads them without the others' modules (`reasonlog search`, cli/entry.py)."""
from __future__ import annotations

from datetime import date

import click

from ..store import ScoreTest, SessionFilter, StoreError


class When(click.ParamType):
    """A UTC day `YYYY-MM-DD`, or (unless `day_only`) an ISO-8601 instant; anything else is a usage error."""

    name = "when"

    def __init__(self, day_only: bool = False):
        self.day_only = day_only

    def convert(self, value, param, ctx):
        expected = "YYYY-MM-DD" if self.day_only else "YYYY-MM-DD or an ISO-8601 instant"
        from ..model import format_instant
        from ..wire.rules import RecordError

        try:
            if len(value) == 10:
                return date.fromisoformat(value).isoformat()
            if not self.day_only and len(value) > 10 and value[10] == "T":
                return format_instant(value)
        except (ValueError, RecordError):
            pass
        self.fail(f"{value!r} is not a valid date; expected {expected}", param, ctx)


def filter_options(fn=None, *, limit: int = 50, model_flag: str = "--model"):
    """The session filters every listing command accepts. As `@filter_options(limit=0, model_flag=...)`, a
    command chooses its default limit (0: all) and renames `--model` when it has a model of its own."""
    if fn is None:
        return lambda f: filter_options(f, limit=limit, model_flag=model_flag)
    options = [
        click.option("--run", help="Only this run."),
        click.option("--agent", help="Only this agent."),
        click.option(model_flag, "model", help="Only this model."),
        click.option("--status", type=click.Choice(["open", "completed", "failed", "interrupted"])),
        click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only sessions with this label."),
        click.option("--date", type=When(day_only=True), help="Only sessions started on this UTC day (YYYY-MM-DD)."),
        click.option("--since", type=When(), help="Started on or after this day or instant."),
        click.option("--until", type=When(), help="Started on or before this day (inclusive) or before this instant."),
        click.option("--limit", type=int, default=limit, show_default=True, help="At most this many (0: all)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def review_options(fn):
    """The filters on annotations (docs/review.md), for the sessions list."""
    fn = click.option("--has-note", is_flag=True, help="Only sessions with a note on them or on their calls.")(fn)
    return click.option("--score", "scores", multiple=True, metavar="TEST",
                        help="Only sessions with a score that passes TEST: task_done<0.5, verdict=pass;"
                             " repeatable.")(fn)


def make_filter(run, agent, model, status, labels, date, since, until, limit, scores=(),
                has_note=False) -> SessionFilter:
    parsed = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--label")
        parsed[key] = value
    if date:
        since = until = date
    try:
        tests = tuple(ScoreTest.parse(t) for t in scores)
    except StoreError as exc:
        raise click.BadParameter(str(exc), param_hint="--score") from None
    return SessionFilter(run=run, agent=agent, model=model, status=status, labels=parsed, since=since, until=until,
                         limit=limit or None, scores=tests, has_note=has_note)
