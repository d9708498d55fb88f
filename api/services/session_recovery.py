"""Startup recovery: restore genuine losses from ``<sid>.json.bak``, never an intentional shrink.

The decisions are pure functions over parsed documents (``recovery_verdict(live, bak)``, see
docs/recovery.md, "Verdicts"). The I/O around them reads each candidate once,
keeps whatever a restore replaces (``<sid>.json.replaced-<ms>`` / ``.corrupt-<ms>``), and writes
through ``api.store.atomic`` so every restore is on disk when the sweep returns. The read-only audit and the
safe repair are built in ``api.services.recovery_audit``; their public names and the CLI are here.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from api.rules.recovery_rules import (  # noqa: F401 - public names of recovery, re-exported here
    NO_ACTION,
    NO_BACKUP,
    RESTORE,
    live_only_message_count,
    message_count,
    recovery_verdict,
)
from api.rules.session_fields import is_safe_session_id
from api.services import recovery_audit
from api.services.recovery_files import (
    Doc,
    bak_path,
    orphan_kind,
    read_deleted,
    read_doc,
    rebuild_folder_index,
    scan_folder,
)
from api.store import atomic, config, models, settings_table

log = logging.getLogger("talaria.recovery")


# ---------------------------------------------------------------------------------------------
# Restoring (batched: one folder sync for all keep-asides, one for all replacements)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Plan:
    sid: str
    live: Path
    live_doc: Doc
    bak_doc: Doc
    status: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)


def _status(sid: str, live: Doc, bak: Doc, bak_exists: bool) -> dict[str, Any]:
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


def _after_restore(folder: Path, sids: list[str], store: models.Store | None) -> None:
    """Let the sidebar index and the session cache (of ``store``, the caller's app's) see the restored files."""
    if not sids:
        return
    try:
        models.store(store).index.forget(folder)
    except Exception as exc:  # noqa: BLE001 - the index is a cache; recovery must not fail on it
        log.warning("could not reset the session index after recovery: %s", exc)
    try:
        home = models.store(store)
        if home.session_dir == folder:
            for sid in sids:
                home.drop(sid)
    except Exception as exc:  # noqa: BLE001
        log.warning("could not drop restored sessions from the cache: %s", exc)


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def _inspect(path: Path) -> tuple[dict[str, Any], Doc, Doc]:
    folder = path.parent
    sid = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    bak = read_doc(bak_path(path), folder)
    live = read_doc(path, folder)
    status = _status(sid, live, bak, bak.exists)
    problem = live.problem or bak.problem
    if problem:
        status.update(recommend=NO_ACTION, skipped=problem)
    return status, live, bak


def inspect_session_recovery_status(path: Path) -> dict[str, Any]:
    """The recovery verdict for one live path ``<sid>.json`` (its ``.bak`` beside it); reads only."""
    return _inspect(Path(path))[0]


def recover_session(path: Path) -> dict[str, Any]:
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
    _after_restore(path.parent, [sid] if plan.result["restored"] else [], None)
    return plan.result


def recover_all_sessions_on_startup(
    session_dir: Path,
    rebuild_index: bool = False,
    state_db_path: Path | None = None,
    *,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """Sweep a session folder, restoring every genuine loss (and every orphan backup of a live session).

    Returns ``{"scanned", "restored", "orphaned_backups", "details", "errors", "index_rebuilt"}``;
    ``details`` holds the result of each restore. Never raises.
    """
    result: dict[str, Any] = {
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
        scan = scan_folder(folder)
        plans: list[_Plan] = []
        deleted = read_deleted(folder) if any(sid not in scan.live for sid in scan.bak) else set()
        for sid in sorted(scan.bak):
            bak_entry = scan.bak[sid]
            live_entry = scan.live.get(sid)
            try:
                if live_entry is not None:
                    live = read_doc(Path(live_entry.path), folder)
                    bak = read_doc(Path(bak_entry.path), folder)
                    if live.data is not None and live.data == bak.data:
                        continue  # already restored (the .bak is kept): nothing to decide or parse
                else:
                    live = Doc()
                    kind, bak = orphan_kind(sid, bak_entry, folder, deleted, state_db_path)
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
        _after_restore(folder, restored, store)
        if rebuild_index and (restored or not (folder / "_index.json").exists()):
            result["index_rebuilt"] = rebuild_folder_index(folder, store=store)
    except Exception as exc:  # noqa: BLE001 - startup must go on whatever the folder holds
        log.exception("startup recovery of %s stopped early", folder)
        result["errors"].append({"session_id": None, "error": str(exc)})
    return result


def audit_session_recovery(session_dir: Path, state_db_path: Path | None = None) -> dict[str, Any]:
    """Read-only report ``{"status": ok|warn|needs_manual_review, "summary", "items"}`` of a session folder."""
    return recovery_audit.audit(session_dir, state_db_path)


def repair_safe_session_recovery(
    session_dir: Path, state_db_path: Path | None = None, *, store: models.Store | None = None
) -> dict[str, Any]:
    """Audit, restore what is safe (startup recovery with an index rebuild), rebuild a stale index, audit
    again; ``{"status", "session_dir", "before", "recovery", "after"}``."""
    folder = Path(session_dir)
    before = recovery_audit.audit(folder, state_db_path)
    recovery = recover_all_sessions_on_startup(
        folder, rebuild_index=True, state_db_path=state_db_path, store=store
    )
    stale_index = any(i["kind"].startswith("index_") for i in before["items"])
    if stale_index and not recovery.get("index_rebuilt") and folder.is_dir():
        recovery["index_rebuilt"] = rebuild_folder_index(folder, store=store)
    after = recovery_audit.audit(folder, state_db_path)
    return {
        "status": after["status"],
        "session_dir": str(folder),
        "before": before,
        "recovery": recovery,
        "after": after,
    }


# The routes' answers name files relative to the state folder: the server's own folders stay on the server.


def audit_live_sessions(*, store: models.Store | None = None) -> dict[str, Any]:
    """The audit of the server's own session folder (``store``'s) and state.db (the recovery audit route)."""
    folder = models.store(store).session_dir
    return cast(
        "dict[str, Any]", relative_to(folder.parent, audit_session_recovery(folder, config.STATE_DB_PATH))
    )


def repair_safe_live_sessions(*, store: models.Store | None = None) -> dict[str, Any]:
    """The safe repair of the server's own session folder (``store``'s) and state.db (the repair-safe route)."""
    folder = models.store(store).session_dir
    repaired = repair_safe_session_recovery(folder, config.STATE_DB_PATH, store=store)
    return cast("dict[str, Any]", relative_to(folder.parent, repaired))


def relative_to(folder: Path, report: Any) -> Any:
    """``report`` (JSON-shaped) with ``folder``'s absolute path, in every string, made relative to it."""
    prefix = str(folder)

    def relative(item: Any) -> Any:
        if isinstance(item, str):
            return "." if item == prefix else item.replace(prefix + os.sep, "")
        if isinstance(item, dict):
            return {key: relative(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [relative(inner) for inner in item]
        return item

    return relative(report)


_EXIT = {"ok": 0, "warn": 1, "needs_manual_review": 2}


def main(argv: list[str] | None = None) -> int:
    """CLI ``--audit | --repair-safe [--session-dir D] [--state-db F] [--json]``; exit 0 ok, 1 warn, 2 review."""
    # Lenient: a setting this command does not use (a bad port) must not stand between a person and an audit.
    config.configure(settings_table.load_settings(strict=False))
    parser = argparse.ArgumentParser(prog="python -m api.services.session_recovery", description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--audit", action="store_true", help="report what recovery would do; changes nothing")
    action.add_argument(
        "--repair-safe", action="store_true", help="restore genuine losses and rebuild the index"
    )
    parser.add_argument(
        "--session-dir", type=Path, default=config.sessions_folder(), help="default: %(default)s"
    )
    parser.add_argument("--state-db", type=Path, default=config.STATE_DB_PATH, help="default: %(default)s")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.audit:
        result = audit_session_recovery(args.session_dir, args.state_db)
    else:
        result = repair_safe_session_recovery(args.session_dir, args.state_db)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    else:
        print(recovery_audit.format_report(result))
    return _EXIT.get(result["status"], 2)


if __name__ == "__main__":
    raise SystemExit(main())
