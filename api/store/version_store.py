"""The versions a session does not show, each kept in a file beside the session file.

``<sid>.json.version-<id>`` holds one version's tail in the shape of a session branch: ``session_id`` (the
version's id), ``parent_session_id`` (the session it belongs to), ``session_source: "version"``,
``fork_index`` (the transcript index it starts at), ``messages`` (its rows from there on),
``context_tail`` (the model context's rows for them; null when the transcript was the context) and
``message_versions`` (the groups inside the tail). The session file stays linear: a version is shown by
copying its rows into it. Neither Talaria nor hermes-webui takes the name for a session or a backup, so
the file never appears in a sidebar. A kept file is written before the session file that names it and
removed only after a save stopped naming it.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from api.rules import jsonio, version_rules
from api.rules.errors import Conflict
from api.store import atomic
from api.store.session_files import read_session_file

log = logging.getLogger("talaria.versions")

SOURCE = "version"


def version_path(session_path: Path, version_id: str) -> Path:
    return session_path.with_name(f"{session_path.name}.version-{version_id}")


def keep(
    session_path: Path,
    parent_id: str,
    index: int,
    messages: list[Any],
    context_tail: list[Any] | None,
    groups: list[Any],
) -> str:
    """Durably write a version's tail to a new kept file; answers its id."""
    version_id = uuid.uuid4().hex
    doc = {
        "session_id": version_id,
        "parent_session_id": parent_id,
        "session_source": SOURCE,
        "fork_index": index,
        "messages": messages,
        "context_tail": context_tail,
        "message_versions": groups,
    }
    atomic.write_bytes_durable(version_path(session_path, version_id), jsonio.dumps_document(doc))
    return version_id


def load(session_path: Path, version_id: str) -> dict[str, Any]:
    """A kept version's document; ``Conflict`` when its file is gone or unreadable (nothing is changed)."""
    if not version_rules.VERSION_ID.fullmatch(version_id):
        raise Conflict("That version's file is missing.")
    try:
        found = read_session_file(version_path(session_path, version_id))
        doc: Any = jsonio.loads(found[1]) if found is not None else None
    except (OSError, ValueError) as exc:
        log.warning("version %s of %s cannot be read: %s", version_id, session_path.name, exc)
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise Conflict("That version's file is missing or unreadable; nothing was changed.")
    tail = doc.get("context_tail")
    doc["context_tail"] = tail if isinstance(tail, list) else None
    doc["message_versions"] = version_rules.groups_of(doc.get("message_versions"))
    return doc


def reachable(session_path: Path, groups: list[dict[str, Any]]) -> set[str]:
    """Every kept id the groups name, and those named inside the tails they name (unreadable ones stop)."""
    found: set[str] = set()
    todo = version_rules.kept_ids(groups)
    while todo:
        version_id = todo.pop()
        if version_id in found:
            continue
        found.add(version_id)
        try:
            todo.extend(version_rules.kept_ids(load(session_path, version_id)["message_versions"]))
        except Conflict:
            continue
    return found


def remove(session_path: Path, version_ids: set[str]) -> None:
    """Remove kept files no save names any more (after the save that stopped naming them)."""
    for version_id in sorted(version_ids):
        try:
            atomic.unlink_durable(version_path(session_path, version_id))
        except OSError as exc:
            log.warning("version %s of %s cannot be removed: %s", version_id, session_path.name, exc)
