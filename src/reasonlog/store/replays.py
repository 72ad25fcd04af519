"""Which sessions replay which (migration 14): a replayed call names the recorded call it re-sent in
`calls.replay_of`, so a session's original and its replays are found through their calls."""
from __future__ import annotations


def replay_links(cur, session_id: str) -> dict:
    """The session this one replays (from its first replayed call) and the sessions that replay this one's calls,
    oldest first."""
    row = cur.execute("SELECT o.session_id FROM calls c JOIN calls o ON o.id = c.replay_of"
                      " WHERE c.session_id = ? ORDER BY c.idx LIMIT 1", (session_id,)).fetchone()
    replays = cur.execute("SELECT c.session_id, MIN(c.started_at) FROM calls o JOIN calls c ON c.replay_of = o.id"
                          " WHERE o.session_id = ? GROUP BY c.session_id ORDER BY 2, 1", (session_id,)).fetchall()
    return {"replay_of": row[0] if row else None, "replays": [r[0] for r in replays]}
