"""`reasonlog reason`: save, show and check the tiered reasoning records of agents (see reasonlog/reasoning)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
import orjson
from rich.text import Text

from ..reasoning import PHASES
from .group import cli, console, emit_json, json_option
from .tables import Column, print_table


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
    names = session_names(store, {r["session_id"] for r in records})
    for r in records:
        _print_record(r, names[r["session_id"]], full)
    if not records:
        console.print("no reasoning records" + (f" for session {session}" if session else ""), style="dim")


def _print_record(r: dict, session: str, full: bool) -> None:
    """A heading line, then each field of the compact record on a line of its own, then where its long form is."""
    head = [r["at"][:16].replace("T", " "), session, r["agent"] or "-", r["group"] or "-", r["phase"], r["state"],
            f"{r['compact_tokens']}t"]
    console.print(Text("  ".join(head), style="bold"))
    compact = r["compact"] if isinstance(r["compact"], dict) else {"record": r["compact"]}
    for key, value in compact.items():
        console.print(Text(f"  {key}: ", style="dim") + Text(_field(value)))
    art = r["artifact"]
    if art is not None:
        found = "has this record" if art["has_record"] else "MISSING this record"
        # Whole on one line however narrow the terminal: a path is copied, not read.
        console.print(Text(f"  long form: {art['path']} ({found})", style="dim"), no_wrap=True, overflow="ignore",
                      crop=False)
    if full and r["details"]:
        console.print(Text("  " + r["details"].replace("\n", "\n  ")))


def _field(value) -> str:
    """A compact field as a person reads it: text as written, a list of texts joined, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    return orjson.dumps(value).decode()


def session_names(store, ids) -> dict[str, str]:
    """Each session as people named it: the id the agent gave (`--session orch-42`) where ours was made for it,
    else ours (an importer's ids already hold the agent's: `aac57f5@<parent>`). Either one resolves in `show`."""
    names = {sid: store.session_row(sid).get("external_id") for sid in ids}
    return {sid: name if name and name not in sid else sid for sid, name in names.items()}


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
    names = session_names(store, {s for s, _ in seen})
    rows: list[dict] = [{"session_id": s, "session": names[s], "agent": a,
                         "missing": [p for p in wanted if p not in got]}
            for (s, a), got in sorted(seen.items())]
    rows = [r for r in rows if r["missing"]]
    if as_json:
        emit_json(rows)
    elif rows:
        print_table(MISSING_COLUMNS, [[Text(r["session"]), Text(r["agent"]), ", ".join(r["missing"])] for r in rows])
    elif not seen:
        where = f"session {session}" if session else "this database"
        console.print(f"no reasoning records in {where}: no agent saved {', '.join(wanted)}")
    else:
        console.print(f"every agent saved {', '.join(wanted)}")
    sys.exit(1 if rows or not seen else 0)


MISSING_COLUMNS = [Column("session", whole=True), Column("agent", keep=1), Column("missing phases")]


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
