"""The fork scenarios of tests/test_nothing_lost.py, in an interpreter of their own.

    python tests/forking_child.py ids METHOD          # 6 children by fork, forkserver or spawn
    python tests/forking_child.py by-hand             # os.fork by hand and forks of forks
    python tests/forking_child.py pool DB WORKERS CALLS

Forking the test runner itself copies whatever its other threads hold (a full run of the suite has hundreds left
by earlier tests), and a child can wait forever on a lock no thread of its own will release. A recorder forked in
an agent's process meets the same only if the agent's own threads hold locks; what these scenarios test is
reasonlog's part. Each prints one JSON line: the ids made, or the pool's outcome.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

IDS_PER_CHILD = 2_000


def _ids_at(start_ns: int, out) -> None:
    """Wait for `start_ns`, then make ids as fast as possible: every child does so in the same milliseconds."""
    from reasonlog.model import new_id

    while time.time_ns() < start_ns:
        pass
    out.put([new_id() for _ in range(IDS_PER_CHILD)])


def _fork_of_a_fork(start_ns: int, out) -> None:
    inner = multiprocessing.get_context("fork").Process(target=_ids_at, args=(start_ns, out))
    inner.start()
    _ids_at(start_ns, out)
    inner.join()


def ids(method: str) -> list[str]:
    from reasonlog.model import new_id

    new_id()  # the parent has drawn its random part before forking, as a recorder made before a pool would
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    start = time.time_ns() + 1_500_000_000  # spawned children need time to import
    children = [ctx.Process(target=_ids_at, args=(start, out)) for _ in range(6)]
    for c in children:
        c.start()
    made = [i for _ in children for i in out.get(timeout=60)]
    for c in children:
        c.join(timeout=60)
    return made


def by_hand() -> list[str]:
    from reasonlog.model import new_id

    new_id()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.time_ns() + 300_000_000
    children = [ctx.Process(target=_fork_of_a_fork, args=(start, out)) for _ in range(3)]
    for c in children:
        c.start()
    pid = os.fork()
    if pid == 0:  # os.fork by hand
        try:
            _ids_at(start, out)
            out.close()
            out.join_thread()
        finally:
            os._exit(0)
    made = [i for _ in range(7) for i in out.get(timeout=60)]
    os.waitpid(pid, 0)
    for c in children:
        c.join(timeout=60)
    return made


def main() -> None:
    what = sys.argv[1]
    if what == "ids":
        print(json.dumps(ids(sys.argv[2])))
    elif what == "by-hand":
        print(json.dumps(by_hand()))
    else:
        import faultkit

        out = faultkit.forked_pool(Path(sys.argv[2]).parent, workers=int(sys.argv[3]), calls=int(sys.argv[4]),
                                   db=sys.argv[2])
        print(json.dumps({**out.row(), "rejected": faultkit.rejected(sys.argv[2])}))


if __name__ == "__main__":
    main()
