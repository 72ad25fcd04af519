"""Issue 24's search quality: recall@10 and MRR of each search mode on a labelled query set over the real fixtures.

    .venv/bin/python benchmarks/bench_search_quality.py                  # every mode, k = 10
    .venv/bin/python benchmarks/bench_search_quality.py --modes text,hybrid --json
    .venv/bin/python benchmarks/bench_search_quality.py --subprocess     # one `python -m reasonlog` per query
    .venv/bin/python benchmarks/bench_search_quality.py --answers A.json # each query's hits kept in A.json
    .venv/bin/python benchmarks/bench_search_quality.py --compare A.json # which queries moved since A.json, and how

Builds a fresh database in a temporary folder with `reasonlog import` of the importable real fixtures
(`../shared/fixtures/real`, the paths listed in `search_queries.json`: the same set every run), resolves every
query's targets to messages of that database, then asks `reasonlog search QUERY --mode M --json --limit 10` for
each mode (`text` is today's exact-substring search: without `--mode` when the CLI has no such option; `text-any`
is the same search asked for the query's words joined by OR, the baseline a user has today). It prints, per mode,
recall@10 and MRR at the session level and at the message level, how many queries found nothing, and the ratio of
each figure to `text-any` measured in the same run. A mode the CLI does not offer is reported as not available, and
one whose search fails as failed. The exit status is 1 when hybrid was measured and does not beat full-text search
(`text`, `text-any` and `keywords`, each where available: higher session recall@10 and higher session MRR), 2 when a
target does not resolve or `--keep` names a folder that already holds a database (the import would add nothing and
`embed` would cut nothing new: the figures would be those of the code that built it). `--after-import ARGS` runs a
reasonlog command on the fresh database first (an index a mode needs, say).

`--answers FILE` writes each query's targets and each mode's hits in order; `--compare FILE` lists, per mode, the
queries whose first target's session or message rank or whose recall moved since such a file, better or worse: a
figure that changes is explained query by query, not by its mean.

Targets are named stably, never by session id: a fixture file (relative to the fixtures folder; the sessions the
import reports for that file, optionally only those of one `agent`) and a piece of text that occurs in exactly one
message of those sessions (case-insensitive, as `reasonlog search` matches: a message, or a tool result or outcome
at its position). A target resolves to (session id, message position in the session's timeline) -- the
`session_id` and `message_idx` of a search hit.

Ranking. A mode's answer is its hits in order. At the message level the ranked items are the distinct
(session_id, message_idx) of the hits, at the session level the distinct session ids in order of their first hit.
recall@k of a query is the share of its targets among the first k items; its reciprocal rank is 1/rank of the first
target among them (0 if none). Both are averaged over the queries.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "real"
QUERIES = Path(__file__).resolve().with_name("search_queries.json")
MODES = ("text", "text-any", "keywords", "semantic", "hybrid")
FULL_TEXT = ("text", "text-any", "keywords")
BASELINE = "text-any"
# The `--mode` value each mode is asked with (`text-any` is `text` asked for the query's words joined by OR).
CLI_MODE = {"text": "text", "text-any": "text", "keywords": "keywords", "semantic": "semantic", "hybrid": "hybrid"}
K = 10
# Left out of `text-any`'s OR query: words that occur in nearly every message (search matches any part of a word).
STOP_WORDS = frozenset(
    "a an and any are as at be because been before but by could did didn't does doesn't for from get got had has have"
    " how i in into is it its it's me my no not of on once or our out over so than that the their them then there"
    " they this to too up was wasn't were what when where which while who why will with would you your".split())

Key = tuple[str, int]  # (session_id, message_idx)


# ------------------------------------------------------------------ the metric (pure)


def ranked_once(items: Sequence[Hashable]) -> list:
    """`items` in order, each kept at its first place only."""
    seen: set = set()
    return [i for i in items if not (i in seen or seen.add(i))]


def query_scores(ranked: Sequence[Hashable], relevant: Collection[Hashable], k: int = K) -> tuple[float, float]:
    """(recall@k, reciprocal rank within k) of one ranked answer; repeated items count at their first place."""
    if not relevant:
        raise ValueError("a query needs at least one relevant item")
    top = ranked_once(ranked)[:k]
    found = sum(1 for item in set(relevant) if item in top)
    first = next((rank for rank, item in enumerate(top, 1) if item in relevant), None)
    return found / len(set(relevant)), (1 / first if first else 0.0)


def recall_mrr(rankings: Sequence[Sequence[Hashable]], relevant: Sequence[Collection[Hashable]],
               k: int = K) -> tuple[float, float]:
    """Mean recall@k and mean reciprocal rank (MRR@k) over queries: `rankings[i]` answers the query whose relevant
    items are `relevant[i]`."""
    if len(rankings) != len(relevant):
        raise ValueError("one ranking per query")
    if not rankings:
        raise ValueError("no queries")
    scores = [query_scores(r, rel, k) for r, rel in zip(rankings, relevant, strict=True)]
    return (statistics.fmean(s[0] for s in scores), statistics.fmean(s[1] for s in scores))


def message_ranking(hits: Sequence[dict]) -> list[Key]:
    return ranked_once([(h["session_id"], h["message_idx"]) for h in hits])


def session_ranking(hits: Sequence[dict]) -> list[str]:
    return ranked_once([h["session_id"] for h in hits])


# ------------------------------------------------------------------ the query set and its targets


def load_set(path: Path = QUERIES) -> dict:
    return json.loads(path.read_text())


class TargetError(Exception):
    """Targets that do not resolve to exactly one message; the message lists every one of them."""


def cli():
    from reasonlog.cli.main import cli as group

    return group


def build_database(folder: Path, qset: dict, fixtures: Path = FIXTURES, after: Sequence[str] = ()) -> Path:
    """A fresh database in `folder` holding `reasonlog import` of the set's fixture paths; then each of `after`
    (reasonlog arguments, split like a shell's, e.g. a command that builds an index the search needs) on it."""
    from click.testing import CliRunner

    db = folder / "quality.db"
    paths = [str(fixtures / p) for p in qset["imports"]]
    result = CliRunner().invoke(cli(), ["--db", str(db), "import", "--json", *paths])
    if result.exit_code not in (0, 1):  # 1: some lines skipped (the synthetic edge cases have malformed lines)
        raise RuntimeError(f"import failed ({result.exit_code}): {result.output}")
    for command in after:
        result = CliRunner().invoke(cli(), ["--db", str(db), *shlex.split(command)])
        if result.exit_code != 0:
            raise RuntimeError(f"reasonlog {command} failed ({result.exit_code}): {result.output}")
    return db


def sessions_by_file(store, fixtures: Path = FIXTURES) -> dict[str, list[str]]:
    """Each imported file (relative to `fixtures`) with the sessions the import gave it."""
    root = fixtures.resolve()
    out: dict[str, list[str]] = {}
    for row in store.import_files():
        path = Path(row["path"]).resolve()
        if path.is_relative_to(root):
            out[path.relative_to(root).as_posix()] = list(row["sessions"])
    return out


def phrase(text: str) -> str:
    """`text` as a `reasonlog search` query that finds exactly that text: plain when it holds no operator, else
    quoted."""
    from reasonlog.store.search import Query

    return text if Query.parse(text).groups == ((text.lower().strip(),),) else f'"{text}"'


def resolve(store, qset: dict, fixtures: Path = FIXTURES) -> dict[str, list[Key]]:
    """Each query's targets as (session id, message_idx), in the set's order; TargetError names every target that
    does not occur in exactly one message of its file's sessions."""
    from reasonlog.store import SessionFilter, StoreError

    files = sessions_by_file(store, fixtures)
    agents = {s["id"]: s.get("agent") for s in store.list_sessions(SessionFilter(limit=None))}
    resolved: dict[str, list[Key]] = {}
    problems: list[str] = []
    for q in qset["queries"]:
        keys: list[Key] = []
        for t in q["targets"]:
            where = f"{q['id']}: {t['file']}" + (f" (agent {t['agent']})" if t.get("agent") else "") + f" {t['text']!r}"
            if '"' in t["text"] or len(t["text"].strip()) < 3:
                problems.append(f"{where}: a target text has 3 characters or more and no double quote")
                continue
            if t["file"] not in files:
                problems.append(f"{where}: the import gave this file no session")
                continue
            sessions = {s for s in files[t["file"]] if t.get("agent") is None or agents.get(s) == t["agent"]}
            try:
                hits = store.search(phrase(t["text"]), SessionFilter(limit=None), limit=None)
            except StoreError as exc:
                problems.append(f"{where}: {exc}")
                continue
            found = sorted({(h["session_id"], h["message_idx"]) for h in hits if h["session_id"] in sessions})
            if len(found) != 1:
                problems.append(f"{where}: found in {len(found)} messages {found[:5]}")
                continue
            if found[0] in keys:
                problems.append(f"{where}: the same message as another target of this query")
            keys.append(found[0])
        resolved[q["id"]] = keys
    if problems:
        raise TargetError("targets that do not resolve to exactly one message:\n  " + "\n  ".join(problems))
    return resolved


# ------------------------------------------------------------------ asking the CLI


def search_command():
    return cli().commands["search"]


def mode_choices() -> list[str] | None:
    """The values `reasonlog search --mode` takes; None when the option does not exist."""
    for param in search_command().params:
        if param.name == "mode":
            return list(getattr(param.type, "choices", None) or [])
    return None


def availability(modes: Sequence[str]) -> dict[str, str | None]:
    """Each mode with None when the CLI offers it, else why not."""
    choices = mode_choices()
    out: dict[str, str | None] = {}
    for mode in modes:
        asked = CLI_MODE[mode]
        if choices is None:
            out[mode] = None if asked == "text" else "not available (reasonlog search has no --mode option)"
        else:
            out[mode] = None if asked in choices else f"not available (--mode takes {', '.join(choices)})"
    return out


def any_word_query(query: str) -> str:
    """The query's words (3 characters or more, stop words left out) joined by OR: what today's search can be asked
    for a question in words."""
    words = re.findall(r"[a-z0-9]+(?:[.'][a-z0-9]+)*", query.lower())
    kept = list(dict.fromkeys(w for w in words if len(w) >= 3 and w not in STOP_WORDS))
    return " OR ".join(kept) if kept else query


def search_args(db: Path, query: str, mode: str, k: int) -> list[str]:
    """`reasonlog search` arguments for `query` in `mode`; `text-any` is `text` asked for any of the query's words."""
    if mode == "text-any":
        query = any_word_query(query)
    flag = [] if mode_choices() is None else ["--mode", CLI_MODE[mode]]
    return ["--db", str(db), "search", query, *flag, "--json", "--limit", str(k)]


def run_search(db: Path, query: str, mode: str, k: int = K, in_process: bool = True) -> list[dict]:
    """The hits `reasonlog search` prints as JSON; RuntimeError with its output when it fails."""
    args = search_args(db, query, mode, k)
    if in_process:
        from click.testing import CliRunner

        result = CliRunner().invoke(cli(), args)
        code, out, err = result.exit_code, result.stdout, result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            err = f"{type(result.exception).__name__}: {result.exception}"
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        proc = subprocess.run([sys.executable, "-m", "reasonlog", *args], capture_output=True, text=True, env=env)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    if code != 0:
        raise RuntimeError(f"exit {code}: {(err or out).strip()[-500:]}")
    return json.loads(out)


# ------------------------------------------------------------------ one run


@dataclass
class ModeResult:
    mode: str
    unavailable: str | None = None
    session_recall: float = 0.0
    session_mrr: float = 0.0
    message_recall: float = 0.0
    message_mrr: float = 0.0
    no_hit: int = 0
    queries: int = 0
    seconds: float = 0.0
    by_style: dict | None = None
    per_query: list | None = None
    answers: dict | None = None  # query id: its hits (for --answers; not in --json)


def score(qset: dict, targets: dict[str, list[Key]], answers: dict[str, list[dict]], k: int = K) -> dict:
    """Session- and message-level recall@k and MRR of `answers` (query id: hits), overall and by style."""
    def figures(queries: list[dict]) -> dict:
        hits = [answers[q["id"]] for q in queries]
        rel = [targets[q["id"]] for q in queries]
        s = recall_mrr([session_ranking(h) for h in hits], [{sid for sid, _ in r} for r in rel], k)
        m = recall_mrr([message_ranking(h) for h in hits], [set(r) for r in rel], k)
        return {"queries": len(queries), "session_recall": s[0], "session_mrr": s[1], "message_recall": m[0],
                "message_mrr": m[1], "no_hit": sum(1 for h in hits if not h)}

    out = figures(qset["queries"])
    styles = sorted({q["style"] for q in qset["queries"]})
    out["by_style"] = {st: figures([q for q in qset["queries"] if q["style"] == st]) for st in styles}
    return out


def measure(db: Path, qset: dict, targets: dict[str, list[Key]], mode: str, k: int, in_process: bool) -> ModeResult:
    answers: dict[str, list[dict]] = {}
    started = time.perf_counter()
    try:
        for q in qset["queries"]:
            answers[q["id"]] = run_search(db, q["query"], mode, k, in_process)
    except RuntimeError as exc:
        return ModeResult(mode, unavailable=f"failed on {q['id']} ({q['query']!r}): {exc}")
    seconds = time.perf_counter() - started
    fig = score(qset, targets, answers, k)
    per_query = [{"id": q["id"], "hits": len(answers[q["id"]]),
                  "first_target_rank": next((r for r, key in enumerate(message_ranking(answers[q["id"]]), 1)
                                             if key in set(targets[q["id"]])), None)} for q in qset["queries"]]
    return ModeResult(mode, None, fig["session_recall"], fig["session_mrr"], fig["message_recall"], fig["message_mrr"],
                      fig["no_hit"], fig["queries"], seconds, fig["by_style"], per_query, answers)


# ------------------------------------------------------------------ answers kept, and which queries moved since

Places = tuple[int | None, int | None, float, float]


def answers_record(k: int, targets: dict[str, list[Key]], answers: dict[str, dict[str, list[dict]]]) -> dict:
    """What `--answers FILE` writes: each query's targets and, per mode, its hits in order (place, kind, score)."""
    return {"k": k, "targets": {q: [list(key) for key in keys] for q, keys in targets.items()},
            "modes": {mode: {q: [[h["session_id"], h["message_idx"], h["kind"], h.get("tool_use_id"), h.get("score")]
                                 for h in hits] for q, hits in by_query.items()} for mode, by_query in answers.items()}}


def places(hits: Sequence[dict], keys: Collection[Key], k: int = K) -> Places:
    """(rank of the first target's session, rank of the first target message, session recall@k, message recall@k) of
    one answer; a rank past k is None."""
    sessions, messages = session_ranking(hits), message_ranking(hits)
    wanted, found = {s for s, _ in keys}, set(keys)
    s_recall, s_rr = query_scores(sessions, wanted, k)
    m_recall, m_rr = query_scores(messages, found, k)
    return (round(1 / s_rr) if s_rr else None, round(1 / m_rr) if m_rr else None, s_recall, m_recall)


def moves(old: dict, new: dict) -> list[tuple[str, str, Places, Places]]:
    """(mode, query id, places before, places after) of each query whose places differ between two `answers_record`s,
    in the modes and queries both hold; each record's answers against its own targets."""
    def of(record: dict, mode: str, query: str) -> Places:
        hits = [{"session_id": row[0], "message_idx": row[1]} for row in record["modes"][mode][query]]
        return places(hits, [tuple(key) for key in record["targets"][query]], new["k"])

    out = []
    for mode in (m for m in new["modes"] if m in old["modes"]):
        for query in (q for q in new["modes"][mode] if q in old["modes"][mode]):
            before, after = of(old, mode, query), of(new, mode, query)
            if before != after:
                out.append((mode, query, before, after))
    return out


def direction(before: Places, after: Places) -> str:
    """`better` when no figure of a moved query got worse, `worse` when none got better, else `mixed`."""
    def goods(p: Places) -> tuple[float, ...]:
        return (1 / p[0] if p[0] else 0.0, 1 / p[1] if p[1] else 0.0, p[2], p[3])

    pairs = list(zip(goods(before), goods(after), strict=True))
    return "better" if all(a >= b for b, a in pairs) else "worse" if all(a <= b for b, a in pairs) else "mixed"


def report_moves(qset: dict, old: dict, new: dict, source: Path) -> None:
    found = moves(old, new)
    asked = {q["id"]: q for q in qset["queries"]}
    for mode in (m for m in new["modes"] if m in old["modes"]):
        mine = [m for m in found if m[0] == mode]
        ways = [direction(b, a) for _, _, b, a in mine]
        print(f"{mode} against {source}: {len(mine)} of {len(new['modes'][mode])} queries moved"
              f" ({ways.count('better')} better, {ways.count('worse')} worse, {ways.count('mixed')} mixed)")
        for (_, q, b, a), way in zip(mine, ways, strict=True):
            def rank(r: int | None) -> str:
                return "-" if r is None else str(r)

            print(f"  {q} {asked.get(q, {}).get('style', '?'):<10} {way:<6} session rank {rank(b[0])} -> {rank(a[0])},"
                  f" message rank {rank(b[1])} -> {rank(a[1])}; recall session {b[2]:.2f} -> {a[2]:.2f}, message"
                  f" {b[3]:.2f} -> {a[3]:.2f}  {asked.get(q, {}).get('query', '')!r}")


def beats_full_text(results: dict[str, ModeResult]) -> bool | None:
    """Whether hybrid has a higher session recall@k and a higher session MRR than every full-text mode measured;
    None when hybrid or every full-text mode is missing."""
    hybrid = results.get("hybrid")
    full = [r for m, r in results.items() if m in FULL_TEXT and r.unavailable is None]
    if hybrid is None or hybrid.unavailable is not None or not full:
        return None
    return all(hybrid.session_recall > f.session_recall and hybrid.session_mrr > f.session_mrr for f in full)


def ratio(value: float, base: float) -> str:
    if base == 0:
        return "  n/a " if value == 0 else "   inf"
    return f"{value / base:5.2f}x"


def report(qset: dict, targets: dict, results: dict[str, ModeResult], k: int, corpus: dict) -> None:
    styles = {st: sum(1 for q in qset["queries"] if q["style"] == st) for st in sorted({q["style"] for q in
                                                                                         qset["queries"]})}
    n_targets = sum(len(t) for t in targets.values())
    print(f"issue 24 search quality: {len(qset['queries'])} queries "
          f"({', '.join(f'{n} {st}' for st, n in styles.items())}), {n_targets} target messages, k={k}; corpus: "
          f"{corpus['sessions']} sessions, {corpus['files']} files imported")
    print(f"{'mode':<16} {'session R@' + str(k):>13} {'MRR':>6} {'message R@' + str(k):>14} {'MRR':>6} "
          f"{'no hit':>8} {'time':>7}")
    for mode, r in results.items():
        if r.unavailable:
            print(f"{mode:<16} {r.unavailable}")
            continue
        rows = [(mode, vars(r), f" {r.seconds:6.1f}s")] + \
            [(f"  {st}", f, "") for st, f in (r.by_style or {}).items()]
        for name, f, tail in rows:
            print(f"{name:<16} {f['session_recall']:13.3f} {f['session_mrr']:6.3f} {f['message_recall']:14.3f}"
                  f" {f['message_mrr']:6.3f} {f['no_hit']:>4}/{f['queries']:<3}{tail}")
    base = results.get(BASELINE)
    if base is not None and base.unavailable is None:
        for mode, r in results.items():
            if mode != BASELINE and r.unavailable is None:
                print(f"{mode} / {BASELINE} (same run): session R@{k} {ratio(r.session_recall, base.session_recall)},"
                      f" MRR {ratio(r.session_mrr, base.session_mrr)}; message R@{k}"
                      f" {ratio(r.message_recall, base.message_recall)}, MRR {ratio(r.message_mrr, base.message_mrr)}")
    verdict = beats_full_text(results)
    print(f"hybrid beats full-text (session R@{k} and MRR above {', '.join(FULL_TEXT)}): "
          + {None: "not measured", True: "yes", False: "NO"}[verdict])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    ap.add_argument("--k", type=int, default=K)
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument("--json", action="store_true", help="results as JSON on stdout")
    ap.add_argument("--subprocess", action="store_true",
                    help="run `python -m reasonlog search` once per query instead of the CLI in this process")
    ap.add_argument("--keep", type=Path, help="build the database in this folder and keep it")
    ap.add_argument("--after-import", action="append", default=[], metavar="ARGS",
                    help="reasonlog arguments to run on the database after the import (repeatable), e.g. a command"
                         " that builds what a search mode needs")
    ap.add_argument("--answers", type=Path, metavar="FILE", help="write each query's targets and hits here (JSON)")
    ap.add_argument("--compare", type=Path, metavar="FILE",
                    help="list the queries that moved since an --answers FILE, per mode")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        ap.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    qset = load_set(args.queries)
    if args.keep and (args.keep / "quality.db").exists():
        print(f"{args.keep / 'quality.db'} exists: its sessions would not be imported again nor cut again for `embed`,"
              " so the figures would be those of the code that built it; name a fresh folder", file=sys.stderr)
        return 2
    try:
        old = json.loads(args.compare.read_text()) if args.compare else None
    except (OSError, ValueError) as exc:
        print(f"{args.compare}: not an --answers file ({exc})", file=sys.stderr)
        return 2
    from reasonlog.store import SessionFilter, open_store

    with tempfile.TemporaryDirectory(prefix="h24quality-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        db = build_database(folder, qset, after=args.after_import)
        store = open_store(db)
        try:
            targets = resolve(store, qset)
        except TargetError as exc:
            print(exc, file=sys.stderr)
            return 2
        corpus = {"sessions": len(store.list_sessions(SessionFilter(limit=None))),
                  "files": len(sessions_by_file(store))}
        store.close()
        print(f"imported and resolved in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
        results: dict[str, ModeResult] = {}
        for mode, why in availability(modes).items():
            results[mode] = ModeResult(mode, unavailable=why) if why else \
                measure(db, qset, targets, mode, args.k, not args.subprocess)
    record = answers_record(args.k, targets, {m: r.answers for m, r in results.items() if r.answers is not None})
    if args.answers:
        args.answers.write_text(json.dumps(record))
    if args.json:
        print(json.dumps({"k": args.k, "queries": len(qset["queries"]), "corpus": corpus,
                          "hybrid_beats_full_text": beats_full_text(results),
                          "modes": {m: {f: v for f, v in vars(r).items() if f != "answers"}
                                    for m, r in results.items()},
                          "moved": None if old is None else moves(old, record)}, indent=2))
    else:
        report(qset, targets, results, args.k, corpus)
        if old is not None:
            report_moves(qset, old, record, args.compare)
    return 1 if beats_full_text(results) is False else 0


if __name__ == "__main__":
    sys.exit(main())
