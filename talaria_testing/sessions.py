"""Small saved sessions for in-process tests of the session modules."""

from __future__ import annotations

from api.models import Session


def message(role: str, content, ts: float) -> dict:
    return {"role": role, "content": content, "timestamp": ts}


def saved_session(title: str = "t", n: int = 0, **fields) -> Session:
    """A session saved at once, holding ``n`` alternating user/assistant rows ``message <i>``."""
    messages = [message("user" if i % 2 == 0 else "assistant", f"message {i}", 1000.0 + i) for i in range(n)]
    session = Session(title=title, messages=messages, **fields)
    session.save()
    return session
