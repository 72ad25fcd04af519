"""The compare page: two sessions side by side, aligned by call position (a replay beside its original, a fork
beside the run it forked from, or any two runs of one agent): where they diverged, and per call both answers.

Each session is read as its row and its calls with their replies (`get_calls`): no timeline and no context, however
long the sessions are."""
from __future__ import annotations

from typing import Any

from ...replay.compare import Answer, compare, totals
from ...store import SessionFilter, StoreReader

END = 1 << 62  # past any call's idx


def compare_sessions(store: StoreReader, a: str, b: str, start: int = 0) -> dict:
    """Both sessions, each position's comparison, the first position that differs, and the totals. `start`: a's
    call at which b begins (a fork made at call #N records its own calls from there on)."""
    first, second = store.session_row(a), store.session_row(b)
    answers_a, answers_b = _answers(store.get_calls(a, (start, END))), _answers(store.get_calls(b, (0, END)))
    rows = [_row(n, answers_a, answers_b) for n in range(max(len(answers_a), len(answers_b)))]
    diverged = next((r["idx"] for r in rows if not r["same"]), None)
    both = [r["comparison"] for r in rows if r["comparison"] is not None]
    return {"a": first, "b": second, "rows": rows, "diverged": diverged, "totals": totals(both) if both else None,
            "start": start}


def _answers(calls: list[dict]) -> list[tuple[dict, Answer]]:
    return [({k: v for k, v in c.items() if k != "response"}, Answer.of_call(c)) for c in calls]


def _row(n: int, answers_a: list, answers_b: list) -> dict[str, Any]:
    a = answers_a[n] if n < len(answers_a) else None
    b = answers_b[n] if n < len(answers_b) else None
    comparison = compare(a[1], b[1]) if a and b else None
    same = a is not None and b is not None and comparison is not None and comparison["same_arguments"] \
        and comparison["same_stop_reason"] and a[1].text == b[1].text and a[1].error == b[1].error
    return {"idx": n, "a": a[0] if a else None, "b": b[0] if b else None, "comparison": comparison,
            "answer_a": a[1].to_dict() if a else None, "answer_b": b[1].to_dict() if b else None, "same": same}


def links_of(store: StoreReader, session_id: str) -> dict:
    """The compare links a session page shows: the session it replays or forks (`reasonlog proxy --until N`
    labels a fork `fork_of`, `fork_at`), and the sessions replaying or forking it."""
    labels = store.session_row(session_id)["labels"] or {}
    forks = store.list_sessions(SessionFilter(labels={"fork_of": session_id}, limit=None))
    return {**store.replay_links(session_id), "fork_of": labels.get("fork_of"), "fork_at": _at(labels),
            "forks": [{"id": f["id"], "at": _at(f["labels"])} for f in reversed(forks)]}


def _at(labels: dict) -> int:
    at = str((labels or {}).get("fork_at", "0"))
    return int(at) if at.isdigit() else 0
