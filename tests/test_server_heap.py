"""`reasonlog serve`'s process keeps its long-lived objects out of the collector's full passes (server/heap.py).

A full collection walks every tracked object; in a served process that was some 170,000 objects (its modules,
templates, the price table), 90-100 ms of CPU inside whichever dashboard page triggered it: the p95 of `/usage`.
Each case runs in a process of its own, as a served process does (a frozen heap must not leak into the tests').
"""
from __future__ import annotations

import json
import subprocess
import sys

SERVED = """
import gc, json, sys
import reasonlog
from fastapi.testclient import TestClient
from reasonlog.server.app import serve_app

db, settle = sys.argv[1], sys.argv[2] == "settle"
reasonlog.open_store(db).close()
seen = {}
with TestClient(serve_app(db, settle_heap=settle)) as client:
    for path in ("/usage", "/", "/v1/stats?by=day", "/usage"):
        assert client.get(path).status_code == 200, path
    seen["walked"], seen["frozen"] = len(gc.get_objects()), gc.get_freeze_count()
seen["frozen_after"] = gc.get_freeze_count()
print(json.dumps(seen))
"""


def served(tmp_path, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SERVED, str(tmp_path / "heap.db"), mode], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_full_collection_in_a_served_process_walks_what_requests_made_not_its_modules(tmp_path):
    seen = served(tmp_path, "settle")
    # The dashboard's pages imported their modules on first use, and were frozen after: what is left to walk is
    # the little the last requests keep (well under a tenth of what the process holds).
    assert seen["frozen"] > 10 * seen["walked"], seen
    assert seen["frozen_after"] == 0, seen  # the app's shutdown gave it all back


def test_an_app_made_without_it_freezes_nothing(tmp_path):
    seen = served(tmp_path, "plain")
    assert seen["frozen"] == 0 and seen["frozen_after"] == 0, seen
    assert seen["walked"] > 50_000, seen  # what a full collection would walk there: the whole process
