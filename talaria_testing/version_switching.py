"""A session with two versions of one message, and a child process that switches between them until killed.

``build`` makes the session in the folder ``api.store.models`` is bound to: "q2" answered first as
``FIRST`` (kept as version 0), then, edited, as ``SECOND`` (version 1, shown). ``switch_child`` runs one
switch in a child process and pauses it at a durable step (``api.store.atomic.STEP_HOOK``) for the parent to kill.
"""

from __future__ import annotations

from pathlib import Path

from talaria_testing.crash_child import PausingHook
from talaria_testing.transcripts import conversation

SID = "versions"
INDEX = 2
PREFIX = conversation("q1", "a1")
FIRST = conversation("q2", "a2", "q3", "a3", start=3.0)  # the longer version
SECOND = conversation("q2 edited", "a2 edited", start=7.0)


def build() -> None:
    """The session with ``FIRST`` kept as version 0 and ``SECOND`` shown (the context follows the transcript)."""
    from api.services import session_ops
    from api.store import models, session_edit

    rows = [dict(m) for m in PREFIX + FIRST]
    models.Session(
        session_id=SID, title="Versions", model="fake-model", messages=rows, context_messages=list(rows)
    ).save()
    session_ops.truncate_session(SID, INDEX)
    with session_edit.edit(SID) as session:
        session.messages = [*session.messages, *[dict(m) for m in SECOND]]
        session.context_messages = [*session.context_messages, *[dict(m) for m in SECOND]]


def switch_child(session_dir: str, version: int, stop_at: int, conn) -> None:
    """Switch ``SID`` to ``version``; report every durable step and pause at step ``stop_at``."""
    import api.store.models as models
    from api.services import session_versions
    from api.store import atomic
    from api.store import session_store as store

    store.use(store.Store(Path(session_dir), models.Session))
    hook = PausingHook(conn, stop_at)
    atomic.STEP_HOOK = hook
    session_versions.switch_version(SID, INDEX, version)
    atomic.STEP_HOOK = None
    hook.done()
