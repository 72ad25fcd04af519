"""`reasonlog evaluate` (issue 38, docs/review.md "Checks"): a Python check from a file or a module, over sessions
or calls, and an LLM judge through the real OpenAI SDK against a server on 127.0.0.1; scores stored as annotations
that a rerun replaces; the judge's cost said and asked before it spends; bad checks are one-line errors."""
from __future__ import annotations

import copy
import textwrap
from contextlib import closing

import pytest
from click.testing import CliRunner
from sdk_server import load_json
from test_review_queue import record_three

from reasonlog.cli.main import cli
from reasonlog.evaluation import CheckError
from reasonlog.evaluation.judge import number_of
from reasonlog.store import SessionFilter, open_store

CHECK = textwrap.dedent('''
    def task_done(session):
        """1 when the session completed, else 0; nothing to say of the scored one."""
        if session["agent"] == "scored":
            return None
        return 1 if session["status"] == "completed" else 0

    def per_call(call):
        return {"tokens_out": call["output_tokens"] or 0, "kind": "short" if len(call["id"]) < 100 else "long"}

    def broken(session):
        return {"nested": {"no": 1}}
''')
OPENAI_TEXT = load_json("openai-chat", "openai-text.json")


def evaluate(db, *args, input=None, env=None):
    return CliRunner().invoke(cli, ["--db", str(db), "evaluate", *args], input=input, env=env)


def scores(db, source: str) -> dict[str, list[tuple]]:
    """{agent: [(name, value, by)]} of the scores given with `source`."""
    with closing(open_store(db, read_only=True)) as store:
        found = {}
        for s in store.list_sessions(SessionFilter(limit=None)):
            given = [(a["name"], a["value"], a["by"]) for a in store.list_annotations(s["id"])
                     if a["source"] == source and a["kind"] == "score"]
            found[s["agent"]] = sorted(given, key=str)
        return found


def test_a_check_in_a_file_scores_sessions_and_a_rerun_replaces_its_scores(db, tmp_path):
    record_three(db)
    check = tmp_path / "checks.py"
    check.write_text(CHECK)
    result = evaluate(db, f"{check}:task_done", "--sessions", "all")
    assert (result.exit_code, result.output) == (0, "3 sessions: scored 2 sessions; the check said nothing of 1;"
                                                    " failed 0\n")
    by = f"{check}:task_done"
    expected = {"broken": [("task_done", 0.0, by)], "fine": [("task_done", 1.0, by)], "scored": []}
    assert scores(db, "code") == {**expected, "scored": [("task_done", 0.2, "check.py")]}
    assert evaluate(db, f"{check}:task_done").exit_code == 0  # again: replaced, not added
    assert scores(db, "code") == {**expected, "scored": [("task_done", 0.2, "check.py")]}
    only = evaluate(db, f"{check}:task_done", "--name", "completed", "--sessions", "status=failed")
    assert only.output.startswith("1 sessions: scored 1 sessions")
    assert scores(db, "code")["broken"] == [("completed", 0.0, by), ("task_done", 0.0, by)]


def test_a_check_over_calls_and_from_a_module(db, tmp_path, monkeypatch):
    record_three(db)
    (tmp_path / "my_checks.py").write_text(CHECK)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = evaluate(db, "my_checks:per_call", "--calls", "--sessions", "agent=fine", "--json")
    assert result.exit_code == 0, result.output
    with closing(open_store(db, read_only=True)) as store:
        fine = store.list_sessions(SessionFilter(agent="fine"))[0]["id"]
        on_call = [(a["name"], a["value"], a["source"], a["call_id"] is not None) for a in store.list_annotations(fine)]
    assert sorted(on_call, key=str) == [("kind", "short", "code", True), ("tokens_out", 0.0, "code", True)]


def test_bad_checks_and_filters_are_one_line_errors(db, tmp_path):
    record_three(db)
    check = tmp_path / "checks.py"
    check.write_text(CHECK)
    cases = {(str(tmp_path / "nope.py"),): "nope.py: no such file",
             (f"{check}:missing",): "has no function 'missing'",
             ("no_such_module_here:f",): "cannot import no_such_module_here",
             (f"{check}:task_done", "--sessions", "colour=red"): "'colour=red': expected KEY=VALUE",
             (): "give a CHECK"}
    for args, said in cases.items():
        result = evaluate(db, *args)
        assert (result.exit_code, said in result.output, "Traceback" in result.output) == (2, True, False), args
    broken = evaluate(db, f"{check}:broken")
    assert broken.exit_code == 1
    assert "expected a number or a category (text)" in broken.output and "failed 3" in broken.output


def test_the_judge_says_its_cost_asks_and_stores_its_scores(db, server):
    record_three(db)
    said = copy.deepcopy(OPENAI_TEXT)
    said["choices"][0]["message"]["content"] = "Score: 0.25"
    no = evaluate(db, "--judge", "openai", "--base-url", server.url, "--model", "gpt-5-mini", input="n\n")
    assert no.exit_code == 1 and server.requests == []
    assert no.output.startswith("to judge: 3 sessions with openai gpt-5-mini: 3 calls, about ")
    assert "Go on?" in no.output
    for _ in range(3):
        server.reply_json(said)
    yes = evaluate(db, "--judge", "openai", "--base-url", server.url, "--model", "gpt-5-mini", "--name", "task_done",
                   "--yes")
    assert yes.exit_code == 0, yes.output
    assert [r["path"] for r in server.requests] == ["/chat/completions"] * 3
    assert "task of broken" in server.requests[1]["body"]["messages"][0]["content"]
    given = scores(db, "llm")
    assert given == {**{agent: [("task_done", 0.25, "judge:gpt-5-mini")] for agent in ("broken", "fine", "scored")},
                     "summarizer-openai": []}  # the judge's own calls, recorded apart and never judged
    again = evaluate(db, "--judge", "openai", "--base-url", server.url, "--model", "gpt-5-mini", input="n\n")
    assert again.output.startswith("to judge: 3 sessions")


def test_the_judges_number_is_read_from_its_reply():
    replies = ("0.7", "Score: 1", "I'd say 0 here.", "1.0\n", "It is 0.5.")
    assert [number_of(r) for r in replies] == [0.7, 1.0, 0.0, 1.0, 0.5]
    for reply in ("great", "7/10", "2.5"):
        with pytest.raises(CheckError, match="no number between 0 and 1"):
            number_of(reply)
