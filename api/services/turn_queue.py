"""Messages sent while a turn runs: queued in the session file, steered into the running turn, or sent as
an interrupt; the queue runs, in order, as each turn ends, from the server (no tab needs to be open).

- ``send(mode="queue")`` saves the message at the end of ``queued_messages`` (``api.rules.queue_items``).
- ``send(mode="steer")`` hands the text to the running turn through the agent's own ``/steer``
  (``TurnRunner.steer``): the agent appends it, marked as the person's, to the next tool result the model
  reads, so the saved transcript and the model's context hold it once, inside that tool row. A turn that
  cannot take it (it is ending, or has attachments to carry) queues it instead and says so; a steer the
  turn ends without reading runs as the next message (``api.services.streaming``).
- ``send(mode="interrupt")`` puts the message at the head of the queue and stops the turn the way the
  stop button does (what streamed is saved); the message runs as soon as the turn has stopped.

Every change is one ``session_edit.edit``; while a turn is live its journal carries a ``queue`` event with
the whole queue, so every tab following the turn sees the same queue. ``drain`` starts the head of the
queue when no turn is live; the write-ahead of that turn removes the item (``streaming.start_turn``), so a
crash either leaves it queued or has it in the transcript, never both and never neither. At startup
``resume_waiting`` starts every queue left waiting: the person asked for these messages to run after the
turn, and a turn cut short by the restart is marked interrupted in the transcript they follow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from api.agent import turn_journal
from api.agent.turn_journal import LiveTurns
from api.rules import queue_items
from api.rules.errors import ApiError, BadRequest, Conflict, NotFound
from api.rules.sanitize import scrub_surrogates
from api.services import attachments, streaming
from api.store import models, session_edit

log = logging.getLogger("talaria.turn_queue")

MODES = ("queue", "steer", "interrupt")
TEXT_MAX_CHARS = 200_000
STEER_REFUSED_TEXT = "The running turn could not take the steer, so it is queued to run next."
STEER_WITH_FILES_TEXT = "A steer carries text only, so the message with its attachments is queued instead."


def _text(message: Any, allow_empty: bool = False) -> str:
    if not isinstance(message, str) or not (message.strip() or allow_empty):
        raise BadRequest("message must be a non-empty string")
    if len(message) > TEXT_MAX_CHARS:
        raise BadRequest(f"message is too long (at most {TEXT_MAX_CHARS} characters)")
    return cast("str", scrub_surrogates(message))


def _announce(session_id: str, items: list[dict[str, Any]], turns: LiveTurns | None) -> None:
    """Tell every tab following the live turn (among ``turns``) what the queue holds now."""
    live = turn_journal.live_turn_for(session_id, turns=turns)
    if live is not None and not live.finished:
        live.append("queue", {"queue": [dict(item) for item in items]})


def _save(
    session_id: str,
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    store: models.Store | None,
    turns: LiveTurns | None,
) -> list[dict[str, Any]]:
    """Apply ``change(items) -> items`` to the session's queue in one save; the queue after it."""
    with session_edit.edit(session_id, store=store) as session:
        if session.read_only:
            raise Conflict("This session is read-only.")
        session.queued_messages = change(session.queued_messages)
        items = list(session.queued_messages)
    _announce(session_id, items, turns)
    return items


def send(
    session_id: str,
    message: Any,
    mode: Any = "queue",
    attachment_paths: Any = None,
    *,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """Queue, steer or interrupt with ``message``; with no turn live the queue starts at once. ``work``,
    ``turns`` and ``store`` are the app's (those in use when None).

    Answers ``{"mode", "queue", "queued"?, "steered"?, "stream_id"?, "note"?}``: ``mode`` is what was done
    (a refused steer says ``"queue"`` with the ``note`` why), ``stream_id`` the turn now running.
    """
    if mode not in MODES:
        raise BadRequest(f"mode must be one of {', '.join(MODES)}")
    paths = attachment_paths or None
    if paths is not None:  # refused here, not when its turn comes
        pools = streaming.WORK.get(work).parts().environment_pools
        attachments.message_attachments(session_id, paths, store=store, environment_pools=pools)
    text = _text(message, allow_empty=bool(paths))
    turns = turn_journal.TURNS.get(turns)
    live = turns.live_turn_for(session_id)
    note = None
    if mode == "steer" and live is not None:
        runner = live.runner
        if paths:
            note = STEER_WITH_FILES_TEXT
        elif runner is not None and not live.cancel_requested and runner.steer(text.strip()):
            live.append("steer", {"text": text.strip()})
            return {
                "mode": "steer",
                "steered": True,
                "stream_id": live.stream_id,
                "queue": _queue_of(session_id, store),
            }
        else:
            note = STEER_REFUSED_TEXT
        live.append("status", {"kind": "info", "message": note})
    source = "interrupt" if mode == "interrupt" else None
    item = queue_items.new_item(text, time.time(), paths, source)
    items = _save(session_id, lambda q: queue_items.added(q, item, first=mode == "interrupt"), store, turns)
    answer: dict[str, Any] = {"mode": "queue" if mode == "steer" else mode, "queued": item, "queue": items}
    if note:
        answer["note"] = note
    if mode == "interrupt" and live is not None:
        streaming.cancel_turn(
            stream_id=live.stream_id, turns=turns, work=work
        )  # the turn's end runs the queue
    started = drain(session_id, work=work, turns=turns, store=store)
    if started:
        answer["stream_id"] = started
        answer["queue"] = _queue_of(session_id, store)
    return answer


def _queue_of(session_id: str, store: models.Store | None) -> list[dict[str, Any]]:
    with session_edit.lock(session_id, store=store):
        return list(models.get_session(session_id, store=store).queued_messages)


def edit(
    session_id: str,
    item_id: Any,
    message: Any,
    *,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> dict[str, Any]:
    text = _text(message)
    items = _save(session_id, lambda q: queue_items.edited(q, item_id, text), store, turns)
    # An item that could not start may start once changed.
    started = drain(session_id, work=work, turns=turns, store=store)
    return {
        "queue": _queue_of(session_id, store) if started else items,
        **({"stream_id": started} if started else {}),
    }


def cancel(
    session_id: str, item_id: Any, *, store: models.Store | None = None, turns: LiveTurns | None = None
) -> dict[str, Any]:
    return {"queue": _save(session_id, lambda q: queue_items.without(q, item_id), store, turns)}


def drain(
    session_id: str,
    *,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> str | None:
    """Start the head of the queue when no turn is live among ``turns`` (``work``, ``turns`` and ``store``: the
    app's; those in use when None); the new turn's stream id, else None."""
    turns = turn_journal.TURNS.get(turns)
    if turns.live_turn_for(session_id) is not None:
        return None
    with session_edit.lock(session_id, store=store):
        try:
            items = models.get_session(session_id, store=store).queued_messages
        except KeyError:
            return None
        head = dict(items[0]) if items else None
    if head is None or head.get("error"):
        return None  # a message that could not start waits for the person (edit, cancel, send again)
    try:
        started = streaming.start_turn(
            session_id,
            head["text"],
            attachment_paths=head.get("attachments") or None,
            queued_id=head["id"],
            work=work,
            turns=turns,
        )
    except (Conflict, NotFound) as exc:
        if isinstance(exc, Conflict) and turns.live_turn_for(session_id) is None:
            _refuse(session_id, head["id"], exc.message, store, turns)  # not a race: it cannot start
        return None  # another turn started first, or the item is gone: that turn's end drains again
    except ApiError as exc:
        if exc.status < 500:  # a refusal of this message; a server stopping or a full disk passes
            _refuse(session_id, head["id"], exc.message, store, turns)
        return None
    return cast("str | None", started["stream_id"])


def _refuse(
    session_id: str, item_id: str, reason: str, store: models.Store | None, turns: LiveTurns | None
) -> None:
    log.warning("the queued message %s of %s cannot start: %s", item_id, session_id, reason)
    try:
        _save(session_id, lambda q: queue_items.with_error(q, item_id, reason), store, turns)
    except ApiError:
        log.exception("recording why %s of %s cannot start failed", item_id, session_id)


def resume_waiting(
    session_dir: Path,
    *,
    store: models.Store | None = None,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
) -> list[str]:
    """At startup: start the queue of every session that has one waiting (the index rows of ``store``, the app's
    or the one in use, say which)."""
    started = []
    index = models.store(store).index
    for row in index.all_rows(Path(session_dir), Path(session_dir) / "_index.json"):
        if not row.get("queued_count"):
            continue
        try:
            if drain(row["session_id"], work=work, turns=turns, store=store):
                started.append(row["session_id"])
        except ApiError as exc:
            log.warning("the queue of %s did not start: %s", row["session_id"], exc.message)
    return started
