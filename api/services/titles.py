"""Session titles written by the model after the first exchange.

The first turn's end gives a session a quick title (its first line, ``api.services.streaming``). Then, once,
the agent's own title generator (``agent.title_generator``, ``api.agent.agent_calls``, in a worker process) is
asked in the background for a short title of the first exchange, on the same model and endpoint as the turn.
It replaces the quick title unless the person has named the session meanwhile (``manual_title``), and
marks ``llm_title_generated`` so it is asked once. A rename afterwards still wins, as always.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from api.agent import agent_runtime, worker_pool
from api.rules.errors import NotFound
from api.rules.session_fields import message_text
from api.services import attachments
from api.services.session_catalogue import clean_title
from api.store import models, session_edit

log = logging.getLogger("talaria.titles")


_SKILL_PREFIX = '[IMPORTANT: The user has invoked the "'


def persons_words(text: str) -> str:
    """What the person wrote: for a skill's slash command, the skill and the instruction, not the skill's
    text the agent loaded (read with the agent's own ``extract_user_instruction_from_skill_message``)."""
    if not text.startswith(_SKILL_PREFIX):
        return text
    skill = text[len(_SKILL_PREFIX) :].split('"', 1)[0]
    extract = agent_runtime.agent_module("agent.skill_commands").extract_user_instruction_from_skill_message
    return f"/{skill} {extract(text) or ''}".strip()


def persons_message(row: dict[str, Any]) -> str:
    """What the person wrote in a user row: without the lines naming its attachments, and a skill's command
    as the command (``persons_words``)."""
    return persons_words(attachments.persons_text(message_text(row) or "", row.get("attachments")))


def first_exchange(messages: list[Any]) -> tuple[str, str] | None:
    """``(user text, answer text)`` when the transcript is exactly one answered user message."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if len(users) != 1:
        return None
    answers = [
        message_text(m)
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("_error") and message_text(m)
    ]
    if not answers:
        return None
    return persons_message(users[0]), answers[-1]


def wants_title(session: models.Session) -> tuple[str, str] | None:
    """The first exchange to title, or None (named by the person, already titled, not a first exchange)."""
    if session.manual_title or session.llm_title_generated or session.read_only:
        return None
    return first_exchange(session.messages)


def apply_title(session_id: str, title: str | None, *, store: models.Store | None = None) -> bool:
    """Store a generated title unless the person named the session meanwhile; True when stored."""
    if not isinstance(title, str) or not title.strip():
        return False
    try:
        title = clean_title(title)
    except Exception:  # noqa: BLE001 - an unusable title is dropped; the quick title stays
        return False
    stored = False
    try:
        with session_edit.edit(session_id, touch_updated_at=False, store=store) as session:
            if session.manual_title or session.llm_title_generated:
                raise session_edit.Unchanged
            session.title = title
            session.llm_title_generated = True
            stored = True
    except NotFound:
        return False
    return stored


def _generate(
    session_id: str,
    user_text: str,
    answer_text: str,
    runtime: dict[str, Any] | None,
    store: models.Store | None,
    workers: worker_pool.WorkerPool | None,
) -> None:
    try:
        # In a worker process: the title's LLM call leaves the server.
        args = {"user_text": user_text, "answer_text": answer_text, "runtime": runtime}
        title = worker_pool.side_call("title", args, pool=workers)
    except Exception:  # noqa: BLE001 - a title is a nicety; the turn is already saved
        log.warning("title generation for %s failed", session_id, exc_info=True)
        return
    apply_title(session_id, title, store=store)


def after_turn(
    session_id: str,
    runtime: dict[str, Any] | None,
    *,
    store: models.Store | None = None,
    workers: worker_pool.WorkerPool | None = None,
) -> threading.Thread | None:
    """After a turn: start the title call in the background when this was the first exchange, on the
    runtime (model, provider, endpoint) the turn's agent used (``agent_runtime.main_runtime``), asking
    ``workers`` and saving into ``store`` (the turn's app's; those in use when None)."""
    with session_edit.lock(session_id, store=store):
        try:
            exchange = wants_title(models.get_session(session_id, store=store))
        except KeyError:
            return None
    if exchange is None:
        return None
    thread = threading.Thread(
        target=_generate,
        args=(session_id, *exchange, runtime, store, workers),
        name=f"title-{session_id[:8]}",
        daemon=True,
    )
    thread.start()
    return thread
