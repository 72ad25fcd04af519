"""Issue 25 item 2: a tool call's line says what it did (the command, the file, the pattern, the URL), the first lines
of its result, how long it ran and whether it failed, before anyone opens it."""
from __future__ import annotations

import html as html_lib
import re

import pytest
from conftest import FIXTURES
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.io.importing import plan, run_import
from reasonlog.server.app import create_app
from reasonlog.server.dashboard.tools import SHOWN, argument_of, tool_line
from reasonlog.store import open_store

SPOTTER = FIXTURES / "claude-code-transcripts" / "spotter"


@pytest.mark.parametrize(("name", "given", "shown"), [
    ("Bash", {"command": "tail -5 out.log", "description": "Check the log"}, "tail -5 out.log"),
    ("Read", {"file_path": "/src/app.js", "limit": 40}, "/src/app.js"),
    ("Edit", {"file_path": "/src/a.py", "old_string": "x", "new_string": "y"}, "/src/a.py"),
    ("Write", {"content": "print(1)", "file_path": "/src/b.py"}, "/src/b.py"),
    ("Grep", {"pattern": "def main", "path": "src"}, "def main in src"),
    ("Glob", {"pattern": "assets/js/**/*.js"}, "assets/js/**/*.js"),
    ("WebFetch", {"url": "https://example.org/a", "prompt": "What does it say?"}, "https://example.org/a"),
    ("WebSearch", {"query": "xterm.js scroll"}, "xterm.js scroll"),
    ("shell", {"command": ["bash", "-lc", "ls -la src"], "timeout_ms": 1000}, "bash -lc 'ls -la src'"),
    ("get_weather", {"units": 3, "city": "Paris"}, "Paris"),                       # an OpenAI function
    ("mcp__github__create_issue", {"repo": "a/b", "title": "Crash"}, "a/b"),       # an MCP tool
    ("mcp__db__query", {"sql": "select 1", "query": "q1"}, "q1"),                  # a generic name wins
    ("count", {"n": 3}, '{"n":3}'),
    ("noargs", {}, ""),
    ("raw", "some text", "some text"),
])
def test_the_argument_a_person_needs(name, given, shown):
    assert argument_of(name, given) == shown


@pytest.mark.parametrize(("result", "failed"), [
    ({"content": "Exit code 1\nboom", "is_error": False, "duration_ms": None}, True),
    ({"content": "Exit code: 2\nno such file", "is_error": None, "duration_ms": None}, True),
    ({"content": "Exit code 0\nfine", "is_error": False, "duration_ms": None}, False),
    ({"content": '{"output": "x", "metadata": {"exit_code": 127}}', "is_error": False, "duration_ms": None}, True),
    ({"content": "anything", "is_error": True, "duration_ms": None}, True),
    ({"content": "the exit code 1 was fine", "is_error": False, "duration_ms": None}, False),
    (None, False),
])
def test_a_failure_is_said_by_is_error_or_an_exit_code(result, failed):
    assert tool_line("Bash", {"command": "x"}, result).failed is failed


def test_a_codex_shell_result_shows_its_output_exit_code_and_duration():
    content = '{"output":"1 failed\\nsee above","metadata":{"exit_code":1,"duration_seconds":2.1}}'
    line = tool_line("shell", {"command": ["bash", "-lc", "cargo test"]}, {"content": content, "is_error": False,
                                                                         "duration_ms": None})
    assert (line.argument, line.head, line.failed, line.took) == ("bash -lc 'cargo test'", "1 failed\nsee above",
                                                                  True, "2.1 s")


def test_the_result_shows_its_first_three_lines_and_its_duration():
    line = tool_line("Bash", {"command": "seq 5"}, {"content": "1\n2\n3\n4\n5\n", "is_error": False,
                                                    "duration_ms": 1500.0})
    assert (line.head, line.more, line.took) == ("1\n2\n3", True, "1.5 s")
    assert tool_line("Bash", {"command": "x"}, {"content": "ok", "duration_ms": 42.4}).took == "42 ms"


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.none(), st.text(max_size=30)),
       given_=st.one_of(st.none(), st.text(), st.dictionaries(st.text(max_size=12), st.recursive(
           st.one_of(st.none(), st.booleans(), st.integers(), st.text()),
           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
           max_leaves=8), max_size=5)),
       content=st.text())
def test_every_tool_call_gets_one_short_line(name, given_, content):
    line = tool_line(name, given_, {"content": content, "is_error": False, "duration_ms": None})
    assert "\n" not in line.argument and "\r" not in line.argument.replace("\r", "")
    assert len(line.argument) <= SHOWN
    assert line.head.count("\n") <= 2


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    db = tmp_path_factory.mktemp("tools") / "t.db"
    store = open_store(db)
    run_import(store, plan([SPOTTER / "tool_heavy.jsonl"]))
    store.close()
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="runner") as s:
        s.call(messages=[{"role": "user", "content": "build it"}], model="gpt-5",
               response={"role": "assistant", "content": [
                   {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make all"}}]})
        s.tool_result("t1", "Exit code 2\nmake: *** No rule to make target 'all'.", name="Bash", is_error=True,
                      duration_ms=1530.0)
    rec.close()
    return TestClient(create_app(lambda: open_store(db))), s.id, db


def summaries_of(html: str) -> list[str]:
    found = re.findall(r'<details class="tool[^"]*">\s*<summary>(.*?)</summary>', html, re.S)
    return [html_lib.unescape(re.sub(r"<[^>]+>", "", m)) for m in found]


def test_a_claude_code_session_shows_each_command_path_pattern_and_url_inline(served):
    client, _, _ = served
    page = client.get("/sessions/d6e0bada-1959-4eec-a9d2-0bfade768d8f")
    lines = [" ".join(s.split()) for s in summaries_of(page.text)]
    assert lines[0] == ("Bash mix phx.server Command running in background with ID: bae407b. Output is being "
                        "written to: /tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output")
    assert lines[1].startswith("Bash tail -5 /tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output "
                               "Serializer: Phoenix.Socket.V2.JSONSerializer")
    assert [line.split(" ", 2)[:2] for line in lines[2:6]] == [
        ["WebSearch", "xterm.js"], ["Glob", "assets/js/**/*.js"],
        ["Read", "/home/marco/projects/spotter/assets/js/app.js"],
        ["WebFetch", "https://github.com/xtermjs/xterm.js/issues/1343"]]


def test_a_failed_command_says_failed_its_duration_and_its_first_lines(served):
    client, sid, _ = served
    (line,) = [" ".join(s.split()) for s in summaries_of(client.get(f"/sessions/{sid}").text)]
    assert line == "Bash make all 1.5 s failed Exit code 2 make: *** No rule to make target 'all'."


def test_the_exported_file_shows_the_same_lines(served):
    from reasonlog.server.dashboard.export import session_html

    _, sid, db = served
    html = session_html(open_store(db, read_only=True), sid)
    assert [" ".join(s.split()) for s in summaries_of(html)] == [
        "Bash make all 1.5 s failed Exit code 2 make: *** No rule to make target 'all'."]
