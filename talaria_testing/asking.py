"""A stand-in for the person answering the agent's questions in process (approvals, clarify)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def answer_when_asked(events: list, answer: Callable[[dict], object]) -> Callable[[str, dict], None]:
    """A journal sink that answers the question a moment after it is asked (as the person would)."""

    def emit(name: str, data: dict) -> None:
        events.append((name, data))
        if name in ("approval", "clarify"):
            threading.Timer(0.02, answer, args=(data,)).start()

    return emit
