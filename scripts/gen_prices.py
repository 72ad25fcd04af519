#!/usr/bin/env python3
"""Generate src/reasonlog/prices.json from LiteLLM's model price file.

Usage:
    python scripts/gen_prices.py PATH/model_prices_and_context_window.json --rev COMMIT_OR_VERSION \
        [--fallback OLDER.json=REV ...] [--date YYYY-MM-DD] [-o src/reasonlog/prices.json]

PATH is LiteLLM's `model_prices_and_context_window.json` (from the BerriAI/litellm repository, or
`litellm/model_prices_and_context_window_backup.json` inside a litellm wheel); nothing of LiteLLM
is committed here. `--rev` names that snapshot: a commit (cut to 8 characters) or a release.
`--fallback` files are older snapshots that only add models the primary no longer lists (LiteLLM
drops retired models, but old recordings still name them). The output depends only on the
inputs and --date, so the same command gives the same bytes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "reasonlog" / "prices.json"

# First-party providers only, best first: a model listed by several keeps the first one's prices.
PROVIDER_RANK = {"anthropic": 0, "openai": 0, "gemini": 0, "vertex_ai-language-models": 1}
MODES = {"chat", "responses"}  # the codex and *-pro models are listed as "responses"
NAME_RE = re.compile(r"^(claude-|gpt-|o1|o3|o4|chatgpt-|codex|gemini-(?!gemma))")  # gemma is no Gemini
KEY_PREFIXES = ("gemini/", "vertex_ai/", "anthropic/", "openai/")
ANTHROPIC_DATED = re.compile(r"^(claude-.+)-(\d{8})$")
TIER_RE = re.compile(r"^input_cost_per_token_above_(\d+)k_tokens$")

# Our field -> LiteLLM key (base price; the tier key adds `_above_<N>k_tokens`).
FIELDS = {
    "input": "input_cost_per_token",
    "output": "output_cost_per_token",
    "cache_read": "cache_read_input_token_cost",
    "cache_write_5m": "cache_creation_input_token_cost",
    "cache_write_1h": "cache_creation_input_token_cost_above_1hr",
}

# Anthropic's published multiples of the input price, used where LiteLLM leaves a price out.
ANTHROPIC_RATIOS = {"cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2.0}


def num(x: float) -> float:
    """Round to 12 significant digits so derived prices print as 6e-06, not 6.000000000000001e-06."""
    return float(f"{x:.12g}")


def bare_name(key: str) -> str:
    """Strip a provider prefix such as `gemini/` from a LiteLLM key."""
    for prefix in KEY_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def wanted(key: str, entry: object) -> bool:
    """True for a direct-provider chat model of Anthropic, OpenAI or Google."""
    if not isinstance(entry, dict) or entry.get("litellm_provider") not in PROVIDER_RANK:
        return False
    if entry.get("mode") not in MODES or "input_cost_per_token" not in entry:
        return False
    return bool(NAME_RE.match(bare_name(key))) and "output_cost_per_token" in entry


def pick_entries(data: dict) -> dict[str, tuple[str, dict]]:
    """Map bare model name -> (LiteLLM key, entry), preferring first-party, unprefixed keys."""
    best: dict[str, tuple[tuple, str, dict]] = {}
    for key, entry in data.items():
        if not wanted(key, entry):
            continue
        name = bare_name(key)
        rank = (PROVIDER_RANK[entry["litellm_provider"]], key != name, key)
        if name not in best or rank < best[name][0]:
            best[name] = (rank, key, entry)
    return {name: (key, entry) for name, (_, key, entry) in best.items()}


def base_prices(entry: dict, derived: list[str]) -> dict:
    """Per-token base prices, filling LiteLLM's gaps by each provider's billing rule."""
    provider = entry["litellm_provider"]
    out = {f: entry[k] for f, k in FIELDS.items() if isinstance(entry.get(k), (int, float))}
    if provider == "anthropic":
        drop_wrong_1h(out, "")
    for field in ("cache_read", "cache_write_5m", "cache_write_1h"):
        if field not in out:
            out[field] = missing_base(provider, field, out)
            derived.append(field)
    return out


def drop_wrong_1h(prices: dict, suffix: str) -> None:
    """Forget a 1-hour write price that breaks Anthropic's 2 x input rule, so the rule fills it.

    LiteLLM lists 6e-06 (Sonnet's) for Claude 3 Haiku and Claude 3 Opus; every other Claude
    model it lists, old and new, follows the rule exactly.
    """
    key, value = "cache_write_1h" + suffix, prices.get("cache_write_1h" + suffix)
    if value is not None and not math.isclose(value, 2 * prices["input" + suffix], rel_tol=1e-9):
        print(f"note: replacing LiteLLM's {key}={value} (not 2 x input)", file=sys.stderr)
        del prices[key]


def missing_base(provider: str, field: str, out: dict) -> float:
    """A base price LiteLLM leaves out, by the provider's rule."""
    if provider == "anthropic":
        return out["input"] * ANTHROPIC_RATIOS[field]
    if provider == "openai" and field != "cache_read":
        # OpenAI's automatic caching charges nothing to write; a listed write price wins.
        return out.get("cache_write_5m", 0.0) if field == "cache_write_1h" else 0.0
    # Gemini bills tokens put into a cache as ordinary input; so does any uncached read.
    return out["input"]


def tier_prices(entry: dict, base: dict, derived: list[str]) -> dict:
    """The long-context tier (lowest threshold LiteLLM lists), or {} when there is none."""
    thresholds = sorted(int(m.group(1)) for k in entry if (m := TIER_RE.match(k)))
    if not thresholds:
        return {}
    suffix = f"_above_{thresholds[0]}k_tokens"
    ratio = entry["input_cost_per_token" + suffix] / base["input"] if base["input"] else 1.0
    listed = {f + "_above": entry[k + suffix] for f, k in FIELDS.items()
              if isinstance(entry.get(k + suffix), (int, float))}
    if entry["litellm_provider"] == "anthropic":
        drop_wrong_1h(listed, "_above")
    out: dict = {"threshold_tokens": thresholds[0] * 1000}
    for field in FIELDS:
        value = listed.get(field + "_above")
        if value is None:
            # Long-context prices scale every token kind by the same factor as input.
            value = base[field] * ratio
            derived.append(field + "_above")
        out[field + "_above"] = value
    return out


def model_record(entry: dict, rev: str | None) -> dict:
    """One model's record for prices.json."""
    derived: list[str] = []
    provider = entry["litellm_provider"]
    if provider not in ("anthropic", "openai"):
        # Gemini bills cache writes as input; LiteLLM's stray Vertex write tiers contradict that.
        entry = {k: v for k, v in entry.items() if not k.startswith("cache_creation")}
        provider = "gemini"
    base = base_prices(entry, derived)
    record = {**base, **tier_prices(entry, base, derived)}
    record = {k: (num(v) if isinstance(v, float) else v) for k, v in record.items()}
    record["provider"] = provider
    if derived:
        record["derived"] = sorted(derived)  # fields computed here, not read from LiteLLM
    if rev:
        record["from"] = f"litellm-{rev}"  # only for models the primary source no longer lists
    return record


def add_anthropic_aliases(models: dict) -> None:
    """Give every dated Anthropic id its undated alias, unless LiteLLM lists the alias itself."""
    for name in sorted(models):
        m = ANTHROPIC_DATED.match(name)
        if m and m.group(1) not in models:
            models[m.group(1)] = dict(models[name])


def listed_names(data: dict) -> set[str]:
    """Every bare name the file lists for our providers, in any mode."""
    return {bare_name(k) for k, v in data.items()
            if isinstance(v, dict) and v.get("litellm_provider") in PROVIDER_RANK}


def build_models(data: dict, rev: str | None = None) -> dict:
    """All selected models of one LiteLLM file, keyed by bare name."""
    models = {name: model_record(entry, rev) for name, (_, entry) in pick_entries(data).items()}
    add_anthropic_aliases(models)
    return models


def short_rev(rev: str) -> str:
    """A commit cut to 8 characters; a release label as given."""
    return rev[:8] if re.fullmatch(r"[0-9a-f]{9,40}", rev) else rev


def parse_fallback(spec: str) -> tuple[Path, str]:
    """Split `PATH=REV`."""
    path, sep, rev = spec.rpartition("=")
    if not sep or not path or not rev:
        raise SystemExit(f"--fallback expects PATH=REV, got {spec!r}")
    return Path(path), short_rev(rev)


def generate(source: Path, rev: str, date: str, fallbacks: list[tuple[Path, str]]) -> dict:
    """The whole prices.json document."""
    data = json.loads(source.read_text(encoding="utf-8"))
    models, known = build_models(data), listed_names(data)
    notes = []
    for path, frev in fallbacks:
        older = build_models(json.loads(path.read_text(encoding="utf-8")), frev)
        # A name the primary still lists under another mode (say realtime) was moved, not retired.
        added = sorted(set(older) - set(models) - known)
        models.update({name: older[name] for name in added})
        notes.append(f"{len(added)} models no longer listed filled from litellm-{frev}")
    source_text = f"LiteLLM model_prices_and_context_window.json at {rev}"
    if notes:
        source_text += "; " + "; ".join(notes)
    return {"version": f"{date}-litellm-{rev}", "source": source_text, "models": models}


def check(doc: dict, required: list[str]) -> None:
    """Fail loudly when a model the package promises is missing."""
    missing = [name for name in required if name not in doc["models"]]
    if missing:
        raise SystemExit(f"missing required models: {', '.join(missing)}")


REQUIRED = ["claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-haiku-4-5", "claude-3-7-sonnet",
            "gpt-5", "gpt-5-mini", "gpt-4.1-nano", "gemini-2.5-flash"]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="LiteLLM model_prices_and_context_window.json")
    ap.add_argument("--rev", required=True, help="the snapshot's commit or release, e.g. 19a1f629 or v1.109.1")
    ap.add_argument("--fallback", action="append", default=[], metavar="PATH=REV",
                    help="older LiteLLM file whose models the source no longer lists are kept")
    ap.add_argument("--date", default=dt.datetime.now(dt.timezone.utc).date().isoformat(),
                    help="date in the version string (default: today, UTC)")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    fallbacks = [parse_fallback(spec) for spec in args.fallback]
    doc = generate(args.source, short_rev(args.rev), args.date, fallbacks)
    check(doc, REQUIRED)
    args.output.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{args.output}: {len(doc['models'])} models, version {doc['version']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
