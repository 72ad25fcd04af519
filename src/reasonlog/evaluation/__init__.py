"""Checks over many sessions (docs/review.md, "Checks"): a Python function, or an LLM judge (judge.py), run over
sessions or their calls, its scores stored as annotations (source `code` or `llm`, `by` the check's name).

A check is a function of one session (the dict `get_session` returns: its messages, calls and outcomes) or, with
`calls=True`, of one call of it (that dict, with `session_id`); it returns a number or a category (one score,
named after the check), a dict of them (several scores), or None (nothing to say). Run again, a check replaces
the scores it gave before rather than adding to them.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store import Store, StoreError

Check = Callable[[dict], Any]
Progress = Callable[[int], None]


class CheckError(ValueError):
    """The check cannot be loaded, or gave what cannot be a score; the message names it."""


def load_check(spec: str) -> tuple[Check, str]:
    """The function `spec` names and the check's name: `path/to/file.py` (its function `check`),
    `path/to/file.py:function`, or `package.module:function` (an entry point)."""
    where, sep, name = spec.rpartition(":") if ":" in spec else (spec, "", "check")
    if where.endswith(".py") or Path(where).is_file():
        module = _module_of_file(Path(where))
    else:
        if not sep:
            raise CheckError(f"{spec}: expected a .py file, FILE.py:FUNCTION or MODULE:FUNCTION")
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise CheckError(f"{spec}: cannot import {where}: {exc}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise CheckError(f"{spec}: {where} has no function {name!r}")
    return fn, name


def _module_of_file(path: Path) -> Any:
    if not path.is_file():
        raise CheckError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"reasonlog_check_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise CheckError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: say where it failed, in one line
        raise CheckError(f"{path}: {type(exc).__name__}: {exc}") from None
    return module


def scores_of(result: Any, name: str, where: str) -> dict[str, float | int | str]:
    """A check's result as named scores; CheckError naming `where` for what cannot be one."""
    if result is None:
        return {}
    values = result if isinstance(result, dict) else {name: result}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str) or not isinstance(key, str):
            raise CheckError(f"{where}: the check gave {key!r}: {value!r}; expected a number or a category (text)")
    return values


@dataclass
class Report:
    scored: int = 0  # targets given scores
    skipped: int = 0  # targets the check said nothing of
    failed: list[tuple[str, str]] = field(default_factory=list)  # (target, why)


def run(store: Store, session_ids: Iterable[str], check: Check, name: str, by: str, source: str = "code",
        calls: bool = False, progress: Progress | None = None) -> Report:
    """Run `check` over each session (or each of its calls) and store its scores (a single value is the score
    `name`), given `by` with `source`, replacing those it gave before."""
    report = Report()
    for sid in session_ids:
        session = store.get_session(sid)
        targets = ([(c["id"], {**c, "session_id": sid}) for c in session["calls"]] if calls else
                   [(sid, dict(session))])
        for ref, value in targets:
            _score_one(store, ref, value, check, (name, by, source), report)
        if progress is not None:
            progress(1)
    return report


def _score_one(store: Store, ref: str, value: dict, check: Check, given: tuple[str, str, str],
               report: Report) -> None:
    name, by, source = given
    try:
        scores = scores_of(check(value), name, ref)
    except CheckError as exc:
        report.failed.append((ref, str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - the user's check failed on this target: say so, go on
        report.failed.append((ref, f"{type(exc).__name__}: {exc}"))
        return
    if not scores:
        report.skipped += 1
        return
    try:
        store.annotate(ref, scores=scores, by=by, source=source, replace=True)
    except StoreError as exc:
        report.failed.append((ref, str(exc)))
        return
    report.scored += 1
