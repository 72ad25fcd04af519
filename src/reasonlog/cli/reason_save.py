"""`reasonlog reason save`: one reasoning record, saved and read back, then a receipt of a few tokens.

Parsed with argparse and run before click is imported (see cli/entry.py); `reasonlog reason save --help`
goes through click and shows the same options (cli/reason.py)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="reasonlog reason save", add_help=False)
    ap.add_argument("--db", default=os.environ.get("REASONLOG_DB"))
    ap.add_argument("--session", required=True)
    ap.add_argument("--agent")
    ap.add_argument("--group")
    ap.add_argument("--phase", required=True)
    ap.add_argument("--content-file", required=True)
    ap.add_argument("--details-file")
    ap.add_argument("--confidence")
    ap.add_argument("--reference", action="append", dest="references")
    ap.add_argument("--artifacts")
    ap.add_argument("--config")
    ap.add_argument("--json", action="store_true", dest="as_json")
    return ap


def run(argv: list[str]) -> int:
    """Parse `argv` (the whole command line after `reasonlog`), save, print the receipt; the exit code."""
    try:
        args, rest = parser().parse_known_args([a for a in argv if a not in ("reason", "save")])
    except SystemExit:
        return 2
    if rest:
        print(f"error: unexpected argument {rest[0]!r}", file=sys.stderr)
        return 2
    return save_from_args(args)


def save_from_args(args) -> int:
    import orjson

    from ..reasoning import ReasonError, policy
    from ..reasoning.saving import save
    from ..store import StoreError, database_target, open_store

    try:
        compact = orjson.loads(_read(args.content_file, "--content-file"))
        details = _read(args.details_file, "--details-file").decode("utf-8") if args.details_file else None
        store = open_store(database_target(args.db))
        try:
            record, receipt = save(store, policy.load(args.config), args.session, args.phase, compact,
                                   agent=args.agent, group=args.group, details=details, confidence=args.confidence,
                                   references=args.references,
                                   artifacts_root=Path(args.artifacts).expanduser() if args.artifacts else None)
        finally:
            store.close()
    except orjson.JSONDecodeError as exc:
        print(f"error: {args.content_file}: not JSON ({exc})", file=sys.stderr)
        return 1
    except (ReasonError, StoreError, OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.as_json:
        sys.stdout.buffer.write(orjson.dumps(record) + b"\n")
    else:
        print(receipt)
    return 0


def _read(name: str, option: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise OSError(f"{option} {name}: {exc.strerror or exc}") from None
