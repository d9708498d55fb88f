"""What a session's turns cost, as the agent reported it: each answer row keeps its turn's tokens (and the
cost where the agent knows the model's price), and the session file keeps the running totals that
hermes-webui keeps too (``input_tokens``, ``output_tokens``, ``cache_*_tokens``, ``estimated_cost``)."""

from __future__ import annotations

from typing import Any

from api.rules.messages import message_time
from api.store import models, session_lookup

_TOTALS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "estimated_cost")


def session_usage(sid: str, *, store: models.Store | None = None) -> dict[str, Any]:
    """``{totals, turns: [{index, model, timestamp, usage}]}`` for one session (of ``store``, the caller's app's)."""
    session = session_lookup.load_session(sid, store=store)
    turns = []
    for index, row in enumerate(session.messages):
        if isinstance(row, dict) and row.get("role") == "assistant" and isinstance(row.get("usage"), dict):
            turns.append(
                {
                    "index": index,
                    "model": row.get("model") or "",
                    "timestamp": message_time(row),
                    "usage": row["usage"],
                }
            )
    totals = {name: getattr(session, name, None) or 0 for name in _TOTALS}
    return {"session_id": sid, "totals": totals, "turns": turns}
