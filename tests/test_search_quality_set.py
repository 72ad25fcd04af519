"""Issue 24's labelled query set (benchmarks/search_queries.json) holds, and its metric computes what it says.

The set is checked against the real fixtures on every run, so a fixture or importer change that moves a target
fails here, loudly, instead of quietly lowering the benchmark's figures. The fixtures are imported once per module.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.store import SessionFilter, open_store
from reasonlog.store.search import Query

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_search_quality.py"
_spec = importlib.util.spec_from_file_location("bench_search_quality", BENCH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclass looks itself up there
_spec.loader.exec_module(bench)

QSET = bench.load_set()
QUERIES = QSET["queries"]

pytestmark = pytest.mark.xdist_group("search_quality_set")  # one worker imports and embeds the module's corpus once


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The benchmark's database: the set's fixture paths imported once, the store open on it."""
    db = bench.build_database(tmp_path_factory.mktemp("quality"), QSET)
    store = open_store(db)
    yield db, store
    store.close()


@pytest.fixture(scope="module")
def targets(imported):
    try:
        return bench.resolve(imported[1], QSET)
    except bench.TargetError as exc:
        pytest.fail(str(exc), pytrace=False)


# ------------------------------------------------------------------ the set itself


def test_the_set_has_at_least_40_queries_about_a_third_of_them_sharing_a_word_with_their_target():
    assert len(QUERIES) >= 40
    assert len({q["id"] for q in QUERIES}) == len(QUERIES)
    assert len({q["query"].lower() for q in QUERIES}) == len(QUERIES)
    styles = Counter(q["style"] for q in QUERIES)
    assert set(styles) == {"keyword", "paraphrase"}
    assert 0.25 <= styles["keyword"] / len(QUERIES) <= 0.45, styles
    assert sum(1 for q in QUERIES if len(q["targets"]) > 1) >= 5  # some questions have several answers
    for q in QUERIES:
        assert q["targets"], q["id"]
        # Today's search reads a query with no operator as one phrase: the `text` mode asks for exactly this text.
        assert Query.parse(q["query"]).groups == ((q["query"].lower().strip(),),), q["id"]


def test_every_target_resolves_to_exactly_one_message_of_its_file(imported, targets):
    store = imported[1]
    sessions = {s["id"] for s in store.list_sessions(SessionFilter(limit=None))}
    assert set(targets) == {q["id"] for q in QUERIES}
    for q in QUERIES:
        keys = targets[q["id"]]
        assert len(keys) == len(q["targets"]) == len(set(keys)), q["id"]
        assert all(sid in sessions and isinstance(idx, int) for sid, idx in keys), q["id"]
    # A target of another file, or of another agent, is not found: the file and agent are part of the name.
    moved = {"imports": QSET["imports"], "queries": [{**QUERIES[0], "targets": [
        {**QUERIES[0]["targets"][0], "file": "claude-code-transcripts/spotter/short.jsonl"}]}]}
    with pytest.raises(bench.TargetError, match="found in 0 messages"):
        bench.resolve(store, moved)
    gone = {"imports": QSET["imports"], "queries": [{**QUERIES[0], "targets": [
        {**QUERIES[0]["targets"][0], "text": "no fixture holds this sentence at all"}]}]}
    with pytest.raises(bench.TargetError, match="found in 0 messages"):
        bench.resolve(store, gone)


def test_no_query_is_verbatim_in_a_message_it_should_find(imported, targets):
    store = imported[1]
    for q in QUERIES:
        hits = store.search(bench.phrase(q["query"]), SessionFilter(limit=None), limit=None)
        verbatim = {(h["session_id"], h["message_idx"]) for h in hits} & set(targets[q["id"]])
        assert not verbatim, f"{q['id']} {q['query']!r} is written in its target {sorted(verbatim)}"


def test_a_keyword_query_shares_a_word_with_one_of_its_targets(imported, targets):
    """What `style: keyword` claims, checked with today's search (any part of a word, any case)."""
    store = imported[1]
    for q in (q for q in QUERIES if q["style"] == "keyword"):
        words = bench.any_word_query(q["query"]).split(" OR ")
        shared = [w for w in words
                  if {(h["session_id"], h["message_idx"]) for h in store.search(w, SessionFilter(limit=None),
                                                                                limit=None)} & set(targets[q["id"]])]
        assert shared, f"{q['id']} {q['query']!r} shares no word with its targets"


def test_the_text_mode_runs_through_the_cli_and_finds_no_target_verbatim(imported, targets):
    db = imported[0]
    assert bench.availability(bench.MODES)["text"] is None
    for mode, why in bench.availability(bench.MODES).items():  # before and after `--mode` exists: never a crash
        assert why is None or why.startswith("not available"), (mode, why)
    result = bench.measure(db, QSET, targets, "text", bench.K, True)
    assert result.unavailable is None and result.queries == len(QUERIES)
    assert result.message_recall == result.message_mrr == 0.0  # by construction: no query is written in its target
    hits = bench.run_search(db, "OpenTelemetry", "text", 5)
    assert 0 < len(hits) <= 5 and {"session_id", "message_idx"} <= set(hits[0])


def test_the_any_word_baseline_asks_for_the_query_words_joined_by_or():
    assert bench.any_word_query("Nvidia risks ahead of earnings") == "nvidia OR risks OR ahead OR earnings"
    assert bench.any_word_query("the agent gave up on the migration") == "agent OR gave OR migration"
    assert bench.any_word_query("xterm.js scrolling, broken") == "xterm.js OR scrolling OR broken"
    for q in QUERIES:  # every one is a query today's search accepts
        Query.parse(bench.any_word_query(q["query"]))


# ------------------------------------------------------------------ the metric, on hand-made rankings


def test_recall_and_mrr_of_hand_made_rankings():
    rankings = [["a", "b", "c"], ["x", "y"], ["q"]]
    relevant = [{"b"}, {"y", "z"}, {"w"}]
    assert bench.recall_mrr(rankings, relevant) == pytest.approx(((1 + 0.5 + 0) / 3, (1 / 2 + 1 / 2 + 0) / 3))
    assert bench.recall_mrr(rankings, relevant, k=1) == (0.0, 0.0)
    assert bench.recall_mrr([["a"], ["b", "a"]], [{"a"}, {"a"}]) == (1.0, 0.75)
    assert bench.query_scores(["a", "a", "b"], {"b"}) == (1.0, 0.5)  # a repeated item keeps its first place
    eleven = [f"m{i}" for i in range(11)]
    assert bench.query_scores(eleven, {"m10"}) == (0.0, 0.0)  # the 11th is past k = 10
    assert bench.query_scores(eleven, {"m10"}, k=11) == (1.0, 1 / 11)
    assert bench.query_scores([], {"m"}) == (0.0, 0.0)
    with pytest.raises(ValueError):
        bench.query_scores(["a"], set())
    with pytest.raises(ValueError):
        bench.recall_mrr([["a"]], [{"a"}, {"b"}])


def test_hits_rank_messages_and_sessions_at_their_first_place():
    hits = [{"session_id": "s2", "message_idx": 4}, {"session_id": "s2", "message_idx": 4},
            {"session_id": "s1", "message_idx": 0}, {"session_id": "s2", "message_idx": 7}]
    assert bench.message_ranking(hits) == [("s2", 4), ("s1", 0), ("s2", 7)]
    assert bench.session_ranking(hits) == ["s2", "s1"]
    fig = bench.score({"queries": [{"id": "q", "style": "paraphrase"}]}, {"q": [("s1", 0), ("s3", 1)]},
                      {"q": hits})
    assert (fig["session_recall"], fig["session_mrr"]) == (0.5, 0.5)
    assert (fig["message_recall"], fig["message_mrr"]) == (0.5, 0.5)
    assert fig["no_hit"] == 0 and fig["by_style"]["paraphrase"]["queries"] == 1


def test_hybrid_beats_full_text_only_when_above_every_full_text_mode_measured():
    def r(mode, recall, mrr, unavailable=None):
        return bench.ModeResult(mode, unavailable, session_recall=recall, session_mrr=mrr)

    assert bench.beats_full_text({"text": r("text", 0.1, 0.1)}) is None
    assert bench.beats_full_text({"text": r("text", 0.1, 0.1), "hybrid": r("hybrid", 0, 0, "not available")}) is None
    assert bench.beats_full_text({"text": r("text", 0.1, 0.1), "hybrid": r("hybrid", 0.5, 0.4)}) is True
    assert bench.beats_full_text({"text": r("text", 0.1, 0.1), "keywords": r("keywords", 0.6, 0.3),
                                  "hybrid": r("hybrid", 0.5, 0.4)}) is False
    assert bench.beats_full_text({"keywords": r("keywords", 0.5, 0.3), "hybrid": r("hybrid", 0.5, 0.4)}) is False


# Each query: its ranked answer (items may repeat) and its relevant items (at least one).
answered_queries = st.lists(st.tuples(st.lists(st.integers(0, 15), max_size=14),
                                      st.frozensets(st.integers(0, 15), min_size=1, max_size=5)),
                            min_size=1, max_size=8)


@settings(deadline=None)
@given(queries=answered_queries)
def test_mrr_is_a_share_that_is_1_exactly_when_every_first_hit_is_a_target(queries):
    rankings, relevant = [r for r, _ in queries], [rel for _, rel in queries]
    recall, mrr = bench.recall_mrr(rankings, relevant)
    assert 0.0 <= mrr <= 1.0 and 0.0 <= recall <= 1.0
    assert (mrr == 1.0) == all(r and r[0] in rel for r, rel in queries)


@settings(deadline=None)
@given(queries=answered_queries)
def test_recall_and_mrr_never_decrease_with_k(queries):
    rankings, relevant = [r for r, _ in queries], [rel for _, rel in queries]
    figures = [bench.recall_mrr(rankings, relevant, k) for k in range(0, 16)]
    for (r1, m1), (r2, m2) in zip(figures, figures[1:], strict=False):
        assert r1 <= r2 and m1 <= m2
    assert figures[0] == (0.0, 0.0)


def test_the_set_names_only_fixture_files_that_exist():
    for q in QUERIES:
        for t in q["targets"]:
            assert (bench.FIXTURES / t["file"]).is_file(), (q["id"], t["file"])
            assert not re.search(r"\b\d{2}[0-9A-HJKMNP-TV-Z]{24}\b", t["text"]), "a target names no session id"


# ------------------------------------------------------------------ answers kept, and which queries moved since


def test_a_kept_folder_that_already_holds_a_database_is_refused(tmp_path, capsys):
    """`--keep` into a folder with a database would import nothing and embed nothing new: the units cut by the code
    that built it stay, and the figures printed are that code's (how h34search recorded unchanged figures for a
    change that moved them)."""
    small = tmp_path / "set.json"
    small.write_text('{"imports": ["claude-code-transcripts/spotter/short.jsonl"], "queries": []}')
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "quality.db").write_bytes(b"built by other code")
    assert bench.main(["--keep", str(kept), "--queries", str(small), "--modes", "text"]) == 2
    err = capsys.readouterr().err
    assert f"{kept / 'quality.db'} exists" in err and "fresh" in err
    assert (kept / "quality.db").read_bytes() == b"built by other code"


def _record(targets: dict, answers: dict, k: int = 10) -> dict:
    return bench.answers_record(k, targets, {"hybrid": {q: [{"session_id": s, "message_idx": i, "kind": "message",
                                                             "tool_use_id": None, "score": 0.5} for s, i in hits]
                                                        for q, hits in answers.items()}})


def test_a_query_is_listed_as_moved_with_its_ranks_before_and_after():
    targets = {"q1": [("s1", 2)], "q2": [("s2", 5), ("s2", 6)], "q3": [("s3", 0)]}
    old = _record(targets, {"q1": [("s9", 1), ("s1", 7), ("s1", 2)], "q2": [("s2", 5)], "q3": [("s3", 0)]})
    new = _record(targets, {"q1": [("s1", 2)], "q2": [("s8", 0), ("s2", 4)], "q3": [("s3", 0), ("s4", 1)]})
    assert bench.moves(old, new) == [
        ("hybrid", "q1", (2, 3, 1.0, 1.0), (1, 1, 1.0, 1.0)),
        ("hybrid", "q2", (1, 1, 1.0, 0.5), (2, None, 1.0, 0.0))]
    assert bench.moves(old, old) == []
    assert bench.direction((2, 3, 1.0, 1.0), (1, 1, 1.0, 1.0)) == "better"
    assert bench.direction((1, 1, 1.0, 0.5), (2, None, 1.0, 0.0)) == "worse"
    assert bench.direction((1, None, 1.0, 0.0), (2, 4, 1.0, 0.5)) == "mixed"


def test_a_record_written_as_json_compares_as_the_answers_it_was_made_from(tmp_path):
    import json

    targets = {"q1": [("s1", 2)]}
    record = _record(targets, {"q1": [("s1", 2)]})
    (tmp_path / "a.json").write_text(json.dumps(record))
    back = json.loads((tmp_path / "a.json").read_text())
    assert bench.moves(back, record) == [] and bench.moves(back, _record(targets, {"q1": [("s0", 0)]})) == [
        ("hybrid", "q1", (1, 1, 1.0, 1.0), (None, None, 0.0, 0.0))]


place = st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.integers(0, 4))


@settings(deadline=None)
@given(targets=st.lists(place, min_size=1, max_size=3, unique=True), before=st.lists(place, max_size=12),
       after=st.lists(place, max_size=12))
def test_a_query_moves_exactly_when_one_of_its_four_figures_changed(targets, before, after):
    old, new = _record({"q": targets}, {"q": before}), _record({"q": targets}, {"q": after})

    def figures(hits):
        sessions = bench.query_scores(bench.session_ranking(hits), {s for s, _ in targets})
        messages = bench.query_scores(bench.message_ranking(hits), set(targets))
        return sessions + messages

    as_hits = [[{"session_id": s, "message_idx": i} for s, i in h] for h in (before, after)]
    changed = figures(as_hits[0]) != figures(as_hits[1])
    found = bench.moves(old, new)
    assert (found != []) == changed
    for _, _, b, a in found:
        assert [1 / r if r else 0.0 for r in (b[0], b[1])] == [figures(as_hits[0])[1], figures(as_hits[0])[3]]
        assert [1 / r if r else 0.0 for r in (a[0], a[1])] == [figures(as_hits[1])[1], figures(as_hits[1])[3]]
        assert bench.direction(b, a) in ("better", "worse", "mixed")
