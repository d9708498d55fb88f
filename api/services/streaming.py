"""A chat turn end to end: write-ahead user message, event journal, checkpoints, one final merge.

1. ``start_turn`` appends the user message under the session lock, marks the turn pending and saves
   durably before the agent starts.
2. The agent runs in a worker thread (``api.agent.agent_turn``); every event lands in the turn's journal
   with an increasing sequence number, which ``api.web.sse`` relays and resumes from.
3. The partial answer is checkpointed into ``messages`` as a ``_partial`` row every few seconds.
4. On completion the result replaces the partial row, pending fields clear, and the session is saved once.

Each of these saves is one ``api.store.session_edit.edit``: the lock is held for the change and its save only,
never across the agent's work, and a save that fails leaves the session as its file holds it.
5. After a crash, ``recover_interrupted_turns`` finds pending turns at startup and adds a visible
   "interrupted" marker; it never invents an answer.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from typing import Any

from api.agent import (
    agent_pool,
    agent_runtime,
    agent_turn,
    interrupted_turns,
    process_cards,
    provider_errors,
    turn_journal,
    turn_rows,
    worker_pool,
)
from api.agent.agent_events import OnEvent
from api.agent.agent_turn import TurnResult
from api.agent.turn_journal import LiveTurns, Turn
from api.rules import queue_items
from api.rules.errors import ApiError, BadRequest, Conflict, NotFound, redact_paths
from api.rules.sanitize import sanitize_messages_for_api, scrub_surrogates
from api.services import (
    attachments,
    compression,
    environment_check,
    environment_workers,
    environments,
    session_ops,
    session_views,
    titles,
    turn_scope,
    workspace,
)
from api.services.live_render import LiveRender
from api.services.turn_work import WORK as WORK
from api.services.turn_work import TurnParts as TurnParts
from api.services.turn_work import Work as Work
from api.store import config as _config
from api.store import models, session_edit

log = logging.getLogger("talaria.streaming")

_AGENT_STOP_S = agent_pool.STOP_WAIT_S
_TITLE_CHARS = 60


# ---------------------------------------------------------------------- start


def _history_for(session: models.Session) -> list[dict[str, Any]]:
    """The reconciled model context before this turn, in the provider-safe shape."""
    try:
        merged = models.reconciled_state_db_messages_for_session(session, prefer_context=True)
    except Exception:  # noqa: BLE001 - an unreadable state.db must not block a turn
        log.exception("reconciling %s with state.db failed; using the session file alone", session.session_id)
        merged = session.context_messages or session.messages
    return sanitize_messages_for_api(merged)


def start_turn(
    session_id: str,
    message: Any,
    model: str | None = None,
    attachment_paths: Any = None,
    queued_id: str | None = None,
    *,
    work: Work | None = None,
    turns: LiveTurns | None = None,
) -> dict[str, Any]:
    """Commit the user message durably, then run the agent in the background; answers ``{stream_id}``.

    ``work`` and ``turns`` are the app's (those in use when None): the turn joins ``turns``, acts on ``work``'s
    objects (its store, workers, idle agents...: ``TurnParts``) and, once ended, is told to ``work``'s listeners.

    ``message`` comes as the request sent it; anything but a non-empty string is a 400 here.

    ``attachment_paths`` are workspace paths of files attached to the message (``api.services.attachments``);
    the message the agent reads, and the one saved, names each of them.

    ``queued_id`` names the queued message this turn sends (``api.services.turn_queue``): it leaves the queue in the
    same save that writes the user message, so a crash loses it or runs it, never both.
    """
    work, turns = WORK.get(work), turn_journal.TURNS.get(turns)
    if work.shutting_down.is_set():
        raise ApiError("Talaria is shutting down", status=503)
    parts = work.parts()
    store = parts.store
    pools = parts.environment_pools
    attached = (
        attachments.message_attachments(session_id, attachment_paths, store=store, environment_pools=pools)
        if attachment_paths
        else []
    )
    if not isinstance(message, str) or not (message.strip() or attached):
        raise BadRequest("message must be a non-empty string")
    message = scrub_surrogates(attachments.agent_text(message.strip() if attached else message, attached))
    stream_id = uuid.uuid4().hex
    turn = Turn(stream_id, session_id, message)
    turn.image_paths, turn.image_folder = attachments.image_files(
        session_id, attached, store=store, environment_pools=pools
    )
    started = False
    try:
        with session_edit.edit(session_id, store=store) as session:
            if session.read_only:
                raise Conflict("This session is read-only.")
            # An environment or workspace no longer valid refuses the turn before anything is saved.
            where = environments.for_turn(session)
            if where is None:
                workspace.for_turn(session)
            # A turn left pending by a process that is gone is closed here and saved with the write-ahead.
            interrupted_turns.close_unless_live(
                session,
                "A reply is still streaming in this session (perhaps started in another tab or window); "
                "follow it there or here, stop it, or wait for it to finish.",
                turns=turns,
            )
            if queued_id is not None:
                session.queued_messages = queue_items.without(session.queued_messages, queued_id)
            history = _history_for(session)
            now = time.time()
            turn.user_ts = now
            user_msg = {"role": "user", "content": message, "timestamp": now}
            if attached:
                user_msg["attachments"] = attached
            session.messages.append(user_msg)
            if session.context_messages:
                session.context_messages.append(dict(user_msg))
            if model:
                session.model = model
            session.active_stream_id = stream_id
            session.pending_user_message = message
            session.composer_draft = {}  # sent: the draft kept for other tabs and devices is gone
            session.pending_started_at = now
            session_ops.advance_watermark_after_turn(session, now)
            turns.start(turn)  # live before the save, so the row it indexes says "streaming"
            started = True
    except BaseException:
        if started:
            turns.end(turn)
        turn.finish()  # also removes the copies of a remote session's images
        raise
    turn.history_tokens = compression.estimate_tokens(history + [user_msg])
    threading.Thread(
        target=_run_turn,
        args=(turn, session, message, history, now, where, work, turns, parts),
        name=f"turn-{stream_id[:8]}",
        daemon=True,
    ).start()
    return {"stream_id": stream_id, "session_id": session_id}


# ---------------------------------------------------------------------- the worker


def _run_turn(
    turn: Turn,
    session: models.Session,
    message: str,
    history: list[Any],
    user_ts: float,
    where: tuple[str, dict[str, Any]] | None,
    work: Work,
    turns: LiveTurns,
    parts: TurnParts,
) -> None:
    """``where``: the session's execution environment ``(name, definition)``, None for local; ``work``,
    ``turns`` and ``parts``: the app's that started the turn (the thread reaches no slot in use)."""
    result = None
    error: tuple[str, str | None] | None = None
    save_error: tuple[str, str | None] | None = None
    key = agent = None
    runtime: dict[str, Any] | None = None  # the agent's runtime, for the title call
    answered = False  # an agent ran the turn (a title may follow)
    needs_setup = False  # no model configured: the page offers its setup form with the error
    live_render = LiveRender(turn.append)
    try:
        watch = None
        if where is not None:
            # An unreachable host ends the turn here, saying what to fix.
            environment_check.reach(*where, reached=parts.reached)
            watch = environment_check.ConnectionWatch(*where, live_render, reached=parts.reached)
        if where is not None or worker_pool.enabled():
            runner: Any = _start_in_worker(
                turn, session, message, history, user_ts, watch or live_render, where, parts
            )
            if watch is not None:
                watch.interrupt = runner.interrupt
                watch.reset = lambda: runner.worker and runner.worker.send({"op": "leave_environment"})
        else:
            key, agent = agent_pool.take(session, agents=parts.agents)
            runner = agent_turn.TurnRunner(
                agent,
                agent_runtime.user_content(agent, message, turn.image_paths),
                history,
                live_render,
                persist_text=message,
                persist_timestamp=user_ts,
                scope=turn_scope.for_turn(session, turn.append, asking=parts.asking),
            )
            turn.runner = runner
            if turn.cancel_requested:
                raise _Cancelled()
            runner.start()
        if turn.cancel_requested:  # a cancel between the check above and start() was cleared by start()
            runner.interrupt("Stopped by the user")
        _checkpoint_until_done(turn, runner, parts)
        result = runner.result
        answered = result is not None
        if isinstance(runner, worker_pool.RemoteRunner):
            runtime = runner.main_runtime
            error, needs_setup = _worker_outcome(turn, runner)
        lost = watch.verdict() if watch is not None else None
        if lost is not None:  # the host went away mid-turn: the turn ends with that, what it did is kept
            answered = False
            error = (lost, None)
        elif result is not None and result.error:  # say what to do about a refused URL, key or model
            result.error = provider_errors.explain(result.error, provider_errors.endpoint_of(agent))
    except _Cancelled:
        pass
    except agent_runtime.ProviderNotConfigured as exc:
        error, needs_setup = (exc.message, None), True
    except ApiError as exc:
        error = (exc.message, None)
    except _SaveFailed as exc:
        error = save_error = (exc.message, None)
    except Exception as exc:  # noqa: BLE001 - any failure becomes an error event, never a lost turn
        log.exception("turn %s failed", turn.stream_id)
        error = (f"The turn failed: {type(exc).__name__}: {exc}", None)
    finally:
        live_render.close()
        if agent is not None and key is not None:
            runtime = agent_runtime.main_runtime(agent)
            stopped = turn.cancel_requested or bool(result and result.interrupted)
            agent_pool.release(key, agent, turn.runner, stopped=stopped, agents=parts.agents)
    try:
        _finalize(turn, result, error, needs_setup, parts.store)
    except Exception as exc:  # noqa: BLE001 - the stream still ends, with the reason
        log.exception("finalizing turn %s failed", turn.stream_id)
        message = save_error[0] if save_error else _save_failed_text(exc, "the answer")
        turn.append("error", {"message": message})
        turn.append("done", {"session": None})
    finally:
        turns.end(turn)
        try:
            parts.store.reindex_after_turn(turn.session_id)
        except Exception:  # noqa: BLE001 - the sidebar row is derived; the stream still ends
            log.exception("re-indexing %s after its turn failed", turn.session_id)
        turn.finish()
    # The background processes it started outlive it.
    parts.process_watch.watch_after(turn, store=parts.store, workers=parts.workers)
    if answered and error is None:
        try:
            titles.after_turn(turn.session_id, runtime, store=parts.store, workers=parts.workers)
        except Exception:  # noqa: BLE001 - a title is a nicety; the turn is saved
            log.exception("starting the title of %s failed", turn.session_id)
    work.turn_ended(turn)


def _start_in_worker(
    turn: Turn,
    session: models.Session,
    message: str,
    history: list[Any],
    user_ts: float,
    live_render: OnEvent,
    where: tuple[str, dict[str, Any]] | None,
    parts: TurnParts,
) -> worker_pool.RemoteRunner:
    """A local turn goes to the app's main pool; a turn in another environment to that environment's own pool."""
    folder = None if where is None else environments.turn_workspace(session, where[1])
    pool = parts.workers
    if where is not None:
        pool = environment_workers.pool_for(*where, pools=parts.environment_pools)
    scope = turn_scope.for_turn(session, turn.append, folder, asking=parts.asking)
    runner = worker_pool.start_turn(
        session, message, turn.image_paths, history, user_ts, live_render, scope, pool
    )
    turn.runner = runner
    return runner


def _worker_outcome(
    turn: Turn, runner: worker_pool.RemoteRunner
) -> tuple[tuple[str, str | None] | None, bool]:
    """A worker's turn that built no agent is an error; one whose worker ended is interrupted."""
    if runner.failure is not None:
        return (runner.failure[0], None), runner.failure[1]
    if runner.lost:
        turn.worker_lost = True
        turn.append("status", {"kind": "warn", "message": WORKER_LOST_TEXT})
    return None, False


WORKER_LOST_TEXT = "The agent's worker process ended during this turn; what it had streamed is kept."


class _SaveFailed(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _save_failed_text(exc: BaseException, what: str) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else redact_paths(str(exc))
    return f"Saving {what} failed ({reason}); the turn was stopped. The conversation is kept as last saved."


def _checkpoint_until_done(turn: Turn, runner: agent_turn.TurnRunner, parts: TurnParts) -> None:
    """Checkpoint the partial answer every interval; a checkpoint that cannot be saved stops the turn."""
    interval = float(_config.setting("checkpoint_interval"))
    checkpointed = (0, 0)
    due = time.monotonic() + interval
    # Background processes' cards refresh each second; the checkpoint keeps its own interval.
    while not runner.done.wait(min(interval, process_cards.WATCH_INTERVAL_S)):
        process_cards.refresh(turn, pool=parts.workers)
        seen = (len(turn.partial_text), turn.work_changes)
        if seen == checkpointed or time.monotonic() < due:
            continue
        due = time.monotonic() + interval
        checkpointed = seen
        try:
            _checkpoint(turn, parts.store)
        except Exception as exc:  # noqa: BLE001 - the disk refused: stop the agent rather than lose more
            log.exception("checkpoint of turn %s failed", turn.stream_id)
            runner.interrupt("Saving the conversation failed")
            runner.done.wait(_AGENT_STOP_S)
            raise _SaveFailed(_save_failed_text(exc, "the conversation")) from exc


class _Cancelled(Exception):
    pass


def _drop_partial_tail(session: models.Session) -> None:
    """Remove the checkpoint rows at the end of the transcript and of the model context."""
    for rows in (session.messages, session.context_messages):
        while rows and isinstance(rows[-1], dict) and rows[-1].get("_partial"):
            rows.pop()


def _put_checkpoint(session: models.Session, turn: Turn) -> None:
    """The partial answer as the last row, in the compressed context too: a crash leaves both saying it."""
    _drop_partial_tail(session)
    row = turn_rows.partial_row(turn, time.time())
    session.messages.append(row)
    if session.context_messages:
        session.context_messages.append(dict(row))


def _require_owner(session: models.Session, turn: Turn) -> None:
    """Leave the edit unsaved unless this turn still owns the session (shutdown or a newer turn settled it)."""
    if session.active_stream_id != turn.stream_id:
        raise session_edit.Unchanged


def _checkpoint(turn: Turn, store: models.Store) -> None:
    try:
        with session_edit.edit(turn.session_id, touch_updated_at=False, store=store) as session:
            _require_owner(session, turn)
            _put_checkpoint(session, turn)
    except NotFound:
        return


def _model_of(result: TurnResult | None, session: models.Session) -> str:
    """The model that wrote the turn's answer: the agent's own report, else the session's pick."""
    reported = result.raw.get("model") if result is not None and isinstance(result.raw, dict) else None
    if isinstance(reported, str) and reported.strip():
        return reported.strip()
    return session.model or agent_runtime.configured_default_model()


def _stamp_model(rows: list[dict[str, Any]], model: str) -> None:
    if not model:
        return
    for row in rows:
        if row.get("role") == "assistant":
            row.setdefault("model", model)


# What a turn's answer row keeps of the turn's usage, for the page (per turn) and the file.
_ROW_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "estimated_cost_usd",
)


def _stamp_usage(rows: list[dict[str, Any]], result: TurnResult | None) -> None:
    usage = {
        k: v for k, v in (result.usage if result is not None else {}).items() if k in _ROW_USAGE_KEYS and v
    }
    answers = [row for row in rows if row.get("role") == "assistant"]
    if usage and answers:
        answers[-1]["usage"] = usage


def _finalize(
    turn: Turn,
    result: TurnResult | None,
    error: tuple[str, str | None] | None,
    needs_setup: bool,
    store: models.Store,
) -> None:
    merged = None
    try:
        with session_edit.edit(turn.session_id, store=store) as session:
            _require_owner(session, turn)
            merged = _merge_turn(session, turn, result, error, needs_setup)
    except NotFound:
        pass
    if merged is None:
        turn.append("done", {"session": None})  # shutdown or a newer turn already settled this one
        return
    outcome, compressed_event, title = merged
    if compressed_event is not None:
        turn.append("compressed", compressed_event)
    if title:
        turn.append("title", {"title": title})
    if outcome.error is not None:
        hint = {"hint": outcome.error[1]} if outcome.error[1] else {}
        setup = {"setup": True} if needs_setup else {}
        turn.append("error", {"message": outcome.error[0], **hint, **setup})
    elif outcome.interrupted:
        turn.append("error", {"message": interrupted_turns.INTERRUPTED_TEXT})
    elif outcome.stopped:
        turn.append("cancelled", {})
    turn.append("done", {"session": session_views.full_session(session, msg_limit=100)})


def _merge_turn(
    session: models.Session,
    turn: Turn,
    result: TurnResult | None,
    error: tuple[str, str | None] | None,
    needs_setup: bool,
) -> tuple[Any, dict[str, Any] | None, str | None]:
    """The turn's rows replace its checkpoint; the pending fields clear: (outcome, compressed event, title)."""
    compressed_event = None
    _drop_partial_tail(session)
    visible_before = turn_rows.rows_before_turn(session, turn)
    now = time.time()
    outcome = turn_rows.turn_outcome(turn, result, error, now)
    _stamp_model(outcome.rows, _model_of(result, session))
    _stamp_usage(outcome.rows, result)
    session.messages.extend(outcome.rows)
    if outcome.error is not None:
        session.messages.append(
            {
                "role": "assistant",
                "content": f"⚠ {outcome.error[0]}",
                "timestamp": time.time(),
                "_error": True,
                **({"_needs_setup": True} if needs_setup else {}),
            }
        )
    if result is not None and result.compressed:
        new_context = [turn_rows.stored_row(m) for m in result.messages if isinstance(m, dict)]
        turn_rows.stamp(new_context, now)
        compressed_event = compression.record_auto_compression(
            session, new_context, visible_before, tokens_before=turn.history_tokens
        )
    elif session.context_messages:
        session.context_messages.extend(copy.deepcopy(outcome.rows))
    if outcome.interrupted:
        session.messages.append(interrupted_turns.interrupted_marker())
    if result is not None and result.pending_steer:
        _queue_undelivered_steer(session, turn, result.pending_steer, now)
    _apply_usage(session, result)
    session.clear_pending_turn()
    return outcome, compressed_event, _auto_title(session)


STEER_QUEUED_TEXT = "The agent finished before it could read your steer; it is sent as the next message."


def _queue_undelivered_steer(session: models.Session, turn: Turn, text: str, now: float) -> None:
    """A steer the turn ended without reading runs next, at the head of the queue."""
    item = queue_items.new_item(text, now, source="steer")
    session.queued_messages = [item, *session.queued_messages]
    turn.append("status", {"kind": "info", "message": STEER_QUEUED_TEXT})
    turn.append("queue", {"queue": list(session.queued_messages)})


def _apply_usage(session: models.Session, result: TurnResult | None) -> None:
    if result is None:
        return
    usage = result.usage or {}
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = usage.get(name)
        if isinstance(value, int):
            setattr(session, name, (getattr(session, name) or 0) + value)
    cost = usage.get("estimated_cost_usd")
    if isinstance(cost, (int, float)):
        session.estimated_cost = (session.estimated_cost or 0) + cost
    if result.last_prompt_tokens is not None:
        session.last_prompt_tokens = result.last_prompt_tokens
    if result.context_length:
        session.context_length = result.context_length
    if result.threshold_tokens:
        session.threshold_tokens = result.threshold_tokens


def _auto_title(session: models.Session) -> str | None:
    if session.manual_title or (session.title and session.title != "Untitled"):
        return None
    first = next((m for m in session.messages if isinstance(m, dict) and m.get("role") == "user"), {})
    line = " ".join(titles.persons_message(first).split())
    if not line:
        return None
    title = line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    session.title = title
    return title


# ---------------------------------------------------------------------- cancel, interrupted turns, shutdown


def cancel_turn(
    stream_id: str | None = None,
    session_id: str | None = None,
    *,
    turns: LiveTurns | None = None,
    work: Work | None = None,
) -> dict[str, Any]:
    """Stop the turn ``stream_id`` (else the session's live one) among ``turns``, settling its questions among
    ``work``'s (both the app's; those in use when None)."""
    held = turn_journal.TURNS.get(turns)
    turn = held.get_turn(stream_id) if stream_id else held.live_turn_for(session_id or "")
    if turn is None:
        raise NotFound("No such stream")
    if turn.finished:
        return {"ok": True, "finished": True}
    turn.cancel_requested = True
    # The agent is interrupted before its question is settled: in a worker process the stop then arrives
    # ahead of the deny, so the agent never goes on to its next model call.
    if turn.runner is not None:
        turn.runner.interrupt("Stopped by the user")
    turn_scope.cancel(turn.session_id, asking=WORK.get(work).parts().asking)
    return {"ok": True}


def shutdown(
    timeout: float = 5.0,
    *,
    work: Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> None:
    """Stop the live turns among ``turns`` (with ``work`` and ``store``, the app's; those in use when None):
    interrupt them, give them ``timeout`` to settle, then mark the rest interrupted."""
    work = WORK.get(work)
    work.shutting_down.set()
    turn_scope.stop_all(asking=work.parts().asking)
    live = turn_journal.TURNS.get(turns).live_turns()
    for turn in live:
        turn.stopped_by_shutdown = True
        turn.cancel_requested = True
        if turn.runner is not None:
            turn.runner.interrupt("Talaria is shutting down")
    deadline = time.time() + timeout
    for turn in live:
        with turn.cond:
            while not turn.finished and time.time() < deadline:
                turn.cond.wait(max(0.0, deadline - time.time()))
        if not turn.finished:
            try:
                with session_edit.edit(turn.session_id, touch_updated_at=False, store=store) as session:
                    if session.active_stream_id == turn.stream_id and turn.partial_text:
                        _put_checkpoint(session, turn)
                    if not interrupted_turns.close_pending_turn(session):
                        raise session_edit.Unchanged
            except NotFound:
                continue
