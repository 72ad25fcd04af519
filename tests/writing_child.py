"""A writer process for the concurrent-writers test: sessions of calls, each followed by a tool result and an outcome.

    python tests/writing_child.py --db X --tag T --sessions S --calls C [--shared] [--sync]

Session k is `T-k` (or `shared-k` with --shared, which every process writes into). Call i of a session
asks a question and gets an answer; its tool result and outcome hold the word `zebrafish` and their own
number, so a search counts them. At the end it prints one JSON line: the recorder's stats.
"""
from __future__ import annotations

import argparse
import json

import reasonlog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--sessions", type=int, required=True)
    p.add_argument("--calls", type=int, required=True)
    p.add_argument("--shared", action="store_true")
    p.add_argument("--sync", action="store_true", help="a synchronous writer: a transaction per record")
    a = p.parse_args()
    rec = reasonlog.Recorder(a.db, writer="sync" if a.sync else "background")
    names = [f"shared-{k}" if a.shared else f"{a.tag}-{k}" for k in range(a.sessions)]
    sessions = [rec.session(id=name, agent=a.tag) for name in names]
    for i in range(a.calls):
        for name, s in zip(names, sessions, strict=True):
            question = f"{a.tag} asks {name} question {i}"
            call_id = s.call(messages=[{"role": "user", "content": question}], response=f"answer {i} to {a.tag}",
                             model="m", usage=reasonlog.Usage(input_tokens=10, output_tokens=2))
            s.tool_result(f"{a.tag}-{name}-t{i}", f"zebrafish result {a.tag} {name} {i}", name="probe",
                          input={"n": i})
            s.outcome("move", {"note": f"zebrafish move {a.tag} {name} {i}"}, call_id=call_id)
    for s in sessions:
        s.end()
    closed = rec.close(timeout=120)
    print(json.dumps({"closed": closed, "stats": rec.stats()}), flush=True)


if __name__ == "__main__":
    main()
