"""Read-only recovery audit and its readable report.

Public through ``api.services.session_recovery`` (``audit_session_recovery``; the safe repair and the CLI live
there, built on this audit). Severity of an item: ``repairable`` (the safe repair fixes
it), ``unsafe_to_repair`` (a person decides), ``info`` (nothing to do).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from api.rules.recovery_rules import (
    NO_ACTION,
    RESTORE,
    live_only_message_count,
    message_count,
    recovery_verdict,
)
from api.services.recovery_files import KEPT_NAME, Scan, orphan_kind, read_deleted, read_doc, scan_folder
from api.store import state_db, tombstones

log = logging.getLogger("talaria.recovery")

REPAIRABLE, UNSAFE, INFO = "repairable", "unsafe_to_repair", "info"

_ORPHAN_SEVERITY = {
    "orphan_backup": REPAIRABLE,
    "orphan_backup_without_state_row": UNSAFE,
    "malformed_orphan_backup": UNSAFE,
    "orphan_backup_tombstoned": INFO,
    "skipped": UNSAFE,
}


def _item(
    kind: str, severity: str, sid: str | None, path: Path | None, detail: str, **extra: Any
) -> dict[str, Any]:
    return {
        "kind": kind,
        "severity": severity,
        "session_id": sid,
        "path": str(path) if path else None,
        "detail": detail,
        **extra,
    }


def _live_items(folder: Path, scan: Scan, docs: dict[str, Any]) -> list[dict[str, Any]]:
    items = []
    for sid in sorted(scan.live):
        entry = scan.live[sid]
        path = Path(entry.path)
        live = read_doc(path, folder)
        docs[sid] = live.doc
        if live.problem:
            items.append(_item("unsafe_file", UNSAFE, sid, path, f"not read: {live.problem}"))
            continue
        bak_entry = scan.bak.get(sid)
        if bak_entry is not None:
            bak = read_doc(Path(bak_entry.path), folder)
            status = recovery_verdict(live.doc, bak.doc) if not bak.problem else {"recommend": NO_ACTION}
            if status["recommend"] == RESTORE:
                live_only = live_only_message_count(live.doc, bak.doc)
                items.append(
                    _item(
                        "shrunken_live",
                        REPAIRABLE,
                        sid,
                        path,
                        f"live has {status['live_messages']} messages, backup {status['bak_messages']}; "
                        f"restore keeps the live file aside ({live_only if live_only >= 0 else '?'} live-only)",
                        live_messages=status["live_messages"],
                        bak_messages=status["bak_messages"],
                        live_only_messages=live_only,
                    )
                )
                continue
        if live.count < 0:
            items.append(
                _item(
                    "corrupt_live",
                    UNSAFE,
                    sid,
                    path,
                    "the session file cannot be parsed and has no usable backup",
                )
            )
        elif isinstance(live.doc, dict) and (
            live.doc.get("pending_user_message") or live.doc.get("active_stream_id")
        ):
            items.append(
                _item(
                    "turn_journal_pending_turn",
                    INFO,
                    sid,
                    path,
                    "a turn was in flight when this file was saved",
                )
            )
    return items


def _orphan_items(folder: Path, scan: Scan, state_db_path: Path | None) -> list[dict[str, Any]]:
    orphans = [sid for sid in sorted(scan.bak) if sid not in scan.live]
    if not orphans:
        return []
    deleted = read_deleted(folder)
    items = []
    for sid in orphans:
        entry = scan.bak[sid]
        kind, bak = orphan_kind(sid, entry, folder, deleted, state_db_path)
        detail = {
            "orphan_backup": f"only the backup exists ({bak.count} messages); the repair recreates the session",
            "orphan_backup_without_state_row": "only the backup exists and state.db has no such session",
            "malformed_orphan_backup": "only the backup exists and it cannot be parsed",
            "orphan_backup_tombstoned": "backup of a session deleted in the web UI",
            "skipped": f"not read: {bak.problem}",
        }[kind]
        items.append(
            _item(
                kind if kind != "skipped" else "unsafe_file",
                _ORPHAN_SEVERITY[kind],
                sid,
                Path(entry.path),
                detail,
            )
        )
    return items


def _kept_items(folder: Path, scan: Scan, docs: dict[str, Any]) -> list[dict[str, Any]]:
    items = []
    for entry in sorted(scan.kept, key=lambda e: e.name):
        match = KEPT_NAME.fullmatch(entry.name)
        if match is None:  # the scan keeps only names that match
            continue
        stem, tag = match.group(1), match.group(2)
        sid = None if stem.startswith("_") else stem
        path = Path(entry.path)
        if tag == "corrupt":
            items.append(
                _item(
                    "kept_corrupt_file",
                    UNSAFE,
                    sid,
                    path,
                    "an unparsable file kept before it was overwritten",
                )
            )
            continue
        kept = read_doc(path, folder)
        live_only = live_only_message_count(kept.doc, docs.get(stem)) if sid else -1
        severity = UNSAFE if live_only > 0 else INFO
        detail = f"file replaced by a restore; {live_only if live_only >= 0 else '?'} message(s) not in the current file"
        items.append(_item("kept_replaced_file", severity, sid, path, detail, live_only_messages=live_only))
    return items


def _index_items(folder: Path, scan: Scan, docs: dict[str, Any]) -> list[dict[str, Any]]:
    index_file = folder / "_index.json"
    if not index_file.exists():
        return (
            [_item("index_missing", REPAIRABLE, None, index_file, "the sidebar index is missing")]
            if scan.live
            else []
        )
    doc = read_doc(index_file, folder)
    if not isinstance(doc.doc, list):
        return [_item("index_unreadable", REPAIRABLE, None, index_file, "the sidebar index cannot be parsed")]
    rows = {row.get("session_id") for row in doc.doc if isinstance(row, dict)}
    items = [
        _item(
            "index_missing_file", REPAIRABLE, sid, index_file, "the index lists a session whose file is gone"
        )
        for sid in sorted(s for s in rows if isinstance(s, str) and s not in scan.live)
    ]
    items += [
        _item("index_missing_entry", REPAIRABLE, sid, index_file, "a session file the index does not list")
        for sid in sorted(s for s in scan.live if s not in rows and message_count(docs.get(s)) >= 0)
    ]  # an unparsable file cannot have a row; it is reported as corrupt_live
    return items


def _state_db_items(folder: Path, scan: Scan, state_db_path: Path | None) -> list[dict[str, Any]]:
    """Web-UI sessions the agent's database knows but the folder does not (and deleted ones it still holds)."""
    if state_db_path is None:
        return []
    try:
        ids = state_db.session_ids(Path(state_db_path))
        # Read once, kept by nobody: the whole list would push the sidebar's listing out of a store's keeping.
        whole = state_db.Reads()
        rows = state_db.list_agent_sessions(Path(state_db_path), limit=1_000_000, reads=whole) if ids else []
    except Exception as exc:  # noqa: BLE001 - the audit reports what it can
        log.warning("audit could not read state.db: %s", exc)
        return []
    if not ids:
        return []
    deleted = read_deleted(folder)
    try:
        pruned = tombstones.read_pruned_ids(folder)
    except Exception:  # noqa: BLE001
        pruned = set()
    items = [
        _item(
            "state_db_deleted_webui_tombstone",
            INFO,
            sid,
            None,
            "state.db still has a session deleted in the web UI",
        )
        for sid in sorted(ids & deleted)
    ]
    for row in rows:
        sid = row.get("id")
        if row.get("source") != "webui" or not isinstance(sid, str) or sid in scan.live or sid in scan.bak:
            continue
        if sid in deleted or sid in pruned:
            continue
        if not row.get("message_count"):
            items.append(
                _item(
                    "state_db_orphan_webui_row",
                    INFO,
                    sid,
                    None,
                    "an empty web-UI session known only to state.db",
                )
            )
        else:
            detail = (
                f"a web-UI session with {row['message_count']} message(s) in state.db has no session file"
            )
            items.append(_item("state_db_missing_sidecar", UNSAFE, sid, None, detail))
    return items


def audit(session_dir: Path, state_db_path: Path | None = None) -> dict[str, Any]:
    folder = Path(session_dir)
    report: dict[str, Any] = {
        "status": "ok",
        "session_dir": str(folder),
        "summary": {"ok": 0, "repairable": 0, "unsafe_to_repair": 0},
        "items": [],
    }
    if not folder.is_dir():
        return report
    scan = scan_folder(folder)
    docs: dict[str, Any] = {}
    items = _live_items(folder, scan, docs)
    items += _orphan_items(folder, scan, state_db_path)
    items += _kept_items(folder, scan, docs)
    items += _index_items(folder, scan, docs)
    items += _state_db_items(folder, scan, state_db_path)
    items += [
        _item("unrecognised_name", INFO, None, folder / name, "not a session id; recovery ignores it")
        for name in scan.skipped
    ]
    flagged = {i["session_id"] for i in items if i["severity"] != INFO and i["session_id"] in scan.live}
    summary = report["summary"]
    summary["ok"] = len(scan.live) - len(flagged)
    summary["repairable"] = sum(i["severity"] == REPAIRABLE for i in items)
    summary["unsafe_to_repair"] = sum(i["severity"] == UNSAFE for i in items)
    report["status"] = (
        "needs_manual_review" if summary["unsafe_to_repair"] else "warn" if summary["repairable"] else "ok"
    )
    report["items"] = items
    return report


def _format_audit(report: dict[str, Any]) -> list[str]:
    s = report["summary"]
    lines = [
        f"status: {report['status']}   ok: {s['ok']}   repairable: {s['repairable']}   unsafe to repair: {s['unsafe_to_repair']}"
    ]
    for item in report["items"]:
        who = item["session_id"] or Path(item["path"] or "").name
        lines.append(f"  {item['severity']:<16} {item['kind']:<33} {who}: {item['detail']}")
    return lines


def format_report(result: dict[str, Any]) -> str:
    """A readable report of an audit or of a safe repair."""
    lines = [f"Session recovery — {result.get('session_dir')}"]
    if "recovery" in result:
        r = result["recovery"]
        lines += ["", "before:", *_format_audit(result["before"]), ""]
        lines.append(
            f"repair: restored {r['restored']} session(s) of {r['scanned']} scanned "
            f"({r['orphaned_backups']} from orphan backups); index rebuilt: {'yes' if r.get('index_rebuilt') else 'no'}"
        )
        for d in r["details"]:
            lines.append(
                f"  restored {d['session_id']}: {d['live_messages']} -> {d['bak_messages']} messages; kept {d['kept_path']}"
            )
        for e in r.get("errors", []):
            lines.append(f"  error {e['session_id']}: {e['error']}")
        lines += ["", "after:", *_format_audit(result["after"])]
    else:
        lines += _format_audit(result)
    return "\n".join(lines)
