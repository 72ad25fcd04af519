"""A recorder in another process (tests/stepping_child.py), driven a call at a time, for the live-update tests."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


class Stepper:
    """`stepping_child.py` recording into `db`: `call(text)` records one more call, `end()` completes the session."""

    def __init__(self, db, agent: str) -> None:
        paths = [str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        self.proc = subprocess.Popen([sys.executable, str(HERE / "stepping_child.py"), str(db), agent],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def call(self, text: str) -> None:
        self._say(text + "\n", "recorded")

    def end(self) -> None:
        self._say("\n", "ended")
        self.proc.wait(timeout=30)

    def _say(self, line: str, expect: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer.startswith(expect), f"the recorder said {answer!r}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def until(check, within_s: float, every_s: float = 0.02):
    """Poll `check()` until it returns something true, for at most `within_s` seconds; that value, or the last."""
    deadline = time.monotonic() + within_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every_s)
