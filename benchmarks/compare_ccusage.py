"""reasonlog's daily Claude Code totals against ccusage's, on the same transcripts, with every difference explained.

    .venv/bin/python benchmarks/compare_ccusage.py                     # the shared spotter samples + quirks
    .venv/bin/python benchmarks/compare_ccusage.py --projects ~/.claude/projects

It installs ccusage 20.0.24 from the npm registry (once, into benchmarks/out/ccusage), builds a
CLAUDE_CONFIG_DIR holding the transcripts, runs `ccusage claude daily --json --offline --timezone UTC`
with an empty HOME, imports the same files with `reasonlog import` and reads `reasonlog stats --by day
--json`. Tokens must agree exactly and cost within 0.5 %, except where ccusage leaves a billed call
out. Those are found independently: the script reads every transcript line, groups them as both tools
do (one call per message.id + requestId, its largest usage), and marks the lines ccusage 20 passes
over, with the cause:

- `null-field`: a usage object with a null token count (ccusage drops the whole line);
- `not-compact`: a line not written in Claude Code's compact JSON (`"type": "assistant"` with a space):
  ccusage's native scanner matches the compact text and never sees the line.

A day's difference is explained when reasonlog's total minus the tokens of the calls (or the part of a
call's usage) that ccusage passed over equals ccusage's total exactly. Exit 0 when every day agrees
or is explained.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT.parent / "shared" / "fixtures" / "real" / "claude-code-transcripts"
CCUSAGE = "ccusage@20.0.24"
TOKENS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
OURS = {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
        "cache_creation_input_tokens": "cache_write_tokens", "cache_read_input_tokens": "cache_read_tokens"}
THEIRS = {"input_tokens": "inputTokens", "output_tokens": "outputTokens",
          "cache_creation_input_tokens": "cacheCreationTokens", "cache_read_input_tokens": "cacheReadTokens"}


def install_ccusage(cache: Path) -> Path:
    exe = cache / "node_modules" / ".bin" / "ccusage"
    if not exe.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(cache), CCUSAGE],
                       check=True, stdout=subprocess.DEVNULL)
    return exe


def quirks_transcript(folder: Path) -> None:
    """A small transcript with a line ccusage drops (a null cache count), written as Claude Code writes lines."""
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/work", "version": "2.1.40",
            "sessionId": "0b7c1d2e-0000-4000-8000-00000000c0de", "gitBranch": "main"}

    def said(i, text, at):
        return {**base, "type": "user", "uuid": f"u{i}", "timestamp": at, "message": {"role": "user", "content": text}}

    def answer(i, text, at, usage):
        return {**base, "type": "assistant", "uuid": f"a{i}", "requestId": f"req_q{i}", "timestamp": at,
                "message": {"model": "claude-sonnet-4-5-20250929", "id": f"msg_q{i}", "type": "message",
                            "role": "assistant", "content": [{"type": "text", "text": text}],
                            "stop_reason": "end_turn", "usage": usage}}
    lines = [said(1, "hi", "2026-03-01T10:00:00.000Z"),
             answer(1, "hello", "2026-03-01T10:00:02.000Z", {"input_tokens": 10, "output_tokens": 5,
                                                             "cache_creation_input_tokens": None,
                                                             "cache_read_input_tokens": 1000}),
             said(2, "again", "2026-03-01T10:01:00.000Z"),
             answer(2, "yes", "2026-03-01T10:01:02.000Z", {"input_tokens": 20, "output_tokens": 7,
                                                           "cache_creation_input_tokens": 50,
                                                           "cache_read_input_tokens": 1000})]
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    (folder / f"{base['sessionId']}.jsonl").write_text(text)


# ------------------------------------------------------------------------------ what ccusage passes over


def skip_cause(raw: bytes, usage: dict) -> str | None:
    if any(k in usage and usage[k] is None for k in TOKENS):
        return "null-field"
    if b'"type": "' in raw or b'"usage": {' in raw:
        return "not-compact"
    return None


def calls_of(projects: Path) -> dict[str, dict]:
    """Every billed call in the transcripts: its day, best usage, and the best usage ccusage can see."""
    calls: dict[str, dict] = {}
    for path in sorted(projects.rglob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            found = _assistant(line)
            if found is None:
                continue
            message, request_id, at = found
            usage = message.get("usage")
            if not isinstance(usage, dict) or not isinstance(at, str):
                continue
            key = f"{message.get('id')}:{request_id}" if request_id else str(message.get("id"))
            total = sum(usage.get(k) or 0 for k in TOKENS)
            call = calls.setdefault(key, {"day": at[:10], "model": message.get("model"), "ours": None,
                                          "ours_total": -1, "theirs": None, "theirs_total": -1, "causes": set()})
            if total >= call["ours_total"]:
                call["ours"], call["ours_total"] = usage, total
            cause = skip_cause(raw, usage)
            if cause:
                call["causes"].add(cause)
            elif total > call["theirs_total"]:
                call["theirs"], call["theirs_total"] = usage, total
    return calls


def _assistant(line):
    if not isinstance(line, dict):
        return None
    if line.get("type") == "assistant" and isinstance(line.get("message"), dict):
        return line["message"], line.get("requestId"), line.get("timestamp")
    data = line.get("data")
    if line.get("type") == "progress" and isinstance(data, dict) and data.get("type") == "agent_progress":
        inner = data.get("message")
        if isinstance(inner, dict) and inner.get("type") == "assistant" and isinstance(inner.get("message"), dict):
            return inner["message"], inner.get("requestId"), inner.get("timestamp")
    return None


# ------------------------------------------------------------------------------ the run


def run(projects: Path, cache: Path, work: Path) -> int:
    exe = install_ccusage(cache)
    config = work / "claude"
    shutil.copytree(projects, config / "projects")
    home = work / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    theirs = json.loads(subprocess.run([str(exe), "claude", "daily", "--json", "--offline", "--timezone", "UTC"],
                                       capture_output=True, text=True, env=env, check=True).stdout)
    db = work / "reasonlog.db"
    cli = [sys.executable, "-m", "reasonlog", "--db", str(db)]
    imported = subprocess.run([*cli, "import", str(config / "projects")], capture_output=True, text=True)
    print(imported.stdout.strip())
    ours = json.loads(subprocess.run([*cli, "stats", "--by", "day", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    return compare({r["day"]: r for r in ours}, {d["date"]: d for d in theirs["daily"]},
                   calls_of(config / "projects"))


def compare(ours: dict, theirs: dict, calls: dict) -> int:
    passed = collections.defaultdict(lambda: collections.Counter())  # day -> tokens ccusage did not see
    causes = collections.defaultdict(collections.Counter)            # day -> cause -> calls
    for call in calls.values():
        if not call["causes"]:
            continue
        seen = call["theirs"] or {}
        for k in TOKENS:
            passed[call["day"]][k] += (call["ours"].get(k) or 0) - (seen.get(k) or 0)
        for cause in call["causes"]:
            causes[call["day"]][cause] += 1
    bad = 0
    header = f"{'day':<11} {'tokens (input/output/cache write/cache read)':<58} {'cost':>22}  verdict"
    print(header)
    print("-" * len(header))
    for day in sorted(set(ours) | set(theirs)):
        o, t = ours.get(day, {}), theirs.get(day, {})
        mine = tuple(o.get(OURS[k], 0) for k in TOKENS)
        seen = tuple(t.get(THEIRS[k], 0) for k in TOKENS)
        unseen = tuple(passed[day][k] for k in TOKENS)
        cost_o, cost_t = o.get("cost_usd") or 0.0, t.get("totalCost") or 0.0
        if mine == seen and abs(cost_o - cost_t) <= 0.005 * max(cost_t, 1e-12):
            verdict = "agree"
        elif tuple(m - u for m, u in zip(mine, unseen, strict=True)) == seen:
            verdict = "explained: ccusage passed over " + ", ".join(
                f"{n} call(s) [{cause}]" for cause, n in sorted(causes[day].items()))
        else:
            verdict, bad = "UNEXPLAINED", bad + 1
        print(f"{day:<11} ours {'/'.join(map(str, mine)):<26} ccusage {'/'.join(map(str, seen)):<22}"
              f" ${cost_o:.7f} vs ${cost_t:.7f}  {verdict}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=Path, help="a Claude Code projects folder (default: the shared "
                        "samples, plus a transcript with a line ccusage drops)")
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "out" / "ccusage")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        projects = args.projects
        if projects is None:
            projects = work / "input"
            shutil.copytree(SAMPLES / "spotter", projects / "spotter")
            shutil.copytree(SAMPLES / "claude-code-log-synthetic", projects / "synthetic")
            quirks_transcript(projects / "quirks")
        return run(projects.expanduser(), args.cache, work / "run")


if __name__ == "__main__":
    sys.exit(main())
