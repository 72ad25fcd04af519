"""`reasonlog run -- CMD`: the command's model calls go through a proxy of its own and are recorded in a session
named after the command and its folder; the command keeps its terminal and its exit code; unhappy paths end in
one line, never a traceback (issue 22)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from proxy_upstream import Upstream

import reasonlog
from reasonlog.store import SessionFilter

AGENT = """
import os, sys, anthropic, openai
print("base", os.environ["ANTHROPIC_BASE_URL"] == os.environ["GOOGLE_GEMINI_BASE_URL"],
      os.environ["OPENAI_BASE_URL"] == os.environ["ANTHROPIC_BASE_URL"] + "/v1")
a = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0)
m = a.messages.create(model="claude-opus-4-5", max_tokens=32, messages=[{"role": "user", "content": "Hello"}])
o = openai.OpenAI(api_key="sk-test", max_retries=0)
c = o.chat.completions.create(model="gpt-4.1-nano", messages=[{"role": "user", "content": "Hello"}])
print(m.content[0].text[:6], c.choices[0].message.content[:6])
sys.exit(int(sys.argv[1]))
"""


def reasonlog_run(db, *args: str, upstream: str, cwd=None, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "reasonlog", "--db", str(db), "run", "--upstream", upstream, *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, **kw)


def test_run_records_the_commands_calls_and_exits_with_its_code(tmp_path):
    db = tmp_path / "r.db"
    (tmp_path / "agent.py").write_text(AGENT)
    with Upstream() as up:
        child = reasonlog_run(db, "--", sys.executable, "agent.py", "3", upstream=up.url, cwd=tmp_path)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 3, err
    assert out.splitlines() == ["base True True", "Hello! **Holi"]
    assert "Traceback" not in err
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(SessionFilter())
    name = os.path.basename(sys.executable)
    assert (session["agent"], session["run"], session["call_count"]) == (name, f"{name} in {tmp_path}", 2)
    assert session["labels"]["cwd"] == str(tmp_path)
    assert f"reasonlog --db {db} show {session['id']}" in err
    assert [r.path for r in up.received] == ["/v1/messages", "/v1/chat/completions"]


@pytest.mark.slow
def test_a_command_that_does_not_exist_is_one_line_and_127(tmp_path):
    child = reasonlog_run(tmp_path / "r.db", "--", "no-such-agent-cli", "-p", "hi", upstream="http://127.0.0.1:9")
    out, err = child.communicate(timeout=30)
    assert (child.returncode, err.strip()) == (127, "error: no-such-agent-cli: command not found")


@pytest.mark.slow
def test_a_busy_port_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = reasonlog_run(tmp_path / "r.db", "--port", str(port), "--", "true", upstream="http://127.0.0.1:9")
        out, err = child.communicate(timeout=30)
    assert child.returncode == 1 and "Traceback" not in err
    assert err.strip().startswith(f"Error: cannot listen on 127.0.0.1:{port}:"), err


KILLED = """
import os, signal, anthropic
anthropic.Anthropic(api_key="k", max_retries=0).messages.create(
    model="claude-opus-4-5", max_tokens=8, messages=[{"role": "user", "content": "Hello"}])
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_a_killed_command_exits_as_a_shell_says_and_its_calls_are_kept(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up:
        child = reasonlog_run(db, "--", sys.executable, "-c", KILLED, upstream=up.url)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGKILL and "Traceback" not in err
    (session,) = reasonlog.open_store(db, read_only=True).list_sessions(SessionFilter())
    assert session["call_count"] == 1


WAITS = """
import signal, sys, time, anthropic
signal.signal(signal.SIGINT, lambda *a: sys.exit(130))
anthropic.Anthropic(api_key="k", max_retries=0).messages.create(
    model="claude-opus-4-5", max_tokens=8, messages=[{"role": "user", "content": "Hello"}])
print("waiting", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_ctrl_c_reaches_the_command_and_ends_run_without_a_traceback(tmp_path):
    db = tmp_path / "r.db"
    with Upstream() as up:
        child = reasonlog_run(db, "--", sys.executable, "-c", WAITS, upstream=up.url, start_new_session=True)
        assert child.stdout.readline() == "waiting\n"
        os.killpg(child.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        out, err = child.communicate(timeout=30)
    assert child.returncode == 130 and "Traceback" not in err, err
    assert "recorded 1 call(s) in 1 session(s)" in err
    assert json.loads(up.received[0].body)["messages"][0]["content"] == "Hello"
