#!/usr/bin/env python3
"""Generate src/reasonlog/prices.json from LiteLLM's model price file.

Usage:
    python scripts/gen_prices.py PATH/model_prices_and_context_window.json --rev COMMIT_OR_VERSION \
        [--fallback OLDER.json=REV ...] [--date YYYY-MM-DD] [-o src/reasonlog/prices.json]

The bundled table (version 2026-11-22-litellm-v1.109.1) was made exactly so:

    pip download litellm==1.109.1 --no-deps -d /tmp/ll
    pip download litellm==1.90.0 --no-deps -d /tmp/ll/old
    (cd /tmp/ll && unzip -o -q litellm-1.109.1-*.whl litellm/model_prices_and_context_window_backup.json)
    (cd /tmp/ll/old && unzip -o -q litellm-1.90.0-*.whl litellm/model_prices_and_context_window_backup.json)
    python scripts/gen_prices.py /tmp/ll/litellm/model_prices_and_context_window_backup.json --rev v1.109.1 \
        --fallback /tmp/ll/old/litellm/model_prices_and_context_window_backup.json=v1.90.0 --date 2026-11-22

PATH is LiteLLM's `model_prices_and_context_window.json` (from the BerriAI/litellm repository, or
`litellm/model_prices_and_context_window_backup.json` inside a litellm wheel); nothing of LiteLLM
is committed here. `--rev` names that snapshot: a commit (cut to 8 characters) or a release.
`--fallback` files are older snapshots that add models the primary no longer lists (LiteLLM
drops retired models, but old recordings still name them), and a maker's own price for a bare
name the primary only lists through resellers. The output depends only on the inputs and --date,
so the same command gives the same bytes.

Every chat model with a non-zero per-token price is kept, under its LiteLLM key (lowercased) and
under its bare name (`deepseek-reasoner` for `deepseek/deepseek-reasoner`). A bare name takes the
maker's own price; a name only resellers list gets one when they all agree, else none.
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

# Providers that sell their own models: a bare model name (`deepseek-reasoner`, `grok-4.3`,
# `qwen-max`) takes their price. A name only resellers list gets a bare entry when they all agree.
# reasonlog.pricing.FIRST_PARTY is these two sets together: at lookup, of the spellings of a name that the
# table lists, the one these providers list wins (tests/test_pricing_first_party.py checks they agree).
FIRST_PARTY = {"anthropic", "openai", "gemini", "deepseek", "mistral", "xai", "dashscope", "minimax", "moonshot",
               "zai", "cohere_chat", "ai21", "amazon_nova", "perplexity", "meta"}
SECOND_PARTY = {"vertex_ai-language-models", "vertex_ai-anthropic_models"}  # the makers' models on Vertex
GEMINI_PROVIDERS = {"gemini", "vertex_ai-language-models"}
MODES = {"chat", "responses"}  # the codex and *-pro models are listed as "responses"
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
    """A LiteLLM key's last path segment, lowercased, without a Vertex version pin (`@20250929`):
    `groq/openai/gpt-oss-120b` -> `gpt-oss-120b`."""
    return key.rsplit("/", 1)[-1].lower().split("@", 1)[0]


def wanted(key: str, entry: object) -> bool:
    """True for a chat model with per-token prices, at least one of them not zero.

    LiteLLM writes 0 for prices it does not know (local runtimes, some gateways); such a model
    stays out, so that its calls show as unpriced instead of free.
    """
    if not isinstance(entry, dict) or entry.get("mode") not in MODES:
        return False
    prices = [entry.get("input_cost_per_token"), entry.get("output_cost_per_token")]
    return all(isinstance(p, (int, float)) for p in prices) and any(prices)


def rank(key: str, entry: dict) -> tuple[int, bool, str]:
    """Which listing of a bare name wins: the maker's own, then Vertex, then resellers."""
    provider = entry["litellm_provider"]
    level = 0 if provider in FIRST_PARTY else 1 if provider in SECOND_PARTY else 2
    return level, "/" in key, key


def pick_entries(data: dict) -> dict[str, tuple[str, dict]]:
    """Map each full key, lowercased, to (LiteLLM key, entry); the best listing wins a collision."""
    best: dict[str, tuple[str, dict]] = {}
    for key, entry in data.items():
        if wanted(key, entry) and (key.lower() not in best or rank(key, entry) < rank(*best[key.lower()])):
            best[key.lower()] = (key, entry)
    return best


def bare_choices(picked: dict[str, tuple[str, dict]], models: dict) -> dict[str, tuple[int, str]]:
    """Bare name -> (level, full name whose prices it takes): the maker's listing, or resellers that all agree."""
    listings: dict[str, list[tuple[tuple, str]]] = {}
    for full, (key, entry) in picked.items():
        listings.setdefault(bare_name(key), []).append((rank(key, entry), full))
    chosen = {}
    for bare, found in listings.items():
        best = min(found)
        prices = {json.dumps(prices_only(models[full]), sort_keys=True) for _, full in found}
        if best[0][0] < 2 or len(prices) == 1:  # resellers that disagree: no bare name, never a guess
            chosen[bare] = (best[0][0], best[1])
    return chosen


def prices_only(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("provider", "derived", "from")}


def base_prices(entry: dict, family: str, derived: list[str]) -> dict:
    """Per-token base prices, filling LiteLLM's gaps by the billing rule of the model's family."""
    out = {f: entry[k] for f, k in FIELDS.items() if isinstance(entry.get(k), (int, float))}
    if family == "anthropic":
        drop_wrong_1h(out, "")
    for field in ("cache_read", "cache_write_5m", "cache_write_1h"):
        if field not in out:
            out[field] = missing_base(family, field, out)
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


def missing_base(family: str, field: str, out: dict) -> float:
    """A base price LiteLLM leaves out, by the family's rule."""
    if family == "anthropic":
        return out["input"] * ANTHROPIC_RATIOS[field]
    if field == "cache_write_1h" and "cache_write_5m" in out:
        return out["cache_write_5m"]
    # Without a listed price, a token read from or written to a cache is billed as input: no
    # discount is invented, and Gemini bills cache writes that way. (OpenAI charges nothing to
    # write, but never reports writes either, so its calls cost the same.)
    return out["input"]


def tier_prices(entry: dict, family: str, base: dict, derived: list[str]) -> dict:
    """The long-context tier (lowest threshold LiteLLM lists), or {} when there is none."""
    thresholds = sorted(int(m.group(1)) for k in entry if (m := TIER_RE.match(k)))
    if not thresholds:
        return {}
    suffix = f"_above_{thresholds[0]}k_tokens"
    ratio = entry["input_cost_per_token" + suffix] / base["input"] if base["input"] else 1.0
    listed = {f + "_above": entry[k + suffix] for f, k in FIELDS.items()
              if isinstance(entry.get(k + suffix), (int, float))}
    if family == "anthropic":
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


def model_record(key: str, entry: dict, rev: str | None) -> dict:
    """One model's record for prices.json."""
    derived: list[str] = []
    provider = entry["litellm_provider"]
    if provider in GEMINI_PROVIDERS or bare_name(key).startswith("gemini-"):
        # Gemini bills cache writes as input; LiteLLM's stray Vertex write tiers contradict that.
        entry = {k: v for k, v in entry.items() if not k.startswith("cache_creation")}
    base = base_prices(entry, family(key, provider), derived)
    record = {**base, **tier_prices(entry, family(key, provider), base, derived)}
    record = {k: (num(v) if isinstance(v, float) else v) for k, v in record.items()}
    record["provider"] = provider
    window = entry.get("max_input_tokens")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        record["max_input_tokens"] = window  # the context window the dashboard measures fullness against
    if derived:
        record["derived"] = sorted(derived)  # fields computed here, not read from LiteLLM
    if rev:
        record["from"] = f"litellm-{rev}"  # only for models the primary source no longer lists
    return record


def family(key: str, provider: str) -> str:
    """Whose billing rules fill LiteLLM's gaps: Claude's wherever it is sold, else the generic rule."""
    return "anthropic" if provider == "anthropic" or "claude" in bare_name(key) else provider


def add_anthropic_aliases(models: dict, levels: dict) -> None:
    """Give every dated Anthropic id its undated alias, unless the maker lists the alias itself."""
    for name in sorted(models):
        m = ANTHROPIC_DATED.match(name)
        if m and models[name]["provider"] == "anthropic" and levels.get(m.group(1), 3) > 0:
            models[m.group(1)], levels[m.group(1)] = dict(models[name]), 0


def listed_names(data: dict) -> set[str]:
    """Every full and bare name the file lists, in any mode."""
    return {n for k, v in data.items() if isinstance(v, dict) for n in (k.lower(), bare_name(k))}


def build_models(data: dict, rev: str | None = None) -> tuple[dict, dict[str, int]]:
    """All selected models of one LiteLLM file, by full key and by bare name, and each bare name's level."""
    picked = pick_entries(data)
    models = {full: model_record(key, entry, rev) for full, (key, entry) in picked.items()}
    levels = {}
    for bare, (level, full) in bare_choices(picked, models).items():
        # The maker's price wins even over LiteLLM's unprefixed key (`gemini-2.0-flash` is Vertex's).
        models[bare], levels[bare] = models[full], level
    add_anthropic_aliases(models, levels)
    return models, levels


def merge_fallback(models: dict, levels: dict, known: set[str], older: dict, older_levels: dict) -> int:
    """Add what an older snapshot knows better: retired models, and a maker's price for a bare name
    that the newer file only gets from resellers. Returns how many names it added or replaced."""
    taken = sorted(n for n in older if (n not in models and n not in known)
                   or older_levels.get(n, 3) < levels.get(n, 3))
    for name in taken:
        models[name] = older[name]
        levels[name] = older_levels.get(name, 3)
    return len(taken)


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
    (models, levels), known = build_models(data), listed_names(data)
    notes = []
    for path, frev in fallbacks:
        # A name the primary still lists under another mode (say realtime) was moved, not retired.
        count = merge_fallback(models, levels, known, *build_models(json.loads(path.read_text(encoding="utf-8")),
                                                                    frev))
        notes.append(f"{count} models filled from litellm-{frev}")
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
            "gpt-5", "gpt-5-mini", "gpt-4.1-nano", "gemini-2.5-flash", "deepseek-reasoner",
            "deepseek/deepseek-reasoner", "mistral-large-latest", "grok-4.3", "minimax-m2", "qwen-max",
            "anthropic.claude-sonnet-4-5-20250929-v1:0"]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="LiteLLM model_prices_and_context_window.json")
    ap.add_argument("--rev", required=True, help="the snapshot's commit or release, e.g. 19a1f629 or v1.109.1")
    ap.add_argument("--fallback", action="append", default=[], metavar="PATH=REV",
                    help="older LiteLLM file whose models the source no longer lists are kept")
    ap.add_argument("--date", default=dt.datetime.now(dt.UTC).date().isoformat(),
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
