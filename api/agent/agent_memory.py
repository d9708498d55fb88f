"""The agent's memory files for the page: ``MEMORY.md`` (its notes) and ``USER.md`` (what it knows of the
person) where its memory tool keeps them, and ``SOUL.md`` (its identity) in ``$HERMES_HOME``.

A write is durable (``atomic.write_bytes_durable``) and refuses to overwrite a change made since the page
read the file: the page sends the version it read, and a different file on disk answers 409 with both
texts. ``MEMORY.md`` and ``USER.md`` are written under the memory tool's own file lock, so an agent
writing its memory at the same moment is either seen (409) or waits; the agent's character limits for
them hold for the person's edits too, or its next ``add`` would fail.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.rules.errors import BadRequest, Conflict
from api.store import atomic, safe_read

READ_LIMIT = 1024 * 1024  # larger files are refused, not read
_DEFAULT_LIMITS = {"memory": 2200, "user": 1375}  # the agent's defaults (memory.*_char_limit)


@dataclass(frozen=True)
class MemoryFile:
    target: str
    name: str
    label: str
    path: Path
    limit: int | None  # the agent's character limit, None for SOUL.md


def _memory_config() -> dict[str, Any]:
    cfg = agent_runtime.agent_module("hermes_cli.config").load_config().get("memory")
    return cfg if isinstance(cfg, dict) else {}


def _limit(cfg: dict[str, Any], target: str) -> int:
    value = cfg.get(f"{target}_char_limit", _DEFAULT_LIMITS[target])
    return value if isinstance(value, int) and value > 0 else _DEFAULT_LIMITS[target]


def memory_files() -> list[MemoryFile]:
    """The three files, at the places the agent reads them from."""
    memory_dir = Path(agent_runtime.agent_module("tools.memory_tool").get_memory_dir())
    home = Path(agent_runtime.agent_module("hermes_constants").get_hermes_home())
    cfg = _memory_config()
    return [
        MemoryFile(
            "memory", "MEMORY.md", "The agent's notes", memory_dir / "MEMORY.md", _limit(cfg, "memory")
        ),
        MemoryFile(
            "user", "USER.md", "What the agent knows about you", memory_dir / "USER.md", _limit(cfg, "user")
        ),
        MemoryFile("soul", "SOUL.md", "The agent's identity", home / "SOUL.md", None),
    ]


def _file_for(target: Any) -> MemoryFile:
    for entry in memory_files():
        if entry.target == target:
            return entry
    raise BadRequest("target must be one of: memory, user, soul")


def version_of(data: bytes | None) -> str:
    """A file's version as the page holds it: ``""`` for a missing file, else a hash of its bytes."""
    return "" if data is None else hashlib.sha256(data).hexdigest()[:32]


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; a link, FIFO or device, or a huge file, is refused."""
    try:
        found = safe_read.read_regular_file(path, max_bytes=READ_LIMIT)
    except safe_read.TooLarge:
        raise BadRequest(f"{path.name} is larger than {READ_LIMIT // 1024} KB") from None
    except safe_read.UnsafeFile as exc:
        raise BadRequest(f"{path.name} cannot be read: {exc.problem}") from None
    except OSError as exc:
        raise BadRequest(f"{path.name} cannot be read: {os.strerror(exc.errno or 0)}") from None
    return None if found is None else found[1]


def _view(entry: MemoryFile, data: bytes | None) -> dict[str, Any]:
    text = (data or b"").decode("utf-8", errors="replace")
    return {
        "target": entry.target,
        "name": entry.name,
        "label": entry.label,
        "exists": data is not None,
        "content": text,
        "version": version_of(data),
        "chars": len(text.strip()),
        "limit": entry.limit,
    }


def read_all() -> dict[str, Any]:
    return {"files": [_view(entry, read_bytes(entry.path)) for entry in memory_files()]}


def _agent_lock(entry: MemoryFile) -> Any:
    return agent_runtime.agent_module("tools.memory_tool").MemoryStore._file_lock(entry.path)


def write(target: Any, content: Any, base_version: Any) -> dict[str, Any]:
    """Replace one file with ``content`` if it is still at ``base_version``; the file's new view."""
    entry = _file_for(target)
    if not isinstance(content, str):
        raise BadRequest("content must be text")
    if not isinstance(base_version, str):
        raise BadRequest("base_version must be the version the page read")
    data = content.encode("utf-8", errors="replace")
    if len(data) > READ_LIMIT:
        raise BadRequest(f"{entry.name} may hold at most {READ_LIMIT // 1024} KB")
    if entry.limit is not None and len(content.strip()) > entry.limit:
        raise BadRequest(
            f"{entry.name} may hold at most {entry.limit:,} characters (the agent's memory limit); "
            f"this text has {len(content.strip()):,}"
        )
    entry.path.parent.mkdir(parents=True, exist_ok=True)
    if entry.target == "soul":
        return _write_unless_changed(entry, data, base_version)
    with _agent_lock(entry):
        return _write_unless_changed(entry, data, base_version)


def _write_unless_changed(entry: MemoryFile, data: bytes, base_version: str) -> dict[str, Any]:
    current = read_bytes(entry.path)
    if version_of(current) != base_version:
        raise Conflict(
            f"{entry.name} changed since you opened it (the agent may have written to it).",
            current=_view(entry, current),
            yours=data.decode("utf-8"),
        )
    atomic.write_bytes_durable(entry.path, data)
    return _view(entry, data)
