"""The `reasonlog` command's entry point: `reason save` and `stats --json` run without loading the rest of the CLI.

An agent calls `reasonlog reason save` on its critical path, so that command parses its own arguments
(cli/reason_save.py) and imports only what saving needs; `stats --json` is a usage question that must answer
faster than re-reading transcripts (cli/quick_stats.py), and so must an `import` that finds nothing changed
(cli/quick_import.py); every other command goes to click with only the module
that adds it loaded (`reasonlog search` spent a third of its CPU importing the other commands' modules), and
anything else (`--help`, `--version`, a mistyped name) to the whole CLI (cli/main.py).
"""
from __future__ import annotations

import importlib
import sys

# The module under reasonlog.cli that adds each command to the group (tests/test_cli_entry.py holds this to the
# assembled CLI of cli/main.py).
MODULE_OF = {
    "annotate": "annotate", "db": "database", "demo": "data", "diff": "read", "embed": "embedding",
    "evaluate": "evaluate", "export": "data", "import": "importing", "keys": "keys", "mcp": "mcp_command",
    "mirror": "mirroring", "proxy": "proxy", "prune": "database", "reason": "reason", "replay": "read", "run": "proxy",
    "search": "searching", "serve": "serve", "sessions": "read", "show": "show", "stats": "read",
    "summarize": "summarize", "tail": "tail", "ui": "serve", "watch": "importing",
}


# Set by `main`: this process is the command's own, not a caller's that runs it in-process (a script, CliRunner), so a
# command may leave process-wide settings (a signal's handler) as it ends.
OWN_PROCESS = False


def main() -> None:
    global OWN_PROCESS
    OWN_PROCESS = True
    argv = sys.argv[1:]
    if _is_reason_save(argv):
        from .reason_save import run

        sys.exit(run(argv))
    if "stats" in argv and "--json" in argv:
        from . import quick_stats

        asked = quick_stats.parse(argv)
        if asked is not None and quick_stats.run(*asked):
            quick_stats.leave()
    if "import" in argv:
        from . import quick_import, quick_stats

        if quick_import.run(argv):
            quick_stats.leave()
    module = MODULE_OF.get(argv[_command_at(argv)] if _command_at(argv) < len(argv) else "")
    if module is not None:
        importlib.import_module(f"{__package__}.{module}")
        from .group import cli

        return cli()
    from .main import main as full

    full()


def _command_at(argv: list[str]) -> int:
    """Where the command's name is in `argv`: after the `--db` options."""
    i = 0
    while i < len(argv) and argv[i].startswith("--db"):
        i += 1 if "=" in argv[i] else 2
    return i


def _is_reason_save(argv: list[str]) -> bool:
    i = _command_at(argv)
    return argv[i:i + 2] == ["reason", "save"] and "--help" not in argv and "-h" not in argv
