"""`reasonlog mcp`: the archive as an MCP server over stdio, for an agent to ask (docs/mcp.md)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .group import cli

CLIENTS = ("claude", "codex", "gemini", "opencode")


@cli.command("mcp")
@click.option("--dashboard", metavar="URL", help="A reasonlog dashboard's address: citations carry their page's URL.")
@click.option("--print-config", "client", type=click.Choice(CLIENTS),
              help="Print the block that adds this server to an agent's own configuration, and exit.")
@click.pass_obj
def mcp(obj, dashboard, client):
    """Serve the archive to agents over MCP on stdio: search past sessions, read a session or a call, what was done
    before about a file or an error, usage and cost, reasoning records; every fact with a citation. Needs the
    `mcp` extra (pip install 'reasonlog[mcp]')."""
    if client:
        click.echo(client_config(client, obj.db, dashboard))
        return
    from ..mcp import available

    if not available():
        raise click.ClickException("reasonlog mcp needs the MCP SDK: pip install 'reasonlog[mcp]'")
    from ..mcp.server import build
    from ..mcp.tools import Archive

    build(Archive(obj.store, dashboard.rstrip("/") if dashboard else None)).run("stdio")


def client_config(client: str, db: str | None, dashboard: str | None) -> str:
    """The configuration block each agent reads its MCP servers from, in its own shape."""
    # This installation's own command (its venv's `reasonlog`, else its Python with -m): the agent's PATH may
    # hold another reasonlog, or none.
    script = Path(sys.executable).with_name("reasonlog")
    command, args = (str(script), []) if script.is_file() else (sys.executable, ["-m", "reasonlog"])
    if db and "://" not in db:
        db = os.path.abspath(os.path.expanduser(db))  # the agent starts it from its own folder
    args += (["--db", db] if db else []) + ["mcp"] + (["--dashboard", dashboard] if dashboard else [])
    if client == "codex":  # ~/.codex/config.toml
        return (f"[mcp_servers.reasonlog]\ncommand = {json.dumps(command)}\n"
                f"args = [{', '.join(json.dumps(a) for a in args)}]")
    if client == "opencode":  # opencode.json
        block = {"$schema": "https://opencode.ai/config.json",
                 "mcp": {"reasonlog": {"type": "local", "command": [command, *args], "enabled": True}}}
    else:  # Claude Code (.mcp.json or --mcp-config) and Gemini CLI (settings.json) share this shape
        block = {"mcpServers": {"reasonlog": {"command": command, "args": args}}}
    return json.dumps(block, indent=2)
