"""`reasonlog mirror`: push the record into a ClickHouse mirror (docs/scale.md), once or as it grows."""
from __future__ import annotations

import time

import click
import orjson

from ..store import StoreError
from .group import cli, emit_json, json_option

TARGET_HELP = "clickhouse://HOST:PORT/DATABASE (a ClickHouse server's native port) or chdb:///PATH (in-process)."


def _mirror():
    try:
        from ..mirror import engine, push
    except ImportError:  # pragma: no cover - the package is part of reasonlog; its drivers are the extra
        raise StoreError("reasonlog mirror needs the mirror extra: pip install 'reasonlog[mirror]'") from None
    return engine, push


@cli.group()
def mirror():
    """A ClickHouse mirror of the record, for the reads that grow with the archive (serve --mirror)."""


@mirror.command("push")
@click.argument("target", metavar="TARGET")
@click.option("--source", metavar="NAME", help="The name this record's rows carry in the mirror (default: the"
                                               " database's path or URL); several records push into one mirror.")
@click.option("--watch", is_flag=True, help="Push again every --every seconds until stopped (Ctrl-C).")
@click.option("--every", type=click.FloatRange(min=0.1), default=5.0, show_default=True, metavar="SECONDS")
@click.option("--times", type=click.IntRange(min=1), metavar="N", help="With --watch: stop after N pushes.")
@click.option("--whole-every", type=click.FloatRange(min=0), default=300.0, show_default=True, metavar="SECONDS",
              help="With --watch: between whole pushes (every session's fingerprint read), push only the sessions"
                   " open or written since the last push (0: every push whole).")
@click.option("--rebuild", is_flag=True, help="Drop the mirror's tables first and push everything again.")
@click.option("--batch", type=click.IntRange(min=1), default=None, metavar="N",
              help="Sessions read from the record and written to the mirror at a time (default 1,000).")
@click.option("--json", "as_json", is_flag=True, help="Print what each push did as one line of JSON.")
@click.pass_obj
def push_command(obj, target, source, watch, every, times, whole_every, rebuild, batch, as_json):
    """Copy the sessions that changed since the last push into the mirror TARGET (idempotent: a push stopped
    anywhere and run again leaves the mirror equal to the record)."""
    engine_mod, push = _mirror()
    from ..mirror import guard, schema

    try:
        src = source or push.source_of(obj.store)
        with guard.one_push(src, engine_mod.shown(target)):  # before connecting: chdb opens a folder once
            engine = engine_mod.connect(target)
            if rebuild:
                schema.drop(engine)
            _pushes(obj.store, engine, src, push, (every if watch else None, times, whole_every),
                    batch or push.BATCH, as_json)
    except engine_mod.MirrorError as exc:
        raise StoreError(str(exc)) from None
    except KeyboardInterrupt:
        return


def _pushes(store, engine, src: str, push, watch: tuple[float | None, int | None, float], batch: int,
            as_json: bool) -> None:
    """One push, or with a watch (`every` seconds, at most `times`, a whole push every `whole_every` seconds) one
    after another: between whole pushes, each looks at the sessions open or written since the last one's copy."""
    every, times, whole_every = watch
    done, since, whole_at = 0, None, time.monotonic()
    while True:
        pushed = push.push(store, engine, src, batch, since=since)
        done += 1
        if pushed.full:
            whole_at = time.monotonic()
        whole = not whole_every or time.monotonic() - whole_at >= whole_every
        since = None if whole else push.recent_since(pushed.pushed_through)
        _report(pushed, src, push.lag_seconds(pushed.pushed_through), as_json)
        if every is None or (times is not None and done >= times):
            return
        time.sleep(every)


def _report(pushed, src: str, lag: float | None, as_json: bool) -> None:
    figures = {"source": src, "sessions": pushed.sessions, "deleted": pushed.deleted, "entries": pushed.entries,
               "messages": pushed.messages, "pushed_through": pushed.pushed_through,
               "seconds": round(pushed.seconds, 3), "lag_s": None if lag is None else round(lag, 3),
               "whole": pushed.full}

    if as_json:  # one line a push, so that --watch prints JSON Lines
        click.echo(orjson.dumps(figures, option=orjson.OPT_SORT_KEYS).decode())
        return
    behind = "nothing recorded yet" if lag is None else f"lag {lag:.1f} s"
    click.echo(f"pushed {pushed.sessions} session(s), {pushed.entries} entries, {pushed.messages} messages"
               f" ({pushed.deleted} deleted) from {src} in {pushed.seconds:.2f} s; mirror holds the record up to"
               f" {pushed.pushed_through or '-'} ({behind})")


@mirror.command("status")
@click.argument("target", metavar="TARGET")
@click.option("--source", metavar="NAME", help="The name the record's rows carry (default: the database's).")
@json_option
@click.pass_obj
def status_command(obj, target, source, as_json):
    """Where the mirror's copy of this record stands: its last push, and how far behind the record it is."""
    engine_mod, push = _mirror()
    try:
        engine = engine_mod.connect(target)
        src = source or push.source_of(obj.store)
        cursor = push.cursor(engine, src)
    except engine_mod.MirrorError as exc:
        raise StoreError(str(exc)) from None
    newest, mark = obj.store.mirror_mark()
    state = {"source": src, "cursor": cursor, "record_newest": newest, "caught_up": push.caught_up(cursor, mark)}
    if as_json:
        emit_json(state)
        return
    if cursor is None:
        click.echo(f"{src}: never pushed to {target}")
        return
    click.echo(f"{src}: last push {'finished' if cursor['done'] else 'did not finish'} at {cursor['pushed_at']},"
               f" through {cursor['pushed_through'] or '-'}; the record's newest is {newest or '-'}"
               f" ({'caught up' if state['caught_up'] else 'behind'})")
