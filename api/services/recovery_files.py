"""Reading a session folder for recovery: each file once, bounded, never through a link that leaves the
folder; the folder's live files, backups and kept files by session id; orphan backups (docs/recovery.md).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.rules.jsonio import loads as loads_json
from api.rules.recovery_rules import message_count
from api.rules.session_fields import is_safe_session_id
from api.store import models, state_db, tombstones
from api.store.safe_read import UnsafeFile, read_regular_file

log = logging.getLogger("talaria.recovery")

KEPT_NAME = re.compile(r"([A-Za-z0-9_-]+)\.json\.(replaced|corrupt)-(\d+)")
MAX_FILE_BYTES = 512 * 1024 * 1024  # a session file larger than this is skipped, not parsed


_UNPARSED = object()


@dataclass
class Doc:
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


def read_doc(path: Path, folder: Path) -> Doc:
    """The file as recovery sees it: a link is followed only within ``folder``; problems are data."""
    try:
        found = read_regular_file(path, links_within=folder, max_bytes=MAX_FILE_BYTES)
    except UnsafeFile as exc:
        return Doc(exists=True, problem=exc.problem)
    except OSError:  # unreadable counts as unparsable (-1), as hermes-webui counts it
        return Doc(exists=True)
    return Doc() if found is None else Doc(exists=True, data=found[1])


def bak_path(live: Path) -> Path:
    return live.with_name(live.name + ".bak")


@dataclass
class Scan:
    live: dict[str, os.DirEntry[str]] = field(default_factory=dict)
    bak: dict[str, os.DirEntry[str]] = field(default_factory=dict)
    kept: list[os.DirEntry[str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    has_index: bool = False


def scan_folder(folder: Path) -> Scan:
    """One pass over the folder: live files, backups and kept files, by session id."""
    scan = Scan()
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


def state_db_has_session(sid: str, state_db_path: Path | None) -> bool:
    """Fail-open: no database, no reader or an unreadable one all count as "has the row"."""
    if state_db_path is None:
        return True
    try:
        found = state_db.has_session(sid, Path(state_db_path))
    except Exception as exc:  # noqa: BLE001
        log.warning("state.db lookup for %s failed (%s); treating it as present", sid, exc)
        return True
    return True if found is None else bool(found)


def orphan_kind(
    sid: str, entry: os.DirEntry[str], folder: Path, deleted: set[str], state_db_path: Path | None
) -> tuple[str, Doc]:
    """``orphan_backup`` (restorable), or why not: tombstoned, malformed, no state.db row, skipped."""
    bak = read_doc(Path(entry.path), folder)
    if bak.problem:
        return "skipped", bak
    if sid in deleted:
        return "orphan_backup_tombstoned", bak
    if bak.count < 0:
        return "malformed_orphan_backup", bak
    if not state_db_has_session(sid, state_db_path):
        return "orphan_backup_without_state_row", bak
    return "orphan_backup", bak


def read_deleted(folder: Path) -> set[str]:
    try:
        return tombstones.read_deleted_ids(folder)
    except Exception as exc:  # noqa: BLE001 - an unreadable tombstone must not stop recovery
        log.warning("could not read the delete tombstone in %s: %s", folder, exc)
        return set()


def rebuild_folder_index(folder: Path, *, store: models.Store | None = None) -> bool:
    try:
        models.store(store).index.rebuild_index_file(folder)
        return True
    except Exception as exc:  # noqa: BLE001
        log.warning("index rebuild after recovery failed: %s", exc)
        return False
