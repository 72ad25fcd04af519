"""`reasonlog reason`: save, show and check the tiered reasoning records of agents (see reasonlog/reasoning)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from ..reasoning import PHASES
from .group import cli, console, emit_json, json_option


@cli.group()
def reason():
    """Tiered reasoning records: compact in the database, the long form in artifact files."""


@reason.command("save")
@click.option("--session", required=True, help="The session's id, or a name for it (made on first use).")
@click.option("--agent", help="The agent saving the record.")
@click.option("--group", help="The task group, e.g. DEL-INIT.")
@click.option("--phase", required=True, type=click.Choice(PHASES))
@click.option("--content-file", required=True, help="The compact record, a JSON object ('-': standard input).")
@click.option("--details-file", help="The long form, text (written to the artifact; '-': standard input).")
@click.option("--confidence", help="high, medium, low, or your own scale.")
@click.option("--reference", "references", multiple=True, help="A file, URL or id the reasoning rests on.")
@click.option("--artifacts", type=click.Path(file_okay=False), help="Artifact folder (default: policy, else data).")
@click.option("--config", type=click.Path(dir_okay=False), help="Policy file (default: ./reasonlog.toml).")
@json_option
@click.pass_obj
def reason_save(obj, **options):
    """Save one record, read it back, and print a receipt of a few tokens."""
    from .reason_save import save_from_args

    options["db"] = obj.db
    options["references"] = list(options["references"]) or None
    sys.exit(save_from_args(argparse.Namespace(**options)))


@reason.command("show")
@click.option("--session", help="Only this session (id or name).")
@click.option("--group")
@click.option("--phase", type=click.Choice(PHASES))
@click.option("--full", is_flag=True, help="Print each record's long form too.")
@json_option
@click.pass_obj
def reason_show(obj, session, group, phase, full, as_json):
    """Records from the database beside their artifacts: is each one's long form where the record says?"""
    store = obj.store
    sid = _session(store, session) if session else None
    records = [{**r, "artifact": _artifact(r)} for r in store.list_reasoning_records(sid, group, phase)]
    if as_json:
        return emit_json(records if full else [{k: v for k, v in r.items() if k != "details"} for r in records])
    for r in records:
        art = r["artifact"]
        found = "has this record" if art and art["has_record"] else "MISSING"
        where = "no long form" if art is None else f"{art['path']} ({found})"
        console.print(Text(f"{r['at'][:19]}  {r['session_id']}  {r['agent'] or '-'}  {r['group'] or '-'}  {r['phase']}"
                           f"  [{r['state']}]  {r['compact_tokens']}t  {where}"))
        console.print(Text("  " + str(r["compact"])))
        if full and r["details"]:
            console.print(Text("  " + r["details"].replace("\n", "\n  ")))


@reason.command("missing")
@click.option("--phases", required=True, help="Mandatory phases, comma-separated.")
@click.option("--session", help="Only this session (id or name).")
@json_option
@click.pass_obj
def reason_missing(obj, phases, session, as_json):
    """Which agents skipped mandatory phases (by session and agent); exit 1 when any did."""
    wanted = [p.strip() for p in phases.split(",") if p.strip()]
    bad = [p for p in wanted if p not in PHASES]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not a phase; expected {', '.join(PHASES)}", param_hint="--phases")
    store = obj.store
    sid = _session(store, session) if session else None
    seen: dict[tuple[str, str], set[str]] = {}
    for r in store.list_reasoning_records(sid):
        seen.setdefault((r["session_id"], r["agent"] or "-"), set()).add(r["phase"])
    rows = [{"session_id": s, "agent": a, "missing": [p for p in wanted if p not in got]}
            for (s, a), got in sorted(seen.items())]
    rows = [r for r in rows if r["missing"]]
    if as_json:
        emit_json(rows)
    elif rows:
        table = Table("session", "agent", "missing phases")
        for r in rows:
            table.add_row(Text(str(r["session_id"])), Text(str(r["agent"])), ", ".join(r["missing"]))
        console.print(table)
    else:
        console.print(f"every agent saved {', '.join(wanted)}")
    sys.exit(1 if rows else 0)


@reason.command("outcome")
@click.option("--session", required=True, help="The session (id or name).")
@click.option("--group", help="Only this group's records.")
@click.option("--status", required=True, type=click.Choice(["failed", "completed"]))
@click.pass_obj
def reason_outcome(obj, session, group, status):
    """Settle held (on_failure) records: kept when the session or group failed, dropped when it completed."""
    store = obj.writable
    n = store.settle_reasoning(_session(store, session), status == "failed", group)
    click.echo(f"{'kept' if status == 'failed' else 'dropped'} {n} held record(s)")


def _session(store, ref: str) -> str:
    from ..reasoning.saving import find_session

    return find_session(store, ref) or store.resolve_id("session", ref)  # the latter says why there is none


def _artifact(record: dict) -> dict | None:
    if not record["artifact_path"]:
        return None
    path = Path(record["artifact_path"])
    try:
        has = record["id"] in path.read_text(encoding="utf-8")
    except OSError:
        has = False
    return {"path": str(path), "has_record": has}
