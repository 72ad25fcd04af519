"""Scores in the OTLP export (issue 38): a score on a call is a `gen_ai.evaluation.result` event of its span, as the
GenAI conventions place evaluations; notes, labels and scores on a session have no place there and stay out."""
from __future__ import annotations

from contextlib import closing

import orjson
from click.testing import CliRunner
from test_annotations import record_two_sessions

from reasonlog.cli.main import cli
from reasonlog.store import open_store


def attributes(items: list[dict]) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in items}


def test_a_calls_scores_are_evaluation_events_of_its_span(db):
    first, second, _ = record_two_sessions(db)
    with closing(open_store(db)) as store:
        store.annotate(f"{first}#0", scores={"relevance": 0.8, "verdict": "pass"}, by="judge:gpt-5-mini",
                       source="llm")
        store.annotate(f"{first}#0", note="a note has no place in OTLP", labels={"topic": "greeting"})
        store.annotate(first, scores={"task_done": 1}, by="ana")
    result = CliRunner().invoke(cli, ["--db", str(db), "export", "--format", "otlp"])
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in result.stdout_bytes.split(b"\n") if line]
    spans = {line["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"]:
             line["resourceSpans"][0]["scopeSpans"][0]["spans"] for line in lines}
    [scored], [plain] = spans["a"], spans["b"]
    events = [(e["name"], attributes(e["attributes"])) for e in scored["events"]]
    assert events == [
        ("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "relevance", "reasonlog.annotation.source": "llm",
                                      "reasonlog.annotation.by": "judge:gpt-5-mini",
                                      "gen_ai.evaluation.score.value": 0.8}),
        ("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "verdict", "reasonlog.annotation.source": "llm",
                                      "reasonlog.annotation.by": "judge:gpt-5-mini",
                                      "gen_ai.evaluation.score.label": "pass"})]
    assert "events" not in plain
