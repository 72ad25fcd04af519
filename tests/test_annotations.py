"""Annotations and scores (issue 38, docs/review.md): notes, labels and named scores on a session, an exchange or a
call; filtered on; shown by `get_session`; carried by the JSONL export (version 4) on both dialects."""
from __future__ import annotations

import html
import io
import json
import re
from contextlib import closing

import hypothesis
import hypothesis.strategies as st
import pytest
from click.testing import CliRunner
from conftest import fresh_database
from fastapi.testclient import TestClient
from test_dashboard import HOSTILE, assert_inert

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.server.app import create_app, serve_app
from reasonlog.store import Invalid, NotFound, SessionFilter, open_store
from reasonlog.store.annotation import ScoreTest


def record_two_sessions(target) -> tuple[str, str, str]:
    """Two sessions of one call each, the first in an exchange; (first, second, the first's exchange id)."""
    rec = reasonlog.Recorder(target, writer="sync", strict=True)
    with rec.session(agent="a", run="r") as s:
        with s.exchange("task one") as ex:
            ex.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "yo"},
                    model="gpt-5")
            exchange_id = ex.id
        first = s.id
    with rec.session(agent="b", run="r") as s:
        s.call(messages=[{"role": "user", "content": "2"}], response={"role": "assistant", "content": "3"},
               model="gpt-5")
        second = s.id
    rec.close()
    return first, second, exchange_id


@pytest.fixture
def recorded(db):
    first, second, exchange_id = record_two_sessions(db)
    store = open_store(db)
    yield store, first, second, exchange_id
    store.close()


def test_a_session_a_call_and_an_exchange_take_notes_labels_and_scores(recorded):
    store, first, second, exchange_id = recorded
    added = store.annotate(first, note="looks right", labels={"reviewed": "yes"},
                           scores={"task_done": 0.25, "verdict": "fail"}, by="ana", source="human")
    assert [(a["kind"], a["name"], a["value"], a["by"], a["source"]) for a in added] == [
        ("note", None, "looks right", "ana", "human"), ("label", "reviewed", "yes", "ana", "human"),
        ("score", "task_done", 0.25, "ana", "human"), ("score", "verdict", "fail", "ana", "human")]
    assert {(a["session_id"], a["exchange_id"], a["call_id"]) for a in added} == {(first, None, None)}
    (on_call,) = store.annotate(f"{first}#0", scores={"tool_ok": 1}, by="check_tools", source="code")
    call_id = store.resolve_id("call", f"{first}#0")
    assert (on_call["session_id"], on_call["exchange_id"], on_call["call_id"], on_call["value"]) == (
        first, exchange_id, call_id, 1.0)
    (on_exchange,) = store.annotate(exchange_id, note="slow", source="llm", by="judge-gpt")
    assert (on_exchange["exchange_id"], on_exchange["call_id"]) == (exchange_id, None)
    session = store.get_session(first)
    assert [a["id"] for a in session["annotations"]] == [a["id"] for a in [*added, on_call, on_exchange]]
    assert [a["kind"] for a in store.list_annotations(f"{first}#0")] == ["score"]
    assert [(a["kind"], a["value"]) for a in store.list_annotations(exchange_id)] == [("score", 1.0), ("note", "slow")]
    assert store.get_session(second)["annotations"] == []


def test_sessions_are_found_by_score_and_by_note(recorded):
    store, first, second, _ = recorded
    store.annotate(first, scores={"task_done": 0.25})
    store.annotate(second, scores={"task_done": 0.75, "verdict": "pass"})
    store.annotate(f"{second}#0", note="the call repeated itself")

    def found(*tests: str, has_note: bool = False) -> set[str]:
        flt = SessionFilter(scores=tuple(ScoreTest.parse(t) for t in tests), has_note=has_note, limit=None)
        assert store.count_sessions(flt) == len(store.list_sessions(flt))
        return {s["id"] for s in store.list_sessions(flt)}

    assert found("task_done<0.5") == {first}
    assert found("task_done>=0.25") == {first, second}
    assert found("task_done<0.25") == set()
    assert found("verdict=pass") == {second}
    assert found("verdict!=pass") == set()
    assert found("task_done>0.5", "verdict=pass") == {second}
    assert found(has_note=True) == {second}
    assert found("nothing=1") == set()


def test_what_cannot_be_an_annotation_is_refused_by_name(recorded):
    store, first, _, _ = recorded
    with pytest.raises(Invalid, match="nothing to add"):
        store.annotate(first)
    with pytest.raises(Invalid, match="source: expected one of human, code, llm, got 'robot'"):
        store.annotate(first, note="x", source="robot")
    with pytest.raises(Invalid, match="score task_done: nan is not a finite number"):
        store.annotate(first, scores={"task_done": float("nan")})
    with pytest.raises(Invalid, match="score ok: expected a number or a category"):
        store.annotate(first, scores={"ok": True})
    with pytest.raises(NotFound, match="no session, exchange or call matches 'zzz'"):
        store.annotate("zzz", note="x")
    with pytest.raises(Invalid, match=r"< compares numbers, and 'high' is none"):
        ScoreTest.parse("task_done<high")
    assert store.list_annotations(first) == []


@hypothesis.given(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32),
                            st.integers(-10**6, 10**6)),
                  st.floats(allow_nan=False, allow_infinity=False, width=32))
@hypothesis.settings(max_examples=25, deadline=None)
@pytest.mark.slow  # a database per example; the named cases above are the quick run's
def test_a_numeric_score_is_found_exactly_when_its_test_holds(tmp_path_factory, score, bound):
    with fresh_database("sqlite", tmp_path_factory.mktemp("h")) as db:
        first, _, _ = record_two_sessions(db)
        with closing(open_store(db)) as store:
            store.annotate(first, scores={"s": score})
            for op, holds in (("<", score < bound), ("<=", score <= bound), (">", score > bound),
                              (">=", score >= bound)):
                flt = SessionFilter(scores=(ScoreTest.parse(f"s{op}{bound!r}"),), limit=None)
                assert [s["id"] for s in store.list_sessions(flt)] == ([first] if holds else []), (op, bound)


def copy_folder(tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    return folder


def export_text(store) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in store.export_records())


def test_annotations_travel_in_the_export_and_back(recorded, tmp_path, dialect):
    store, first, _, exchange_id = recorded
    store.annotate(first, note="<b>kept</b>", labels={"k": "v"}, scores={"task_done": 0.5, "verdict": "pass"},
                   by="ana")
    store.annotate(f"{first}#0", scores={"tool_ok": 0}, source="code")
    text = export_text(store)
    header = json.loads(text.splitlines()[0])
    assert header == {"type": "reasonlog", "version": 4}
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["type"] for r in records].count("annotation") == 5
    assert records[-1]["counts"]["annotation"] == 5
    with fresh_database(dialect, copy_folder(tmp_path)) as other, closing(open_store(other)) as copy:
        copy.import_records(json.loads(line) for line in io.StringIO(text))
        assert copy.list_annotations(first) == store.list_annotations(first)
        assert export_text(copy) == text
        copy.import_records(json.loads(line) for line in io.StringIO(text))  # again: nothing added
        assert len(copy.list_annotations(first)) == 5


def test_a_version_3_export_still_imports(recorded, tmp_path, dialect):
    store, first, _, _ = recorded
    records = [json.loads(line) for line in export_text(store).splitlines()]
    old = [{**r, "version": 3} if r["type"] == "reasonlog" else r for r in records]
    old[-1] = {**old[-1], "counts": {k: v for k, v in old[-1]["counts"].items() if k != "annotation"}}
    with fresh_database(dialect, copy_folder(tmp_path)) as other, closing(open_store(other)) as copy:
        result = copy.import_records(old)
        assert (result["sessions"], copy.get_session(first)["annotations"]) == (2, [])


def test_an_annotation_in_a_version_3_export_is_refused_by_its_line(recorded, tmp_path, dialect):
    store, first, _, _ = recorded
    store.annotate(first, note="n")
    records = [json.loads(line) for line in export_text(store).splitlines()]
    records[0]["version"] = 3
    with fresh_database(dialect, copy_folder(tmp_path)) as other, closing(open_store(other)) as copy:
        with pytest.raises(Invalid, match="annotation record in a version 3 export"):
            copy.import_records(records)


# ------------------------------------------------------------------------------------ the CLI


def run_cli(db, *args, code=0):
    result = CliRunner().invoke(cli, ["--db", str(db), *args], env={"COLUMNS": "200"}, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def test_the_cli_annotates_and_filters_sessions(db):
    first, second, _ = record_two_sessions(db)
    added = json.loads(run_cli(db, "annotate", first, "--note", "wrong ticker", "--label", "team=ml", "--score",
                               "task_done=0.3", "--score", "verdict=fail", "--by", "ana", "--json"))
    assert [(a["kind"], a["name"], a["value"], a["by"], a["source"]) for a in added] == [
        ("note", None, "wrong ticker", "ana", "human"), ("label", "team", "ml", "ana", "human"),
        ("score", "task_done", 0.3, "ana", "human"), ("score", "verdict", "fail", "ana", "human")]
    assert run_cli(db, "annotate", f"{second}#0", "--score", "task_done=0.9", "--source", "code",
                   "--by", "check_done").startswith("added 1 to ")
    listed = json.loads(run_cli(db, "sessions", "--score", "task_done<0.5", "--json"))
    assert [s["id"] for s in listed] == [first]
    assert [s["id"] for s in json.loads(run_cli(db, "sessions", "--score", "task_done>=0.3", "--json"))] == [
        second, first]
    assert [s["id"] for s in json.loads(run_cli(db, "sessions", "--has-note", "--json"))] == [first]
    shown = json.loads(run_cli(db, "show", first, "--json"))["session"]["annotations"]
    assert [a["value"] for a in shown] == ["wrong ticker", "ml", 0.3, "fail"]
    text = run_cli(db, "show", first)
    assert "note on session: wrong ticker  by ana (human)" in text
    assert "score on session: task_done=0.3  by ana (human)" in text
    assert "score on call" in run_cli(db, "show", f"{second}#0")


def test_the_cli_names_what_it_cannot_use(db):
    first, _, _ = record_two_sessions(db)
    out = run_cli(db, "annotate", first, "--score", "task_done", code=2)
    assert "'task_done': expected NAME=VALUE" in out
    out = run_cli(db, "sessions", "--score", "task_done<high", code=2)
    assert "< compares numbers, and 'high' is none" in out
    out = run_cli(db, "annotate", first, code=1)
    assert "nothing to add: give a note, a label or a score" in out and "Traceback" not in out
    out = run_cli(db, "annotate", "nosuchthing", "--note", "x", code=1)
    assert "no session, exchange or call matches 'nosuchthing'" in out


# ------------------------------------------------------------------------------------ the REST API


@pytest.fixture
def api(db):
    first, second, exchange_id = record_two_sessions(db)
    with closing(open_store(db)) as store:
        read, write = store.create_api_key("read")["secret"], store.create_api_key("write")["secret"]
    client = TestClient(serve_app(db))
    yield client, {"read": {"Authorization": f"Bearer {read}"}, "write": {"Authorization": f"Bearer {write}"}}, \
        first, second, exchange_id
    client.close()


def test_the_api_adds_lists_filters_and_shows_annotations(api):
    client, keys, first, second, exchange_id = api
    r = client.post("/v1/annotations", headers=keys["write"], json={
        "target": first, "note": "<script>alert(1)</script>", "scores": {"task_done": 0.2, "verdict": "fail"},
        "labels": {"team": "ml"}, "by": "judge-1", "source": "llm"})
    assert r.status_code == 201, r.text
    added = r.json()["annotations"]
    assert [(a["kind"], a["name"], a["value"], a["by"], a["source"]) for a in added] == [
        ("note", None, "<script>alert(1)</script>", "judge-1", "llm"), ("label", "team", "ml", "judge-1", "llm"),
        ("score", "task_done", 0.2, "judge-1", "llm"), ("score", "verdict", "fail", "judge-1", "llm")]
    r = client.post("/v1/annotations", headers=keys["write"], json={"target": f"{second}#0",
                                                                    "scores": {"task_done": 0.8}})
    assert (r.status_code, r.json()["annotations"][0]["source"]) == (201, "human")
    listed = client.get("/v1/annotations", params={"target": first}, headers=keys["read"]).json()["annotations"]
    assert listed == added
    found = client.get("/v1/sessions", params={"score": "task_done<0.5"}, headers=keys["read"]).json()
    assert [s["id"] for s in found["sessions"]] == [first]
    found = client.get("/v1/sessions", params={"has_note": "true"}, headers=keys["read"]).json()
    assert [s["id"] for s in found["sessions"]] == [first]
    found = client.get("/v1/sessions", params={"score": ["task_done>0.1", "verdict=fail"]},
                       headers=keys["read"]).json()
    assert [s["id"] for s in found["sessions"]] == [first]
    page = client.get(f"/v1/sessions/{second}", headers=keys["read"]).json()
    assert [(a["call_id"] is not None, a["value"]) for a in page["annotations"]] == [(True, 0.8)]


def test_the_api_needs_the_write_scope_and_names_what_is_wrong(api):
    client, keys, first, _, _ = api
    assert client.post("/v1/annotations", headers=keys["read"], json={"target": first, "note": "n"}).status_code \
        == 403
    assert client.get("/v1/annotations", params={"target": first}).status_code == 401
    r = client.post("/v1/annotations", headers=keys["write"], json={"target": "nosuch", "note": "n"})
    assert (r.status_code, r.json()["detail"]) == (404, "no session, exchange or call matches 'nosuch'")
    r = client.post("/v1/annotations", headers=keys["write"], json={"target": first})
    assert (r.status_code, r.json()["detail"]) == (400, "nothing to add: give a note, a label or a score")
    r = client.post("/v1/annotations", headers=keys["write"], json={"target": first, "source": "robot", "note": "n"})
    assert r.status_code == 422
    r = client.get("/v1/sessions", params={"score": "task_done<x"}, headers=keys["read"])
    assert (r.status_code, r.json()["detail"]) == (
        400, "score: 'task_done<x': < compares numbers, and 'x' is none")
    assert client.get("/v1/annotations", params={"target": first}, headers=keys["read"]).json() == {
        "annotations": []}


# ------------------------------------------------------------------------------------ the dashboard


def test_the_dashboard_shows_hostile_annotations_as_text(db):
    first, _, _ = record_two_sessions(db)
    with closing(open_store(db)) as store:
        for text in HOSTILE:
            store.annotate(first, note=text, by=text)
        store.annotate(f"{first}#0", labels={"<b>k</b>": HOSTILE[1]}, scores={"verdict": HOSTILE[0]})
        call_id = store.resolve_id("call", f"{first}#0")
    client = TestClient(create_app(lambda: open_store(db)))
    page = client.get(f"/sessions/{first}").text
    assert_inert(page)
    notes = page.split('id="annotations"')[1].split("</section>")[0]
    assert [html.unescape(t) for t in re.findall(r'<span class="text">(.*?)</span>', notes)] == HOSTILE
    assert "verdict</strong> = &lt;script&gt;window.__xss = 1&lt;/script&gt;" in notes
    call_page = client.get(f"/calls/{call_id}").text
    assert_inert(call_page)
    notes = call_page.split('id="annotations"')[1].split("</section>")[0]
    assert notes.count('<li class="annotation') == 2
    assert "&lt;b&gt;k&lt;/b&gt;</strong> = &lt;img src=x onerror=" in notes


def test_reasonlog_annotate_writes_to_the_database_it_is_given(db):
    first, _, _ = record_two_sessions(db)
    (added,) = reasonlog.annotate(f"{first}#0", db=str(db), scores={"latency_ok": "yes"}, by="ci", source="code")
    assert (added["kind"], added["name"], added["value"], added["by"], added["source"]) == (
        "score", "latency_ok", "yes", "ci", "code")
    with closing(open_store(db)) as store:
        assert store.list_annotations(first) == [added]


def test_deleting_a_session_deletes_its_annotations_only(recorded):
    store, first, second, _ = recorded
    store.annotate(first, note="gone with it")
    store.annotate(f"{first}#0", scores={"s": 1})
    (kept,) = store.annotate(second, note="stays")
    assert store.delete_sessions([first]) == 1
    assert store.list_annotations() == [kept]
    assert store.count_sessions(SessionFilter(has_note=True)) == 1


def test_a_real_version_3_export_imports_and_exports_again_as_version_4(tmp_path):
    """tests/fixtures/import_source_v3.jsonl is what reasonlog wrote before annotations (the demo, two agents);
    import_source.jsonl is the same store exported by this reasonlog."""
    from pathlib import Path

    from reasonlog.io import jsonl

    fixtures = Path(__file__).parent / "fixtures"
    with closing(open_store(tmp_path / "v3.db")) as store:
        done = jsonl.import_file(store, "v3.jsonl", io.BytesIO((fixtures / "import_source_v3.jsonl").read_bytes()))
        assert done == {"records": 22, "sessions": 2, "sessions_skipped": 0, "warnings": []}
        assert b"".join(jsonl.dump_lines(store)) == (fixtures / "import_source.jsonl").read_bytes()


def test_the_dashboard_lists_sessions_by_score_and_note(db):
    first, second, _ = record_two_sessions(db)
    with closing(open_store(db)) as store:
        store.annotate(first, scores={"task_done": 0.2})
        store.annotate(f"{second}#0", note="look here", scores={"task_done": 0.9})
    client = TestClient(create_app(lambda: open_store(db)))

    def listed(**params) -> list[str]:
        page = client.get("/", params=params)
        assert page.status_code == 200, page.text
        return [sid for sid in (first, second) if f'href="/sessions/{sid}"' in page.text]

    assert listed(score="task_done<0.5") == [first]
    assert listed(has_note="1") == [second]
    assert listed(score="task_done>0.1") == [first, second]
    bad = client.get("/", params={"score": "task_done<x"})
    assert bad.status_code == 400 and "&lt; compares numbers, and &#39;x&#39; is none" in bad.text
