"""What a SIGKILL can cost stays about the last second, even when the writer slows down mid-run (issue 19 item 8).

A SIGKILL at instant t loses every event not yet committed; the oldest of them was recorded
`t - recorded_at` ago. The longest such window over a run is the longest time any one call took
from `s.call` to its commit, so a sink that notes when each batch committed measures it exactly,
without killing anything. The sink here is the real store made slower by sleeping (a disk or a
machine that got busier), so the measure does not depend on how loaded the test machine is.
"""
from __future__ import annotations

import time

import reasonlog
from reasonlog.capture.sinks import StoreSink

# The README's promise: a SIGKILL loses the records of about the last second at most; the slack covers a
# loaded machine's scheduling (the writer's thread and the sink's sleeps wake late).
LOSS_BOUND_S = 1.0
SCHEDULING_SLACK_S = 0.25


class _SlowingSink(StoreSink):
    """The real store; each event costs `fast` seconds until `slow_after`, then `slow`: the writer at about half
    its speed, as on a machine that got busier."""

    def __init__(self, db, fast: float, slow: float, slow_after: float):
        super().__init__(lambda: reasonlog.open_store(db))
        self.fast, self.slow, self.slow_from = fast, slow, time.monotonic() + slow_after
        self.committed: dict[str, float] = {}

    def write_batch(self, events, counters=None, *, batch_id=None):
        per_event = self.fast if time.monotonic() < self.slow_from else self.slow
        time.sleep(per_event * len(events))
        outcome = super().write_batch(events, counters, batch_id=batch_id)
        now = time.monotonic()
        self.committed.update((ev.call_id, now) for ev in events if ev.kind == "call")
        return outcome


def test_no_call_waits_more_than_about_a_second_for_its_commit_when_the_writer_slows_mid_run(db_path, store_of):
    sink = _SlowingSink(db_path, fast=0.0003, slow=0.0009, slow_after=1.5)
    rec = reasonlog.Recorder(db_path, sink=sink)
    recorded: dict[str, float] = {}
    with rec.session(agent="flat out, then a slower machine") as s:
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 3.5:
            at = time.monotonic()
            recorded[s.call(messages=[{"role": "user", "content": f"q{i}"}], response=f"a{i}")] = at
            i += 1
    rec.close()
    waits = sorted(sink.committed[cid] - at for cid, at in recorded.items())
    assert len(waits) == len(recorded) == store_of().status()["counts"]["calls"]
    assert waits[-1] <= LOSS_BOUND_S + SCHEDULING_SLACK_S, f"the longest call waited {waits[-1]:.2f} s for its commit"
