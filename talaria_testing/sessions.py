"""Small saved sessions for in-process tests of the session modules."""

from __future__ import annotations

from api.store.models import Session
from talaria_testing.transcripts import conversation


def saved_session(title: str = "t", n: int = 0, **fields) -> Session:
    """A session saved at once, holding ``n`` alternating user/assistant rows ``message <i>``."""
    messages = conversation(*(f"message {i}" for i in range(n)), start=1000.0)
    session = Session(title=title, messages=messages, **fields)
    session.save()
    return session
