"""Manual compression of the model context, uncompress, the async job form, and anchor bookkeeping.

Compression rewrites only ``context_messages`` and the anchor fields; ``messages`` (the transcript the
person reads) is never touched. The compressor runs outside the session lock; the result is applied
under it only if the session did not change meanwhile.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from typing import Any

from api.agent import agent_runtime, interrupted_turns, turn_journal, worker_pool
from api.rules.anchor import anchor_message_key, visible_messages_for_anchor
from api.rules.errors import ApiError, BadRequest, Conflict, redact_paths
from api.rules.message_keys import collapse, is_context_compression_marker
from api.rules.messages import timestamp_or_ts
from api.rules.sanitize import sanitize_messages_for_api
from api.services.session_ops import _truncation_watermark_for
from api.store import atomic, compression_undo, models
from api.store import config as _config
from api.store.in_use import InUse
from api.store.session_edit import Unchanged, edit, lock

log = logging.getLogger("talaria.compression")

MIN_MESSAGES = 4
FOCUS_MAX_CHARS = 500


def normalise_focus(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()[:FOCUS_MAX_CHARS]
    return value or None


# ---------------------------------------------------------------------- anchors


def set_anchor(session: models.Session, visible_upto: list[Any], **details: Any) -> None:
    """Anchor the compression after the last visible row of ``visible_upto`` (a prefix of ``messages``)."""
    visible = visible_messages_for_anchor(visible_upto)
    session.compression_anchor_visible_idx = len(visible) - 1 if visible else None
    session.compression_anchor_message_key = anchor_message_key(visible[-1]) if visible else None
    message_idx = None
    if visible:
        last = visible[-1]
        message_idx = next((i for i in range(len(visible_upto) - 1, -1, -1) if visible_upto[i] is last), None)
    session.compression_anchor_details = {"message_idx": message_idx, **details}


def _stamp_missing_message_timestamps(rows: list[Any]) -> None:
    base = time.time()
    k = 0
    for row in rows:
        if isinstance(row, dict) and not row.get("timestamp") and not row.get("_ts"):
            row["timestamp"] = base + k * 1e-6
            k += 1


# ---------------------------------------------------------------------- the agent side


def estimate_tokens(messages: list[Any]) -> int:
    return max(agent_runtime.estimate_tokens(messages), 1)


def _resolve_provider(session: models.Session) -> tuple[str, str | None, dict[str, Any]]:
    model, provider, _base_url = _config.resolve_model_provider(
        _config.model_with_provider_context(session.model, session.model_provider)
    )
    try:
        runtime = agent_runtime.resolve_runtime(model, provider)
    except ApiError as exc:
        log.info("runtime provider resolution failed: %s", redact_paths(exc.message))
        runtime = {}
    if not runtime.get("api_key"):
        raise BadRequest("No provider configured -- cannot compress.")
    return model, provider or runtime.get("provider"), runtime


def _summary(
    original: list[Any], compressed: list[Any], before: int, after: int, focus: str | None
) -> dict[str, Any]:
    summary = agent_runtime.manual_compression_feedback(original, compressed, before, after)
    if summary is not None:
        return summary
    headline = f"Compressed: {len(original)} → {len(compressed)} messages"
    token_line = f"Rough request estimate: ~{before} → ~{after} tokens"
    note = f"Focus: {focus}" if focus else None
    reference = (
        f"[CONTEXT COMPACTION — REFERENCE ONLY] {headline}\n{token_line}\n"
        + (f"{note}\n" if note else "")
        + "Compression completed."
    )
    return {"headline": headline, "token_line": token_line, "note": note, "reference_message": reference}


def _anchor_summary(summary: dict[str, Any], compressed: list[Any]) -> str | None:
    for key in ("reference_message", "token_line", "headline"):
        value = summary.get(key)
        if isinstance(value, str) and value.strip():
            return collapse(value)
    for m in reversed(compressed):
        content = m.get("content") if isinstance(m, dict) else None
        if m.get("role") == "assistant" and isinstance(content, str):
            low = content.lower()
            if "context compaction" in low or "context compression" in low:
                return collapse(content)
    return None


def _validate_compressed(compressed: Any) -> list[dict[str, Any]]:
    if not isinstance(compressed, list) or not compressed:
        raise BadRequest("Compression failed: the compressor returned no messages")
    for row in compressed:
        if not isinstance(row, dict) or not isinstance(row.get("role"), str) or not row["role"]:
            raise BadRequest("Compression failed: the compressor returned a message without a role")
    return compressed


def _stream_state(session: models.Session) -> tuple[Any, ...]:
    return (
        session.active_stream_id,
        session.pending_user_message,
        copy.deepcopy(session.pending_attachments),
        session.pending_started_at,
    )


# ---------------------------------------------------------------------- manual compress


def manual_compress(
    session_id: str,
    focus_topic: str | None = None,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    workers: worker_pool.WorkerPool | None = None,
) -> dict[str, Any]:
    """Compress one session's model context of ``store``, its summary written by ``workers`` (the caller's
    app's; those in use when None); returns the route's answer (docs/session-model.md, "Compression")."""
    session = interrupted_turns.settled_session(session_id, store=store, turns=turns)
    focus_topic = normalise_focus(focus_topic)
    try:
        return _compress(session, focus_topic, workers)
    except ApiError:
        raise
    except Exception as exc:  # noqa: BLE001 - the agent's failures become a clear 400
        log.exception("compression of %s failed", session_id)
        raise BadRequest(f"Compression failed: {redact_paths(str(exc))}") from None


def _compress(
    session: models.Session, focus_topic: str | None, workers: worker_pool.WorkerPool | None
) -> dict[str, Any]:
    sid, home = session.session_id, session.home()
    rows_before = list(session.messages)
    original = sanitize_messages_for_api(rows_before)
    if len(original) < MIN_MESSAGES:
        raise BadRequest(f"Not enough conversation to compress (need at least {MIN_MESSAGES} messages).")
    model, provider, runtime = _resolve_provider(session)
    snapshot = list(original)
    stream_before = _stream_state(session)
    try:  # in a worker process: the summary's LLM call leaves the server
        outcome = worker_pool.side_call(
            "compress",
            {
                "session_id": sid,
                "model": model,
                "provider": provider,
                "runtime": runtime,
                "messages": snapshot,
                "focus_topic": focus_topic,
            },
            pool=workers,
        )
    except agent_runtime.ProviderNotConfigured:
        raise BadRequest("No provider configured -- cannot compress.") from None
    if outcome["aborted"]:
        raise BadRequest("Compression failed: the model could not write the summary; nothing was changed.")
    compressed = _validate_compressed(outcome["messages"])
    unchanged = not outcome["changed"] or compressed == original
    before_tokens, after_tokens = int(outcome["before_tokens"]), int(outcome["after_tokens"])
    summary = _summary(original, compressed, before_tokens, after_tokens, focus_topic)

    with lock(sid, store=home):  # the older backup is set aside before any later save can write a new one
        with edit(sid, store=home) as current:
            if current is not session:
                raise Conflict("Session was modified during compression; please retry.")
            if _stream_state(session) != stream_before:
                raise Conflict("Session stream state changed during compression; please retry.")
            if _rows_changed(rows_before, session.messages):
                raise Conflict("Session was modified during compression; please retry.")
            if unchanged:
                raise Unchanged
            _apply_manual_compression(session, compressed, summary, before_tokens, after_tokens)
        if not unchanged:
            _set_older_backup_aside(session)
    return {
        "ok": True,
        "changed": not unchanged,
        "session": _response_session(session),
        "summary": summary,
        "focus_topic": focus_topic,
    }


def _rows_changed(before: list[Any], now: list[Any]) -> bool:
    """Any row added, removed or replaced (the projection would miss a message the model never answered)."""
    return len(before) != len(now) or any(a is not b for a, b in zip(before, now, strict=True))


def _set_older_backup_aside(session: models.Session) -> None:
    """Rename a backup older than this compression to ``<sid>.json.bak.precompress-<ms>``.

    Talaria's recovery never restores it over the compressed file (other ``compression_generation``), but
    hermes-webui's startup recovery, which reads ``<sid>.json.bak`` by message count, would. Its next
    backup is written after the compression, so Talaria's own recovery keeps what it needs.
    """
    try:
        atomic.move_aside(session.backup_path, "precompress")
    except OSError as exc:
        log.warning("could not set the pre-compression backup of %s aside: %s", session.session_id, exc)


def _apply_manual_compression(
    session: models.Session,
    compressed: list[Any],
    summary: dict[str, Any],
    before_tokens: int,
    after_tokens: int,
) -> None:
    rows = copy.deepcopy(compressed)
    _stamp_missing_message_timestamps(rows)
    session.compression_undo = {
        "context_messages": session.context_messages,
        "compressed_len": len(rows),
        "truncation_watermark": session.truncation_watermark,
        "truncation_boundary": session.truncation_boundary,
        "last_prompt_tokens": session.last_prompt_tokens,
        "compression_anchor_visible_idx": session.compression_anchor_visible_idx,
        "compression_anchor_message_key": session.compression_anchor_message_key,
        "compression_anchor_summary": session.compression_anchor_summary,
        "compression_anchor_details": session.compression_anchor_details,
        "compression_anchor_mode": session.compression_anchor_mode,
        "compression_generation": session.compression_generation,
    }
    session.context_messages = rows
    session.clear_pending_turn()
    set_anchor(session, session.messages, tokens_before=before_tokens, tokens_after=after_tokens)
    session.compression_anchor_summary = _anchor_summary(summary, compressed)
    session.truncation_watermark = session.truncation_boundary = _truncation_watermark_for(rows)
    session.compression_anchor_mode = "manual"
    session.compression_generation = uuid.uuid4().hex
    # Also in a field hermes-webui keeps: its saves drop compression_generation (api/store/compression_undo.py).
    session.compression_anchor_details = {
        **session.compression_anchor_details,
        compression_undo.GENERATION_KEY: session.compression_generation,
    }
    session.last_prompt_tokens = after_tokens


def _response_session(session: models.Session) -> dict[str, Any]:
    out = session.compact()
    for name in (
        "messages",
        "tool_calls",
        "active_stream_id",
        "pending_user_message",
        "pending_attachments",
        "pending_started_at",
    ):
        out[name] = getattr(session, name)
    out["compression_anchor_visible_idx"] = session.compression_anchor_visible_idx
    out["compression_anchor_message_key"] = session.compression_anchor_message_key
    return out


# ---------------------------------------------------------------------- uncompress


def uncompress(
    session_id: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Give the model its pre-compression context back (plus every turn since)."""
    with edit(session_id, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        undo = session.compression_undo
        if not isinstance(undo, dict) or not isinstance(undo.get("context_messages"), list):
            raise Conflict("Nothing to uncompress: the context is not compressed.")
        previous = undo["context_messages"]
        compressed_len = (
            undo.get("compressed_len")
            if isinstance(undo.get("compressed_len"), int)
            else len(session.context_messages)
        )
        since = session.context_messages[compressed_len:]
        session.context_messages = previous + since if previous else []
        for name in (
            "truncation_watermark", "truncation_boundary", "last_prompt_tokens", "compression_anchor_visible_idx",
            "compression_anchor_message_key", "compression_anchor_summary", "compression_anchor_details",
            "compression_anchor_mode", "compression_generation",
        ):  # fmt: skip
            setattr(session, name, undo.get(name))
        if not isinstance(session.compression_anchor_details, dict):
            session.compression_anchor_details = {}
        if since and session.truncation_watermark:
            session.truncation_watermark = timestamp_or_ts(since[-1]) or session.truncation_watermark
        session.compression_undo = None
    return {"ok": True, "session": _response_session(session)}


# ---------------------------------------------------------------------- async jobs

_JOB_TTL_S = 600.0


class Jobs:
    """The background compressions of one app, one per session (finished ones kept ``_JOB_TTL_S`` for the
    page's poll). The app builds one (``App.jobs``) and puts it in use for the functions below."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        for sid, job in list(self._jobs.items()):
            if job["status"] != "running" and now - job["finished_at"] > _JOB_TTL_S:
                del self._jobs[sid]

    def start(
        self,
        session_id: str,
        focus_topic: str | None = None,
        *,
        store: models.Store | None = None,
        turns: turn_journal.LiveTurns | None = None,
        workers: worker_pool.WorkerPool | None = None,
    ) -> dict[str, Any]:
        """Run ``manual_compress`` in the background on the objects given (the caller's app's: the thread
        reaches no slot); poll ``status``."""
        interrupted_turns.settled_session(session_id, store=store, turns=turns)
        with self._lock:
            self._expire(time.time())
            job = self._jobs.get(session_id)
            if job and job["status"] == "running":
                return {"ok": True, "status": "running", "session_id": session_id}
            job = {"status": "running", "started_at": time.time(), "finished_at": None}
            self._jobs[session_id] = job

        def run() -> None:
            update: dict[str, Any]
            try:
                result = manual_compress(session_id, focus_topic, store=store, turns=turns, workers=workers)
                update = {"status": "done", "result": result}
            except ApiError as exc:
                update = {"status": "error", "error": exc.message, "http_status": exc.status}
            except Exception as exc:  # noqa: BLE001
                update = {
                    "status": "error",
                    "error": f"Compression failed: {redact_paths(str(exc))}",
                    "http_status": 400,
                }
            with self._lock:
                job.update(update, finished_at=time.time())

        threading.Thread(target=run, name=f"compress-{session_id}", daemon=True).start()
        return {"ok": True, "status": "running", "session_id": session_id}

    def status(self, session_id: str) -> dict[str, Any]:
        with self._lock:
            self._expire(time.time())
            job = self._jobs.get(session_id)
            if job is None:
                return {"status": "idle", "session_id": session_id}
            return {k: v for k, v in job.items() if k != "finished_at"} | {"session_id": session_id}


JOBS: InUse[Jobs] = InUse(Jobs)  # the app's (``App.jobs``), else one built on first use


def start_compress_job(
    session_id: str,
    focus_topic: str | None = None,
    jobs: Jobs | None = None,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    workers: worker_pool.WorkerPool | None = None,
) -> dict[str, Any]:
    """Run ``manual_compress`` in the background among ``jobs``, on ``store`` with ``turns`` and ``workers``
    (the app's; those in use when None); poll ``compress_job_status``."""
    return JOBS.get(jobs).start(session_id, focus_topic, store=store, turns=turns, workers=workers)


def compress_job_status(session_id: str, jobs: Jobs | None = None) -> dict[str, Any]:
    return JOBS.get(jobs).status(session_id)


# ---------------------------------------------------------------------- auto-compression bookkeeping


def record_auto_compression(
    session: models.Session,
    new_context: list[Any],
    visible_count_before_turn: int,
    tokens_before: int | None = None,
) -> dict[str, Any]:
    """The agent compacted its context inside a turn: store the new context and the anchor, never touch messages."""
    marker_idx = None
    for i in range(len(session.messages) - 1, -1, -1):
        if is_context_compression_marker(session.messages[i]):
            marker_idx = i
            break
    upto = (
        session.messages[:marker_idx]
        if marker_idx is not None
        else session.messages[:visible_count_before_turn]
    )
    session.context_messages = list(new_context)
    session.compression_undo = None  # the agent replaced the context; a manual undo no longer applies
    tokens_after = estimate_tokens(session.context_messages)
    set_anchor(session, upto, tokens_before=tokens_before, tokens_after=tokens_after)
    summary_row = next((m for m in new_context if is_context_compression_marker(m)), None)
    if summary_row is not None:
        session.compression_anchor_summary = collapse(str(summary_row.get("content") or ""))[:2000]
    session.post_compression_context_tokens_estimate = tokens_after or None
    return {
        "anchor_idx": session.compression_anchor_visible_idx,
        "summary": session.compression_anchor_summary,
        "tokens_before": tokens_before,
        "tokens_after": session.post_compression_context_tokens_estimate,
    }
