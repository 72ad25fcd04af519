"""A recorder process writing over HTTP while a test prunes (tests/test_pg_prune.py).

    python tests/pruning_child.py --url http://127.0.0.1:P --tag T --stop FILE

Writes sessions of `CALLS` calls, one after another, until FILE exists, then ends its last session, closes and
prints one JSON line: the ids of the sessions it wrote and its recorder's stats. Each session's messages hold a
marker of its own (`marker(T, i)`), a searchable text old sessions hold too (`carried(i)`), and a whole message
old sessions hold (`reused`), so it reuses contents that a prune running meanwhile may be deleting; its system
prompt is the one every old session has.
"""
from __future__ import annotations

import argparse
import json
import os

import reasonlog

CALLS = 3
SYSTEM = "You are a careful agent that keeps its notes short and names each source it reads."


def marker(tag: str, i: int) -> str:
    return f"newq{tag}{i:04d}zx"


def carried(i: int) -> str:
    return f"carried text number {i % 20} of the long archive"


def reused(j: int) -> str:
    """A note old sessions 2j and 2j + 1 hold, and live session i sends as note i % 120: a content a prune may be
    deleting while a live writer names it."""
    return f"a note the archive holds too, number {j}"


def request(tag: str, i: int, call: int) -> list[dict]:
    """The messages call `call` of session `i` sends."""
    history = [{"role": "user", "content": reused(i % 120)},
               {"role": "user", "content": f"{marker(tag, i)} {carried(i)}"}]
    for c in range(call):
        history += [{"role": "assistant", "content": f"answer {c} to {marker(tag, i)}"},
                    {"role": "user", "content": f"go on {c}"}]
    return history


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--stop", required=True)
    a = p.parse_args()
    rec = reasonlog.Recorder(a.url)
    ids, i = [], 0
    while not os.path.exists(a.stop):
        s = rec.session(agent=f"writer-{a.tag}", run="live", model="claude-sonnet-4-5")
        for call in range(CALLS):
            s.call(system=SYSTEM, messages=request(a.tag, i, call),
                   response={"role": "assistant", "content": f"answer {call} to {marker(a.tag, i)}"})
        s.end()
        ids.append(s.id)
        i += 1
    closed = rec.close(timeout=60)
    print(json.dumps({"ids": ids, "closed": closed, "stats": rec.stats()}), flush=True)


if __name__ == "__main__":
    main()
