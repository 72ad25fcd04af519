"""Recording a workload call the way an agent loop would, shared by tests."""
from __future__ import annotations

import reasonlog


def record_workload(rec: reasonlog.Recorder, calls: list[dict]) -> dict[str, str]:
    """Record workload calls through the public API; returns workload session id -> reasonlog id."""
    sessions, ids, last_call = {}, {}, {}
    for c in calls:
        last_call[c["session_id"]] = c
    for c in calls:
        sid = c["session_id"]
        if sid not in sessions:
            s = rec.session(agent=c["agent"], model=c["model"], provider=c["provider"], external_id=sid,
                            labels={"user": c["user_id"]}, started_at=c["ts_start"])
            sessions[sid], ids[sid] = s, s.id
        s = sessions[sid]
        if c["iteration"] == 0:
            s.exchange(input=c["request"]["messages"][-1]["content"][0]["text"])
        s.call(request=c["request"], response={"role": "assistant", "content": c["response"]["content"]},
               stop_reason=c["response"]["stop_reason"], usage=reasonlog.Usage.from_anthropic(c["response"]["usage"]),
               latency_ms=c["latency_ms"], started_at=c["ts_start"], provider_message_id=c["response"]["id"],
               raw=c["response"], id=c["call_id"])
        if c is last_call[sid]:
            s.end()
    return ids


def query_db(target, sql: str) -> list[tuple]:
    """Rows of a read-only SQL query on a test database, SQLite file or PostgreSQL URL (for checks of layout)."""
    if isinstance(target, str) and target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    import sqlite3

    with sqlite3.connect(target) as conn:
        return conn.execute(sql).fetchall()
