"""`reasonlog tail` (issue 38): follows the calls another process records, one readable line each, on SQLite and
PostgreSQL, and ends on Ctrl-C without a traceback."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

from live_helpers import Stepper
from test_dashboard import HOSTILE

from reasonlog.store import SessionFilter, open_store

SRC = Path(__file__).resolve().parent.parent / "src"


class Tail:
    """`reasonlog tail ARGS` running; `line()` is its next line of output (or None after `within_s`)."""

    def __init__(self, db, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
        # Ctrl-C as a terminal delivers it: a run started in the background (`cmd &`) ignores SIGINT, and so would
        # every child it starts, tail included, which then never stops.
        self.proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "tail", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self, within_s: float = 5.0) -> str | None:
        try:
            return self.lines.get(timeout=within_s)
        except queue.Empty:
            return None

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=20)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def test_tail_follows_an_agent_and_stops_on_ctrl_c(db):
    open_store(db).close()
    tail = Tail(db, "--agent", "tail-agent")
    mine, other = Stepper(db, "tail-agent"), Stepper(db, "someone-else")
    try:
        assert tail.line(20) == "following agent tail-agent's sessions (Ctrl-C stops)"
        other.call("not followed")
        mine.call(HOSTILE[0])
        first = tail.line()
        assert first is not None and first.split(" ", 1)[1].startswith("tail-agent ")
        assert first.endswith(" gpt-5 100→10 $0.0002  answer 1")
        mine.call("again")
        assert tail.line().endswith("#1 gpt-5 200→10 $0.0003  answer 2")
        mine.end()
        assert tail.line().endswith(" completed")
        assert tail.line(0.5) is None  # the other agent's call was never printed
        code, err = tail.interrupt()
        assert (code, tail.line(), "Traceback" in err) == (0, "stopped", False)
    finally:
        mine.close()
        other.close()
        tail.proc.kill()


def test_tail_of_a_session_prints_its_last_calls_first(db):
    recorder = Stepper(db, "one")
    try:
        for text in ("a", "b", "c"):
            recorder.call(text)
        with closing(open_store(db, read_only=True)) as store:
            [session] = [s["id"] for s in store.list_sessions(SessionFilter())]
        tail = Tail(db, session[:10], "-n", "2")
        assert tail.line(20) == f"following session {session} (Ctrl-C stops)"
        assert [tail.line()[-8:] for _ in range(2)] == ["answer 2", "answer 3"]
        recorder.call("d")
        assert tail.line().endswith("#3 gpt-5 400→10 $0.0006  answer 4")
        assert tail.interrupt()[0] == 0
    finally:
        recorder.close()


class _CtrlCOnFirstFlush:
    """Standard output whose first flush meets a Ctrl-C: the line is written, and rich has not yet forgotten it."""

    def __init__(self) -> None:
        self.text, self.flushes = "", 0

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        self.flushes += 1
        if self.flushes == 1:
            raise KeyboardInterrupt

    def isatty(self) -> bool:
        return False


def test_a_ctrl_c_just_after_the_first_line_was_written_prints_it_once(db_path, monkeypatch):
    """A Ctrl-C between rich's writing a line and its clearing of its buffer left the line there, and `stopped`
    printed it again (the whole suite on a loaded machine read `following …` twice)."""
    from reasonlog.cli.main import cli

    open_store(db_path).close()
    out = _CtrlCOnFirstFlush()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "200")
    cli.main(["--db", str(db_path), "tail"], standalone_mode=False)
    assert out.text.splitlines() == ["following every session (Ctrl-C stops)", "stopped"]


def test_a_second_ctrl_c_after_it_stopped_still_ends_it_cleanly(db_path):
    """`timeout -s INT` (and a terminal's group) can deliver Ctrl-C twice; on a loaded machine the second came after
    `stopped` was printed and click ended the run with `Aborted!` and exit 1 (the README's `tail` command failed so)."""
    open_store(db_path).close()
    tail = Tail(db_path)
    try:
        assert tail.line(20) == "following every session (Ctrl-C stops)"
        tail.proc.send_signal(signal.SIGINT)
        assert tail.line(20) == "stopped"
        code, err = tail.interrupt()  # the second, once the first has been answered
        assert (code, err) == (0, "")
    finally:
        tail.proc.kill()
