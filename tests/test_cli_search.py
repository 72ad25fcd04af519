"""`reasonlog search` in text mode: `--json` prints the first `--limit` hits of the whole answer (read no further
than them), and the form printed for a person still counts every match."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reasonlog
from reasonlog.cli.main import cli


def _sessions(db: Path, counts: list[int]) -> None:
    """A session for each count, its user saying `needle` in that many of its turns (and once more without it)."""
    rec = reasonlog.Recorder(db, writer="sync", strict=True)
    for n, count in enumerate(counts):
        with rec.session(agent="a") as s:
            for turn in range(count + 1):
                said = f"turn {turn} of session {n}" + (", with the needle" if turn < count else "")
                s.call(messages=[{"role": "user", "content": said}], response="noted")
    rec.close()


def _search(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", str(db), "search", "needle", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.integers(0, 4), min_size=1, max_size=4), limit=st.integers(1, 12))
def test_a_json_search_prints_the_first_hits_of_the_whole_answer(tmp_path_factory, counts, limit):
    db = tmp_path_factory.mktemp("search") / "s.db"
    _sessions(db, counts)
    every = json.loads(_search(db, "--json", "--limit", "0"))
    assert len(every) == sum(counts)
    assert json.loads(_search(db, "--json", "--limit", str(limit))) == every[:limit]


def test_the_printed_form_counts_every_match_beyond_the_limit(tmp_path):
    _sessions(tmp_path / "s.db", [3, 2])
    printed = _search(tmp_path / "s.db", "--limit", "2").splitlines()
    assert printed[-1] == "5 matches; showing the first 2 (--limit 0 shows all)"
    assert len(json.loads(_search(tmp_path / "s.db", "--json", "--limit", "2"))) == 2
