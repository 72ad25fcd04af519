"""The `reasonlog` command's entry point: `reason save` and `stats --json` run without loading the rest of the CLI.

An agent calls `reasonlog reason save` on its critical path, so that command parses its own arguments
(cli/reason_save.py) and imports only what saving needs; `stats --json` is a usage question that must answer
faster than re-reading transcripts (cli/quick_stats.py); every other command goes to click (cli/main.py).
"""
from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if _is_reason_save(argv):
        from .reason_save import run

        sys.exit(run(argv))
    if "stats" in argv and "--json" in argv:
        from . import quick_stats

        asked = quick_stats.parse(argv)
        if asked is not None and quick_stats.run(*asked):
            quick_stats.leave()
    from .main import main as full

    full()


def _is_reason_save(argv: list[str]) -> bool:
    i = 0
    while i < len(argv) and argv[i].startswith("--db"):
        i += 1 if "=" in argv[i] else 2
    return argv[i:i + 2] == ["reason", "save"] and "--help" not in argv and "-h" not in argv
