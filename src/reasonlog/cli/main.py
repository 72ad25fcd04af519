"""The `reasonlog` command, assembled: the group (cli/group.py) and every command module, each of which adds its
commands to the group. Command modules import the group, never this module, so nothing imports back.

The assembly is here, not in cli/__init__.py, because `reasonlog reason save` (cli/entry.py) must start without
loading the other commands, and importing anything under `reasonlog.cli` runs that package's __init__.
"""
from __future__ import annotations

from . import (  # noqa: F401  (their commands)
    annotate,
    data,
    database,
    embedding,
    evaluate,
    importing,
    keys,
    mcp_command,
    mirroring,
    proxy,
    read,
    reason,
    searching,
    serve,
    show,
    summarize,
    tail,
)
from .group import Context, cli

__all__ = ["Context", "cli", "main"]


def main() -> None:
    cli()
