"""Issue 30 item 3: a proxy that records an answer too large to hold keeps a bounded part and says so, and a
proxy stopped by SIGTERM has written (or spilled) every call it forwarded, counted against what the client got.

`reasonlog proxy` runs in its own process; the upstream on 127.0.0.1 streams a 48 MiB Anthropic answer and two
small ones. The proxy's recording keeps at most `REASONLOG_PROXY_KEEP_MB` of an answer (1 MiB here): its head
and its tail, so the text starts as it did and the usage at the end of the stream is still read."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from proxy_upstream import Upstream
from proxying import ANTHROPIC_KEY
from sdk_server import sse

import reasonlog
from reasonlog.store import SessionFilter

DELTA = "x" * 1000 + "\n"  # one text delta
DELTAS = 48 * 1024  # about 48 MiB of text, 62 MiB of SSE


def big_answer() -> list[bytes]:
    """An Anthropic stream whose text is DELTAS deltas long, in chunks of about 1 MiB."""
    head = [{"type": "message_start", "message": {
        "id": "msg_big", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    delta = sse([{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": DELTA}}],
                named=True)
    tail = [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": 777_000}},
            {"type": "message_stop"}]
    per_chunk = 1024
    return [sse(head, named=True)] + [delta * per_chunk for _ in range(DELTAS // per_chunk)] + [sse(tail, named=True)]


def peak_rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def ask(url: str, text: str) -> bytes:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": text}]}
    with httpx.Client(timeout=120) as client:
        answer = client.post(f"{url}/v1/messages", json=body,
                             headers={"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01"})
    assert answer.status_code == 200
    return answer.content


def start_proxy(db, upstream: str, **env: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proxy = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "proxy", "--port", str(port),
                              "--upstream", upstream], stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **env})
    proxy.stderr.readline()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:  # the port opens just after the line is printed
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proxy, url
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_huge_answer_is_kept_in_part_and_sigterm_loses_no_call(tmp_path):
    db = tmp_path / "r.db"
    chunks = big_answer()
    with Upstream() as up:
        up.stream(chunks)
        proxy, url = start_proxy(db, up.url, REASONLOG_PROXY_KEEP_MB="1")
        try:
            before = peak_rss_mib(proxy.pid)
            got = ask(url, "write a very long text")
            small = [ask(url, f"say hello {i}") for i in range(2)]
            grew = peak_rss_mib(proxy.pid) - before
            proxy.send_signal(signal.SIGTERM)  # at once: the recording of the big answer is still under way
            err = proxy.communicate(timeout=120)[1]
        finally:
            if proxy.poll() is None:
                proxy.kill()
    assert got == b"".join(chunks)  # the client got every byte
    assert all(b"message_stop" in s for s in small)
    assert proxy.returncode == 0 and "Traceback" not in err
    # The answer is 62 MiB; holding it would grow the proxy by as much (and more while parsing it). Kept in part, the
    # proxy grew by 8-11 MiB in 8 of 12 runs and 22-26 MiB in 4 (session 16, the code before it alike): the bound sits
    # between that and holding the answer (it was 24, which a loaded machine's CI run could cross).
    assert grew < 40, f"the proxy grew by {grew:.0f} MiB recording a {len(got) >> 20} MiB answer"

    store = reasonlog.open_store(db, read_only=True)
    try:
        sessions = store.list_sessions(SessionFilter())  # three first prompts: three conversations
        calls = sorted((store.get_call(c["id"]) for s in sessions for c in store.get_session(s["id"])["calls"]),
                       key=lambda c: c["started_at"])
        status = store.status()
    finally:
        store.close()
    assert len(calls) == 3
    big = calls[0]
    assert (big["output_tokens"], big["stop_reason"]) == (777_000, "end_turn")  # read from the stream's tail
    assert (big["status"], big["error"]["type"]) == ("error", "answer_kept_in_part")
    assert big["error"]["received_bytes"] == len(got)
    assert big["error"]["kept_bytes"] <= 1 << 20
    text = big["response"]["content"][0]["text"]
    assert text.startswith(DELTA * 400)  # the head's deltas: the answer starts as it did
    assert [c["status"] for c in calls[1:]] == ["ok", "ok"]
    assert status["dropped_records"] == 0 and status["pending_spill_files"] == []
    print(json.dumps({"grew_mib": grew}))


AGENT = """
import sys, time, httpx
url = __import__("os").environ["ANTHROPIC_BASE_URL"]
for i in range(3):
    r = httpx.post(url + "/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                   "messages": [{"role": "user", "content": f"say hello {i}"}]},
                   headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}, timeout=30)
    assert r.status_code == 200
print("sent", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_sigterm_to_run_ends_the_agent_and_keeps_every_call_it_made(tmp_path):
    """`reasonlog run` told to stop (SIGTERM, as a process manager or `timeout` sends) passes the signal on to
    the agent and writes every call the agent made before it exits; Python's default ended `run` at once."""
    db = tmp_path / "r.db"
    with Upstream() as up:
        run = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "run", "--upstream", up.url, "--",
                                sys.executable, "-c", AGENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        try:
            assert run.stdout.readline().strip() == "sent"
            run.send_signal(signal.SIGTERM)
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 128 + signal.SIGTERM  # the agent ended by the signal, as a shell says
    assert "Traceback" not in err
    store = reasonlog.open_store(db, read_only=True)
    try:
        sessions = store.list_sessions(SessionFilter())
        calls = [c for s in sessions for c in store.get_session(s["id"])["calls"]]
        assert store.status()["dropped_records"] == 0
    finally:
        store.close()
    assert len(calls) == 3
