"""Startup recovery: restore genuine losses from ``<sid>.json.bak``, never an intentional shrink.

The decisions are pure functions over parsed documents (``recovery_verdict(live, bak)``, see
docs/recovery.md, "Verdicts"). The I/O around them reads each candidate once,
keeps whatever a restore replaces (``<sid>.json.replaced-<ms>`` / ``.corrupt-<ms>``), and writes
through ``api.atomic`` so every restore is on disk when the sweep returns. The read-only audit and the
safe repair are built in ``api.recovery_audit``; their public names and the CLI are here.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from api import atomic, models, session_index, tombstones
from api.models import loads_json
from api.reconcile import _context_messages_include_compression_marker
from api.session_fields import is_safe_session_id

log = logging.getLogger("talaria.recovery")

RESTORE, NO_ACTION, NO_BACKUP = "restore", "no_action", "no_backup"
UUID4_HEX = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")
KEPT_NAME = re.compile(r"([A-Za-z0-9_-]+)\.json\.(replaced|corrupt)-(\d+)")
MAX_FILE_BYTES = 512 * 1024 * 1024  # a session file larger than this is skipped, not parsed

# ---------------------------------------------------------------------------------------------
# Pure decisions (documents are whatever JSON parsed to; None = unreadable or unparsable)
# ---------------------------------------------------------------------------------------------


def message_count(doc: Any) -> int:
    """``len(messages)``, or -1 when ``doc`` is not a session document."""
    msgs = doc.get("messages") if isinstance(doc, dict) else None
    return len(msgs) if isinstance(msgs, list) else -1


def _get(doc: Any, key: str) -> Any:
    return doc.get(key) if isinstance(doc, dict) else None


def _list(doc: Any, key: str) -> list:
    value = _get(doc, key)
    return value if isinstance(value, list) else []


def _is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0.0


def _is_manual(live: Any) -> bool:
    mode = _get(live, "compression_anchor_mode")
    return isinstance(mode, str) and mode.strip().lower() == "manual"


def _compression_generation(doc: Any) -> str | None:
    gen = _get(doc, "compression_generation")
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
    if _context_messages_include_compression_marker(bak_ctx):
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
    return other != gen


def recovery_verdict(live: Any, bak: Any, *, bak_exists: bool = True) -> dict:
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


def _message_key(msg: Any) -> tuple:
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


# ---------------------------------------------------------------------------------------------
# Reading files (once each, bounded, never through a link that leaves the folder)
# ---------------------------------------------------------------------------------------------


_UNPARSED = object()


@dataclass
class _Doc:
    exists: bool = False
    data: bytes | None = None
    problem: str | None = None  # set when the file must not be touched (link outside, not a file, too big)
    _doc: Any = _UNPARSED

    @property
    def doc(self) -> Any:
        """The parsed JSON (on first use), or None when unreadable or unparsable."""
        if self._doc is _UNPARSED:
            try:
                self._doc = loads_json(self.data) if self.data is not None else None
            except (ValueError, UnicodeDecodeError, RecursionError):
                self._doc = None
        return self._doc

    @property
    def count(self) -> int:
        return message_count(self.doc)


def _inside(path: Path, folder: Path) -> bool:
    try:
        real = Path(os.path.realpath(path))
        return real.parent == Path(os.path.realpath(folder))
    except (OSError, ValueError):
        return False


def _read_doc(path: Path, folder: Path, *, is_link: bool | None = None) -> _Doc:
    if is_link is None:
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except FileNotFoundError:
            return _Doc()
        except OSError as exc:
            return _Doc(exists=True, problem=f"unreadable: {exc}")
    if is_link and not _inside(path, folder):
        return _Doc(exists=True, problem="symlink leading outside the session folder")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return _Doc()
    except OSError:  # unreadable counts as unparsable (-1), as hermes-webui counts it
        return _Doc(exists=True)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return _Doc(exists=True, problem="not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            return _Doc(exists=True, problem=f"larger than {MAX_FILE_BYTES} bytes")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    except OSError:
        return _Doc(exists=True)
    finally:
        os.close(fd)
    return _Doc(exists=True, data=data)


def _bak_path(live: Path) -> Path:
    return live.with_name(live.name + ".bak")


# ---------------------------------------------------------------------------------------------
# Restoring (batched: one folder sync for all keep-asides, one for all replacements)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Plan:
    sid: str
    live: Path
    live_doc: _Doc
    bak_doc: _Doc
    status: dict
    result: dict = field(default_factory=dict)


def _status(sid: str, live: _Doc, bak: _Doc, bak_exists: bool) -> dict:
    return {"session_id": sid, **recovery_verdict(live.doc, bak.doc, bak_exists=bak_exists)}


def _restore(folder: Path, plans: list[_Plan]) -> None:
    """Keep each live file aside, then durably write the inspected backup bytes over it."""
    ready: list[_Plan] = []
    kept_any = False
    for plan in plans:
        plan.result = {**plan.status, "restored": False, "kept_path": None}
        try:
            if plan.live_doc.exists:
                tag = "replaced" if plan.live_doc.count >= 0 else "corrupt"
                kept = atomic.keep_aside(plan.live, tag, sync_dir=False, link=True)
                plan.result["kept_path"] = str(kept) if kept else None
                kept_any = kept_any or kept is not None
            ready.append(plan)
        except OSError as exc:  # without a kept copy nothing is replaced
            plan.result["error"] = f"could not keep the live file: {exc}"
            log.error("recovery of %s skipped: %s", plan.sid, plan.result["error"])
    if kept_any:
        atomic.fsync_dir(folder)
    wrote_any = False
    for plan in ready:
        try:
            atomic.write_bytes_durable(plan.live, plan.bak_doc.data or b"", sync_dir=False)
            wrote_any = True
            plan.result["restored"] = True
            plan.result["live_only_messages"] = live_only_message_count(plan.live_doc.doc, plan.bak_doc.doc)
            log.info(
                "restored %s from its backup (%s -> %s messages; previous file kept as %s)",
                plan.sid,
                plan.status["live_messages"],
                plan.status["bak_messages"],
                plan.result["kept_path"],
            )
        except OSError as exc:
            plan.result["error"] = str(exc)
            log.error("restoring %s failed: %s", plan.sid, exc)
    if wrote_any:
        atomic.fsync_dir(folder)
        done = [p.sid for p in ready if p.result["restored"]]
        log.warning(
            "restored %d session(s) from their backups (replaced files kept): %s",
            len(done),
            ", ".join(done[:20]),
        )


def _after_restore(folder: Path, sids: list[str]) -> None:
    """Let the sidebar index and the session cache see the restored files."""
    if not sids:
        return
    try:
        session_index.forget(folder)
    except Exception as exc:  # noqa: BLE001 - the index is a cache; recovery must not fail on it
        log.warning("could not reset the session index after recovery: %s", exc)
    try:
        if Path(models.SESSION_DIR) == folder:
            with models.LOCK:
                for sid in sids:
                    models.SESSIONS.pop(sid, None)
    except Exception as exc:  # noqa: BLE001
        log.warning("could not drop restored sessions from the cache: %s", exc)


def _rebuild_index(folder: Path) -> bool:
    try:
        session_index.rebuild_index_file(folder)
        return True
    except Exception as exc:  # noqa: BLE001
        log.warning("index rebuild after recovery failed: %s", exc)
        return False


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def _inspect(path: Path) -> tuple[dict, _Doc, _Doc]:
    folder = path.parent
    sid = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    bak = _read_doc(_bak_path(path), folder)
    live = _read_doc(path, folder)
    status = _status(sid, live, bak, bak.exists)
    problem = live.problem or bak.problem
    if problem:
        status.update(recommend=NO_ACTION, skipped=problem)
    return status, live, bak


def inspect_session_recovery_status(path: Path) -> dict:
    """The recovery verdict for one live path ``<sid>.json`` (its ``.bak`` beside it); reads only."""
    return _inspect(Path(path))[0]


def recover_session(path: Path) -> dict:
    """Restore one session from its backup when the verdict is ``restore``; the replaced file is kept."""
    path = Path(path)
    status, live, bak = _inspect(path)
    if status["recommend"] != RESTORE:
        return {**status, "restored": False}
    sid = status["session_id"]
    if not is_safe_session_id(sid):
        return {**status, "restored": False, "skipped": "not a session file name"}
    plan = _Plan(sid, path, live, bak, status)
    _restore(path.parent, [plan])
    _after_restore(path.parent, [sid] if plan.result["restored"] else [])
    return plan.result


@dataclass
class _Scan:
    live: dict[str, os.DirEntry] = field(default_factory=dict)
    bak: dict[str, os.DirEntry] = field(default_factory=dict)
    kept: list[os.DirEntry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    has_index: bool = False


def _scan(folder: Path) -> _Scan:
    """One pass over the folder: live files, backups and kept files, by session id."""
    scan = _Scan()
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if name.endswith(".json"):
                stem, bucket = name[:-5], scan.live
            elif name.endswith(".json.bak"):
                stem, bucket = name[:-9], scan.bak
            else:
                if KEPT_NAME.fullmatch(name):
                    scan.kept.append(entry)
                continue
            if name.startswith("_"):
                scan.has_index = scan.has_index or name == "_index.json"
                continue
            if not is_safe_session_id(stem):
                scan.skipped.append(name)
                continue
            bucket[stem] = entry
    if scan.skipped:
        log.warning(
            "recovery skips %d file(s) whose names are not session ids: %r",
            len(scan.skipped),
            scan.skipped[:5],
        )
    return scan


def _state_db_has_session(sid: str, state_db_path: Path | None) -> bool:
    """Fail-open: no database, no reader or an unreadable one all count as "has the row"."""
    if state_db_path is None:
        return True
    try:
        from api import state_db

        found = state_db.has_session(sid, Path(state_db_path))
    except Exception as exc:  # noqa: BLE001
        log.warning("state.db lookup for %s failed (%s); treating it as present", sid, exc)
        return True
    return True if found is None else bool(found)


def _orphan_kind(
    sid: str, entry: os.DirEntry, folder: Path, deleted: set[str], state_db_path
) -> tuple[str, _Doc]:
    """``orphan_backup`` (restorable), or why not: tombstoned, malformed, no state.db row, skipped."""
    bak = _read_doc(Path(entry.path), folder, is_link=entry.is_symlink())
    if bak.problem:
        return "skipped", bak
    if sid in deleted:
        return "orphan_backup_tombstoned", bak
    if bak.count < 0:
        return "malformed_orphan_backup", bak
    if not _state_db_has_session(sid, state_db_path):
        return "orphan_backup_without_state_row", bak
    return "orphan_backup", bak


def _read_deleted(folder: Path) -> set[str]:
    try:
        return tombstones.read_deleted_ids(folder)
    except Exception as exc:  # noqa: BLE001 - an unreadable tombstone must not stop recovery
        log.warning("could not read the delete tombstone in %s: %s", folder, exc)
        return set()


def recover_all_sessions_on_startup(
    session_dir: Path, rebuild_index: bool = False, state_db_path: Path | None = None
) -> dict:
    """Sweep a session folder, restoring every genuine loss (and every orphan backup of a live session).

    Returns ``{"scanned", "restored", "orphaned_backups", "details", "errors", "index_rebuilt"}``;
    ``details`` holds the result of each restore. Never raises.
    """
    result: dict = {
        "scanned": 0,
        "restored": 0,
        "orphaned_backups": 0,
        "details": [],
        "errors": [],
        "index_rebuilt": False,
    }
    folder = Path(session_dir)
    try:
        if not folder.is_dir():
            return result
        scan = _scan(folder)
        plans: list[_Plan] = []
        deleted = _read_deleted(folder) if any(sid not in scan.live for sid in scan.bak) else set()
        for sid in sorted(scan.bak):
            bak_entry = scan.bak[sid]
            live_entry = scan.live.get(sid)
            try:
                if live_entry is not None:
                    live = _read_doc(Path(live_entry.path), folder, is_link=live_entry.is_symlink())
                    bak = _read_doc(Path(bak_entry.path), folder, is_link=bak_entry.is_symlink())
                    if live.data is not None and live.data == bak.data:
                        continue  # already restored (the .bak is kept): nothing to decide or parse
                else:
                    live = _Doc()
                    kind, bak = _orphan_kind(sid, bak_entry, folder, deleted, state_db_path)
                    if kind != "orphan_backup":
                        if kind == "skipped":
                            log.warning("orphan backup %s skipped: %s", bak_entry.name, bak.problem)
                        continue
                    result["orphaned_backups"] += 1
                if live.problem or bak.problem:
                    log.warning("recovery skips %s: %s", sid, live.problem or bak.problem)
                    continue
                status = _status(sid, live, bak, True)
                if status["recommend"] == RESTORE:
                    plans.append(_Plan(sid, Path(folder, f"{sid}.json"), live, bak, status))
            except Exception as exc:  # noqa: BLE001 - one broken session never stops the sweep
                log.exception("recovery of %s failed", sid)
                result["errors"].append({"session_id": sid, "error": str(exc)})
        result["scanned"] = len(scan.live) + result["orphaned_backups"]
        _restore(folder, plans)
        restored = [p.sid for p in plans if p.result.get("restored")]
        result["details"] = [p.result for p in plans if p.result.get("restored")]
        result["errors"].extend(
            {"session_id": p.sid, "error": p.result["error"]} for p in plans if "error" in p.result
        )
        result["restored"] = len(restored)
        _after_restore(folder, restored)
        if rebuild_index and (restored or not (folder / "_index.json").exists()):
            result["index_rebuilt"] = _rebuild_index(folder)
    except Exception as exc:  # noqa: BLE001 - startup must go on whatever the folder holds
        log.exception("startup recovery of %s stopped early", folder)
        result["errors"].append({"session_id": None, "error": str(exc)})
    return result


def audit_session_recovery(session_dir: Path, state_db_path: Path | None = None) -> dict:
    """Read-only report ``{"status": ok|warn|needs_manual_review, "summary", "items"}`` of a session folder."""
    from api import recovery_audit

    return recovery_audit.audit(session_dir, state_db_path)


def repair_safe_session_recovery(session_dir: Path, state_db_path: Path | None = None) -> dict:
    """Audit, restore what is safe to restore, rebuild the index, audit again; ``{"status", "before", "recovery", "after"}``."""
    from api import recovery_audit

    return recovery_audit.repair_safe(session_dir, state_db_path)


def main(argv: list[str] | None = None) -> int:
    """CLI ``--audit | --repair-safe [--session-dir D] [--state-db F] [--json]``; exit 0 ok, 1 warn, 2 review."""
    from api import recovery_audit

    return recovery_audit.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
