"""What a manual compression replaced, kept beside the session file so that ``/uncompress`` survives saves
by programs that do not know it.

hermes-webui rewrites a session file with the fields its ``Session`` knows and drops the rest, so a
Talaria field inside the file would be erased by its next turn. The undo therefore lives in
``<sid>.json.undo-<generation>`` (a name neither program takes for a session or a backup); the generation
also rides in ``compression_anchor_details``, a field hermes-webui keeps. The file of another generation
than the session's is stale: it is ignored, and removed once a save has made it so.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from api.rules import jsonio
from api.store import atomic
from api.store.session_files import read_session_file

log = logging.getLogger("talaria.compression_undo")

GENERATION_KEY = "compression_generation"  # its name inside compression_anchor_details
_GENERATION = re.compile(r"[0-9A-Za-z_-]{1,64}")  # a file name part (Talaria writes uuid4 hex)


def undo_path(session_path: Path, generation: str) -> Path:
    return session_path.with_name(f"{session_path.name}.undo-{generation}")


def all_undo_files(session_path: Path) -> list[Path]:
    return sorted(session_path.parent.glob(f"{session_path.name}.undo-*"))


def generation_in(details: Any) -> str | None:
    """The generation a file's ``compression_anchor_details`` carries (hermes-webui keeps that dict)."""
    gen = details.get(GENERATION_KEY) if isinstance(details, dict) else None
    return gen if isinstance(gen, str) and gen else None


def load(session_path: Path, generation: str | None) -> dict[str, Any] | None:
    """The undo kept for ``generation``; None when there is none (or it belongs to another compression)."""
    if not generation or not _GENERATION.fullmatch(generation):
        return None
    try:
        found = read_session_file(undo_path(session_path, generation))
        doc = jsonio.loads(found[1]) if found is not None else None
    except (OSError, ValueError) as exc:
        log.warning("the compression undo of %s cannot be read: %s", session_path.name, exc)
        return None
    if not isinstance(doc, dict) or doc.get(GENERATION_KEY) != generation:
        return None
    undo = doc.get("undo")
    return undo if isinstance(undo, dict) else None


def store(session_path: Path, generation: str, undo: dict[str, Any]) -> None:
    """Durably write the undo of ``generation`` (before the session file naming it is written)."""
    if not _GENERATION.fullmatch(generation):
        raise ValueError("a compression generation must be a short id")
    data = jsonio.dumps({GENERATION_KEY: generation, "undo": undo})
    atomic.write_bytes_durable(undo_path(session_path, generation), data)


def remove_others(session_path: Path, keep: str | None) -> None:
    """Remove the undo files of every generation but ``keep`` (after the session file stopped naming them)."""
    for path in all_undo_files(session_path):
        if keep is None or path != undo_path(session_path, keep):
            try:
                atomic.unlink_durable(path)
            except OSError as exc:
                log.warning("a stale compression undo (%s) cannot be removed: %s", path.name, exc)
