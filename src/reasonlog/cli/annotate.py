"""`reasonlog annotate`: a note, labels and scores on a session, an exchange or a call (docs/review.md)."""
from __future__ import annotations

import click
from rich.text import Text

from ..store.annotation import SOURCES
from .group import cli, console, emit_json, json_option


def _pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE", param_hint=option)
        out[key] = value
    return out


@cli.command()
@click.argument("target", metavar="SESSION|SESSION#N|CALL|EXCHANGE")
@click.option("--note", help="A note, kept as text.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label (repeatable).")
@click.option("--score", "scores", multiple=True, metavar="NAME=VALUE",
              help="A named score: a number (task_done=0.4) or a category (verdict=pass); repeatable.")
@click.option("--by", help="Who or what gave it: a person, a check's name, a judge model.")
@click.option("--source", type=click.Choice(SOURCES), default="human", show_default=True,
              help="A person, a code check or an LLM judge.")
@json_option
@click.pass_obj
def annotate(obj, target, note, labels, scores, by, source, as_json):
    """Add a note, labels and scores to a session, an exchange or a call (SESSION#N is call N of SESSION)."""
    added = obj.writable.annotate(target, note=note, labels=_pairs(labels, "--label"),
                                  scores=_pairs(scores, "--score"), by=by, source=source)
    if as_json:
        return emit_json(added)
    where = added[0]["call_id"] or added[0]["exchange_id"] or added[0]["session_id"]
    console.print(Text(f"added {len(added)} to {where}"))

