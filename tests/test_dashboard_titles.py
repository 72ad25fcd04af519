"""Issue 25 item 3: a session is listed by its title (the agent's own, else its first prompt shortened), with its
agent, model, project, duration, calls, tokens and cost on one line; `reasonlog sessions` shows the title too."""
from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

import reasonlog
from reasonlog.cli.main import cli
from reasonlog.io.importing import plan, run_import
from reasonlog.server.app import create_app
from reasonlog.server.dashboard.pages import project_of
from reasonlog.store import open_store
from reasonlog.titles import LENGTH, prompt_text, shorten, title_of

CLAUDE = Path(__file__).resolve().parent / "fixtures" / "claude_code"
SID = "7c1e0a52-93b4-4f1d-9e8a-2b6c0d4e5f61"


def test_the_agents_title_wins_over_the_first_prompt():
    session = {"labels": {"title": "EU  checkout\nbug"}}
    assert title_of(session, {"role": "user", "content": "Why does checkout fail?"}) == "EU checkout bug"
    assert title_of({"labels": {}}, {"role": "user", "content": "Why does checkout fail?"}) == \
        "Why does checkout fail?"
    assert title_of({"labels": {}}, None) == ""


def test_a_long_prompt_is_cut_at_a_word_and_a_slash_command_reads_as_typed():
    prompt = "Work on bead spotter-4te. Run bd show spotter-4te to see the issue details and bd ready to find more."
    assert shorten(prompt) == "Work on bead spotter-4te. Run bd show spotter-4te to see the issue details and…"
    command = ("<command-message>beads:create</command-message>\n<command-name>/beads:create</command-name>\n"
               "<command-args>set up credo</command-args>")
    assert prompt_text({"role": "user", "content": command}) == "/beads:create set up credo"
    reminded = [{"type": "text", "text": "<system-reminder>be brief</system-reminder>fix the VAT bug"}]
    assert prompt_text({"role": "user", "content": reminded}) == "fix the VAT bug"


@given(st.text())
def test_a_title_is_one_line_of_at_most_80_characters(text):
    title = shorten(text)
    assert len(title) <= LENGTH and "\n" not in title and title == title.strip()


def test_each_sessions_first_prompt_is_read_on_both_databases(db):
    store = open_store(db)
    run_import(store, plan([CLAUDE / "current", CLAUDE / "nested"]))
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="silent") as silent:
        silent.call(messages=[{"role": "system", "content": "be brief"}], response={"role": "assistant",
                                                                                  "content": "ok"})
    rec.close()
    ids = [SID, "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a", silent.id, "no-such-session"]
    prompts = store.first_prompts(ids)
    assert {sid: prompt_text(p) for sid, p in prompts.items()} == {
        SID: "Why does checkout fail for EU users?", "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a":
        "Level 0: dig one level deeper"}  # a session without a user message has none
    assert store.first_prompts([]) == {}
    store.close()


@pytest.fixture(scope="module")
def site_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("titles") / "t.db"
    store = open_store(db)
    run_import(store, plan([CLAUDE / "current", CLAUDE / "nested"]))
    store.close()
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="writer", model="gpt-5", labels={"cwd": "/srv/apps/poems/"}) as s:
        s.call(messages=[{"role": "user", "content": "Write a poem about the sea,\nin four lines"}],
               response={"role": "assistant", "content": "Waves"}, model="gpt-5")
    rec.close()
    return db


def rows_of(page: str) -> dict[str, list[tuple[str, str]]]:
    """Each session row's cells as (text, title attribute), by the session id its link names."""
    out = {}
    for row in re.findall(r"<tr class=\"[^\"]*\"[^>]*>(.*?)</tr>", page, re.S):  # (a live page's rows say their id)
        sid = re.search(r'href="/sessions/([^"]+)"', row).group(1)
        cells = re.findall(r"<td[^>]*?(?: title=\"([^\"]*)\")?[^>]*>(.*?)</td>", row, re.S)
        out[sid] = [(html_lib.unescape(re.sub(r"<[^>]+>", "", text)).strip(), html_lib.unescape(title))
                    for title, text in cells]
    return out


def test_the_sessions_page_shows_titles_projects_and_one_line_of_figures(site_db):
    rows = rows_of(TestClient(create_app(lambda: open_store(site_db))).get("/").text)
    texts = {sid: [t for t, _ in cells] for sid, cells in rows.items()}
    assert texts[SID][1:5] == ["EU checkout bug", "claude-code", "claude-opus-4-6", "shop"]
    assert rows[SID][4] == ("shop", "/home/USER/projects/shop")
    assert texts["9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a"][1] == "Level 0: dig one level deeper"
    poem = next(sid for sid, t in texts.items() if t[2] == "writer")
    assert texts[poem][1:] == ["Write a poem about the sea, in four lines", "writer", "gpt-5", "poems", "completed",
                               "1", "0", "—", texts[poem][9], "0"]


def test_the_session_page_is_headed_by_its_title(site_db):
    page = TestClient(create_app(lambda: open_store(site_db))).get(f"/sessions/{SID}").text
    assert re.search(r'<h1 class="session-title">EU checkout bug <span', page)
    assert "<title>EU checkout bug · " in page


def test_reasonlog_sessions_lists_the_titles(site_db):
    out = CliRunner().invoke(cli, ["--db", str(site_db), "sessions", "--limit", "0"], env={"COLUMNS": "250"}).output
    lines = {line.split()[2]: line for line in out.splitlines()[2:] if len(line.split()) > 2}
    assert "EU checkout bug" in lines[SID]
    assert "Level 0: dig one level deeper" in lines["9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a"]


@pytest.mark.parametrize(("labels", "run", "shown"), [
    ({"cwd": "/home/me/projects/shop/"}, "r", {"short": "shop", "full": "/home/me/projects/shop/"}),
    ({"cwd": "C:\\Users\\me\\shop"}, None, {"short": "shop", "full": "C:\\Users\\me\\shop"}),
    ({"cwd": "/"}, "job-7", {"short": "job-7", "full": "job-7"}),
    ({}, None, {"short": "", "full": ""}),
])
def test_the_project_is_the_working_directorys_last_folder_else_the_run(labels, run, shown):
    assert project_of({"labels": labels, "run": run}) == shown
