"""A recorder in its own process that records one call per line it reads, for the live-update tests.

    python tests/stepping_child.py DB AGENT

Each line on stdin is the user's message of one more call of one open session (agent AGENT); an empty line ends
the session (completed) and the process. After each call is written it prints `recorded N`.
"""
from __future__ import annotations

import sys

import reasonlog


def main() -> None:
    db, agent = sys.argv[1], sys.argv[2]
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent=agent, run="live") as s:
        history: list[dict] = []
        for n, line in enumerate(sys.stdin, 1):
            text = line.rstrip("\n")
            if not text:
                break
            history.append({"role": "user", "content": text})
            s.call(messages=list(history), response=f"answer {n}", model="gpt-5",
                   usage=reasonlog.Usage(input_tokens=100 * n, output_tokens=10))
            history.append({"role": "assistant", "content": f"answer {n}"})
            print(f"recorded {n}", flush=True)
    rec.close()
    print("ended", flush=True)


if __name__ == "__main__":
    main()
