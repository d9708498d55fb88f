"""Recovery verdicts: pure decisions over a session file and its backup (docs/recovery.md, "Verdicts").

Documents are whatever JSON parsed to; None stands for an unreadable or unparsable file.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import orjson

from api.rules.message_keys import context_messages_include_compression_marker

RESTORE, NO_ACTION, NO_BACKUP = "restore", "no_action", "no_backup"
UUID4_HEX = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")


def message_count(doc: Any) -> int:
    """``len(messages)``, or -1 when ``doc`` is not a session document."""
    msgs = doc.get("messages") if isinstance(doc, dict) else None
    return len(msgs) if isinstance(msgs, list) else -1


def _get(doc: Any, key: str) -> Any:
    return doc.get(key) if isinstance(doc, dict) else None


def _list(doc: Any, key: str) -> list[Any]:
    value = _get(doc, key)
    return value if isinstance(value, list) else []


def _is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0.0


def _is_manual(live: Any) -> bool:
    mode = _get(live, "compression_anchor_mode")
    return isinstance(mode, str) and mode.strip().lower() == "manual"


def _compression_generation(doc: Any) -> str | None:
    """The generation at the top of the file, else in ``compression_anchor_details`` (where it survives a
    save by hermes-webui, which drops the top-level key)."""
    details = _get(doc, "compression_anchor_details")
    gen = _get(doc, "compression_generation") or (
        details.get("compression_generation") if isinstance(details, dict) else None
    )
    return gen.strip() if isinstance(gen, str) and gen.strip() else None


def records_intentional_compress(live: Any) -> bool:
    """The live file says its context was shrunk on purpose (manual mode, or an anchored shorter context)."""
    if _is_manual(live):
        return True
    msgs, ctx = _get(live, "messages"), _get(live, "context_messages")
    if not (isinstance(msgs, list) and isinstance(ctx, list) and len(ctx) < len(msgs)):
        return False
    summary = _get(live, "compression_anchor_summary")
    if (
        isinstance(summary, str)
        and summary.strip()
        and _get(live, "compression_anchor_message_key") is not None
    ):
        return True
    return _get(live, "truncation_watermark") is not None


def backup_predates_compression(live: Any, bak: Any) -> bool:
    """True when ``bak`` was written before the live file's compression (restoring it would undo it).

    A manual compression stamps ``compression_generation``: a backup carrying the same stamp was written
    after it. Without the stamp (older files, hermes-webui's) the contexts decide: a compaction marker in the backup's context
    means post-compression; otherwise a larger backup context means pre-compression.
    """
    gen = _compression_generation(live) if _is_manual(live) else None
    if gen is not None:
        return _compression_generation(bak) != gen
    bak_ctx = _list(bak, "context_messages")
    if context_messages_include_compression_marker(bak_ctx):
        return False
    return len(bak_ctx) > len(_list(live, "context_messages"))


def _clear_generation_differs(live: Any, bak: Any) -> bool:
    gen = _get(live, "clear_generation")
    return isinstance(gen, str) and bool(gen) and gen != _get(bak, "clear_generation")


_CLEARED_STATE: tuple[tuple[str, Any], ...] = (
    ("messages", []),
    ("context_messages", []),
    ("truncation_watermark", 0.0),
    ("truncation_boundary", 0.0),
    ("active_stream_id", None),
    ("pending_user_message", None),
    ("pending_attachments", []),
    ("pending_started_at", None),
    ("pending_user_source", None),
)


def _matches(value: Any, expected: Any) -> bool:
    if expected is None:
        return value is None
    if expected == 0.0 and not isinstance(expected, list):
        return _is_zero(value)
    return isinstance(value, list) and value == expected


def records_clear_sentinel(live: Any, bak: Any) -> bool:
    """The live file is exactly the state a clear leaves, stamped with a clear the backup has not seen."""
    if not isinstance(live, dict) or not _clear_generation_differs(live, bak):
        return False
    return all(key in live and _matches(live[key], expected) for key, expected in _CLEARED_STATE)


def clear_superseded_by_new_messages(live: Any, bak: Any) -> bool:
    """A clear the backup has not seen, followed by new messages (the 0.0 watermark is never advanced)."""
    if not isinstance(live, dict) or not _clear_generation_differs(live, bak):
        return False
    msgs = live.get("messages")
    return (
        isinstance(msgs, list)
        and bool(msgs)
        and _is_zero(live.get("truncation_watermark"))
        and _is_zero(live.get("truncation_boundary"))
    )


def _uuid4_hex(value: Any) -> bool:
    return isinstance(value, str) and UUID4_HEX.fullmatch(value) is not None


def records_intentional_message_shrink(live: Any, bak: Any) -> bool:
    """Undo/retry/edit stamped the live file with a shrink generation the backup does not share."""
    gen = _get(live, "intentional_shrink_generation")
    if not _uuid4_hex(gen):
        return False
    other = _get(bak, "intentional_shrink_generation")
    if other is None:
        return True
    if not _uuid4_hex(other):
        return False
    return bool(other != gen)


def recovery_verdict(live: Any, bak: Any, *, bak_exists: bool = True) -> dict[str, Any]:
    """What startup recovery should do with one session: ``recommend`` is restore, no_action or no_backup."""
    live_n = message_count(live)
    if not bak_exists:
        return {"live_messages": live_n, "bak_messages": -1, "recommend": NO_BACKUP}
    bak_n = message_count(bak)
    out = {"live_messages": live_n, "bak_messages": bak_n}
    if bak_n <= live_n:
        return {**out, "recommend": NO_ACTION}
    if records_clear_sentinel(live, bak) or clear_superseded_by_new_messages(live, bak):
        return {**out, "recommend": NO_ACTION, "intentional_clear_truncate": True}
    if records_intentional_compress(live) and backup_predates_compression(live, bak):
        return {**out, "recommend": NO_ACTION, "intentional_compress_shrink": True}
    if records_intentional_message_shrink(live, bak):
        return {**out, "recommend": NO_ACTION, "intentional_message_shrink": True}
    return {**out, "recommend": RESTORE}


def _hashable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float):
        return repr(value)  # NaN never equals itself; its repr does
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)


def _message_key(msg: Any) -> tuple[Any, ...]:
    if isinstance(msg, dict):
        ts = msg.get("timestamp")
        key = (msg.get("role"), msg.get("content"), msg.get("_ts") if ts is None or ts == "" else ts)
    else:
        key = ("", msg, None)
    try:
        hash(key)
        return key
    except TypeError:  # list content (multimodal parts) and the like
        return tuple(_hashable(v) for v in key)


def live_only_message_count(live: Any, bak: Any) -> int:
    """Messages of ``live`` that ``bak`` lacks, keyed by (role, content, timestamp); -1 when live is unreadable."""
    if message_count(live) < 0:
        return -1
    missing = Counter(_message_key(m) for m in live["messages"])
    missing.subtract(_message_key(m) for m in _list(bak, "messages"))
    return sum(n for n in missing.values() if n > 0)
