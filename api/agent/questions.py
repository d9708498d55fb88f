"""Questions the agent puts to the person mid-turn (approvals, clarify): open, wait, answer, settle.

A question belongs to one session and is settled once: by the person's answer, its deadline, a cancel of
the session's turn, or the server stopping. Answering an id that is unknown or another session's is a 404;
one already settled is a 409. ``Questions`` is one registry per kind; it knows nothing of the agent.

A waiting question is also written into its session file (``pending_question``) and erased, durably,
before the agent acts on the answer, so after a crash the startup sweep can say in the transcript what was
left unanswered (``notes_after_restart``) — and that it did not run.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from api.agent.agent_events import OnEvent
from api.rules.errors import Conflict, NotFound
from api.store import session_edit
from api.store.models import Session

ANSWERED = "answered"
TIMEOUT = "timeout"
CANCELLED = "cancelled"
STOPPED = "stopped"

_POLL_S = 0.2  # how often a waiting question looks at the turn's interrupt flag
_SETTLED_MEMORY = 2000  # settled ids remembered, so a late answer gets 409 rather than 404


@dataclass
class Question:
    id: str
    session_id: str
    payload: dict[str, Any]  # what the page shows, without the id
    deadline: float  # time.monotonic() value
    timeout_s: float
    answer: Any = None
    outcome: str | None = None
    settled: threading.Event = field(default_factory=threading.Event)

    def public(self) -> dict[str, Any]:
        remaining = max(0.0, self.deadline - time.monotonic())
        return {**self.payload, "session_id": self.session_id, "expires_in": round(remaining, 1)}


class Questions:
    """The open questions of one kind, by id; at most one open question per session.

    The kind names the question's events (``<kind>``, ``<kind>_resolved``), its id field (``<kind>_id``)
    and its durable trace (``{"kind": <kind>, ...}``).
    """

    def __init__(self, kind: str):
        self.kind = kind
        self.id_field = f"{kind}_id"
        self._lock = threading.Lock()
        self._open: dict[str, Question] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()  # id → session id
        self._stopped = False

    def ask(
        self,
        session_id: str,
        payload: dict[str, Any],
        timeout_s: float,
        emit: OnEvent,
        interrupted: Callable[[], bool],
        resolution: Callable[[Question], dict[str, Any]] = lambda _question: {},
    ) -> Question:
        """Put a question to the person and block until it is settled; returns the settled question.

        It is written into the session file before the page can see it, and erased (durably) before the
        asker acts on the answer. Whatever fails while it waits, it is settled (cancelled: an approval is
        then denied) and erased, and the error goes on to the asker. ``resolution`` adds the asker's own
        fields to the ``<kind>_resolved`` event.
        """
        question = self.open(session_id, payload, timeout_s)
        try:
            remember(session_id, {"kind": self.kind, **question.payload})
            emit(self.kind, question.public())
            self.wait(question, interrupted)
        finally:
            self.close(question)
            remember(session_id, None)
        emit(
            f"{self.kind}_resolved",
            {self.id_field: question.id, "outcome": question.outcome, **resolution(question)},
        )
        return question

    def open(self, session_id: str, payload: dict[str, Any], timeout_s: float) -> Question:
        """Register a question; ``Conflict`` when the session already waits on one (it is refused)."""
        question = Question(
            id=uuid.uuid4().hex,
            session_id=session_id,
            payload=dict(payload),
            deadline=time.monotonic() + max(0.0, timeout_s),
            timeout_s=timeout_s,
        )
        question.payload[self.id_field] = question.id
        with self._lock:
            if any(q.session_id == session_id for q in self._open.values()):
                raise Conflict("another question is already waiting in this session")
            self._open[question.id] = question
            if self._stopped:
                self._settle_locked(question, STOPPED, None)
        return question

    def wait(self, question: Question, interrupted: Callable[[], bool] = lambda: False) -> Question:
        """Block until the question is settled; the deadline and ``interrupted()`` settle it too."""
        while not question.settled.wait(min(_POLL_S, max(0.0, question.deadline - time.monotonic()))):
            if interrupted():
                self._settle(question, CANCELLED, None)
            elif time.monotonic() >= question.deadline:
                self._settle(question, TIMEOUT, None)
        return question

    def close(self, question: Question) -> None:
        """Settle a question its asker gave up on (an error while asking): nothing stays open."""
        self._settle(question, CANCELLED, None)

    def answer(
        self,
        session_id: str,
        question_id: Any,
        value: Any,
        before: Callable[[Question], None] | None = None,
    ) -> Question:
        """Settle a session's open question with the person's answer.

        ``before(question)`` runs while the question is still open and nothing else can settle it (what
        the answer promises is made durable there); if it raises, the question stays open.
        """
        with self._lock:
            question = self._open.get(question_id) if isinstance(question_id, str) else None
            if question is None or question.session_id != session_id:
                if self._settled.get(question_id) == session_id:
                    raise Conflict("This question was already answered or has expired.")
                raise NotFound("No such question waiting in this session")
            if before is not None:
                before(question)
            self._settle_locked(question, ANSWERED, value)
        return question

    def pending(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [q.public() for q in self._open.values() if q.session_id == session_id]

    def cancel_session(self, session_id: str, outcome: str = CANCELLED) -> int:
        with self._lock:
            open_ones = [q for q in self._open.values() if q.session_id == session_id]
            for question in open_ones:
                self._settle_locked(question, outcome, None)
        return len(open_ones)

    def stop(self) -> None:
        """The server is stopping: settle every open question, and any opened from now on."""
        with self._lock:
            self._stopped = True
            for question in list(self._open.values()):
                self._settle_locked(question, STOPPED, None)

    def _settle(self, question: Question, outcome: str, value: Any) -> None:
        with self._lock:
            self._settle_locked(question, outcome, value)

    def _settle_locked(self, question: Question, outcome: str, value: Any) -> None:
        if question.settled.is_set():
            return
        question.outcome, question.answer = outcome, value
        self._open.pop(question.id, None)
        self._settled[question.id] = question.session_id
        while len(self._settled) > _SETTLED_MEMORY:
            self._settled.popitem(last=False)
        question.settled.set()


# ---------------------------------------------------------------------- the durable trace


def remember(session_id: str, record: dict[str, Any] | None) -> None:
    """Write (or, with None, erase) the session's waiting question, durably."""
    try:
        with session_edit.edit(session_id, touch_updated_at=False) as session:
            if session.pending_question == record:
                raise session_edit.Unchanged
            session.pending_question = record
    except NotFound:
        return


def notes_after_restart(session: Session) -> list[dict[str, Any]]:
    """Transcript rows for a question the server died waiting on; clears it (the caller saves)."""
    record = session.pending_question
    session.pending_question = None
    if not isinstance(record, dict):
        return []
    if record.get("kind") == "approval":
        text = (
            "⚠ The server stopped while this command waited for your approval, so it was denied and did "
            f"not run:\n\n```\n{record.get('command') or ''}\n```"
        )
    else:
        text = (
            f"⚠ The server stopped while the agent waited for your answer to: {record.get('question') or ''}"
        )
    row = {"role": "assistant", "content": text, "timestamp": time.time(), "_error": True}
    return [{**row, "_question": {"kind": record.get("kind"), "outcome": "restart"}}]
