"""The compact record: validated, within its limits and budget, or its overflow moved to the artifact.

Without a schema of the user's, a compact record is an object of these fields and no others:
`summary` (text, at most 50 tokens, required), `key_decisions` (at most 3 texts), `concerns` (at most 2),
`files_created` and `files_modified` (lists of file names), `metrics` (names to numbers). With one (by phase
or agent, see policy.py), the record is checked against that JSON Schema instead. Either way the whole
record, as compact JSON, must fit the budget (150 tokens unless configured).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from . import ReasonError, tokens

SUMMARY_TOKENS = 50
LIST_LIMITS = {"key_decisions": 3, "concerns": 2}
NAME_LISTS = ("files_created", "files_modified")
FIELDS = ("summary", *LIST_LIMITS, *NAME_LISTS, "metrics")


def check(compact: Any, budget: int, overflow: str, schema: Path | None) -> tuple[dict, dict]:
    """The record to keep and what moved out of it (empty unless `overflow` is "artifact")."""
    if not isinstance(compact, dict):
        raise ReasonError(f"compact: expected a JSON object, got {type(compact).__name__}")
    moved: dict[str, Any] = {}
    if schema is not None:
        _check_schema(compact, schema)
        kept = dict(compact)
    else:
        kept = _check_fields(compact, overflow, moved)
    size, _ = tokens.count(_json(kept))
    if size > budget:
        if overflow != "artifact" or schema is not None:
            raise ReasonError(f"compact: {size} tokens, over the budget of {budget} (budget_tokens)")
        for name in sorted(kept, key=lambda k: -len(_json(kept[k]))):
            if name == "summary" or tokens.count(_json(kept))[0] <= budget:
                continue
            moved[name] = kept.pop(name)
    return kept, moved


def _check_fields(compact: dict, overflow: str, moved: dict) -> dict:
    unknown = sorted(set(compact) - set(FIELDS))
    if unknown:
        raise ReasonError(f"compact.{unknown[0]}: not a field of a compact record; expected {', '.join(FIELDS)}")
    summary = compact.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise ReasonError("compact.summary: required, a non-empty text")
    kept = dict(compact)
    n, _ = tokens.count(summary)
    if n > SUMMARY_TOKENS:
        if overflow != "artifact":
            raise ReasonError(f"compact.summary: {n} tokens, over the limit of {SUMMARY_TOKENS}")
        moved["summary"] = summary
        kept["summary"] = _first_words(summary, SUMMARY_TOKENS - 2) + " …"
    for name, limit in LIST_LIMITS.items():
        items = _texts(compact, name)
        if len(items) > limit:
            if overflow != "artifact":
                raise ReasonError(f"compact.{name}: {len(items)} items, over the limit of {limit}")
            kept[name], moved[name] = items[:limit], items[limit:]
    for name in NAME_LISTS:
        _texts(compact, name)
    metrics = compact.get("metrics", {})
    if not isinstance(metrics, dict):
        raise ReasonError("compact.metrics: expected an object of names to numbers")
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReasonError(f"compact.metrics.{key}: expected a number, got {value!r}")
    return kept


def _texts(compact: dict, name: str) -> list[str]:
    items = compact.get(name, [])
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ReasonError(f"compact.{name}: expected a list of texts")
    return items


def _first_words(text: str, limit: int) -> str:
    words, out = text.split(), list[str]()
    for word in words:
        if tokens.count(" ".join([*out, word]))[0] > limit:
            break
        out.append(word)
    return " ".join(out)


def _check_schema(compact: dict, path: Path) -> None:
    try:
        import jsonschema
    except ImportError:
        raise ReasonError(f"{path}: checking records against a JSON Schema needs jsonschema:"
                          " pip install 'reasonlog[schemas]'") from None
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReasonError(f"{path}: cannot read the schema ({exc})") from None
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = next(iter(sorted(validator.iter_errors(compact), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "compact" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise ReasonError(f"{where}: {error.message} (schema {path.name})")


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
