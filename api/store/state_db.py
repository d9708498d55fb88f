"""Read-only reader of the agent's SQLite ``state.db`` (docs/reconciliation.md).

This is the only module that opens the agent's database, and it never writes to it: every connection
is a ``mode=ro`` URI and nothing here writes, checkpoints, vacuums or unlinks ``state.db``, ``-wal`` or
``-shm``. A database that is absent or cannot be read counts as empty.

How a connection is opened depends on what is on disk, so that reading leaves every file as it was:

* WAL database with no ``-wal`` file (the agent closed cleanly): everything is in the main file, so it is
  read with ``immutable=1`` (no locks, no ``-wal``/``-shm`` created). If the main file or ``-wal``
  changed while we read, the read is repeated the ordinary way.
* WAL database with ``-wal`` and ``-shm``: ``readonly_shm=1`` maps the index read-only, which works
  beside a live writer and after a crash; if SQLite refuses, a plain ``mode=ro`` read follows.
* rollback-journal database (the agent's NFS fallback): plain ``mode=ro`` with SQLite's locking.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import api.store.config
from api.rules.session_fields import is_safe_session_id  # noqa: F401 - re-exported for callers of this module
from api.store.in_use import InUse

_MESSAGE_REQUIRED = ("role", "content", "timestamp")
# Optional message columns copied onto each row when not NULL/"" (id/active/session_id only steer the query).
_MESSAGE_OPTIONAL = (
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "reasoning",
    "reasoning_details",
    "codex_reasoning_items",
    "reasoning_content",
    "codex_message_items",
    "api_content",
)
_JSON_COLUMNS = frozenset({"tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items"})
_SESSION_COLUMNS = (
    "id",
    "source",
    "title",
    "model",
    "started_at",
    "parent_session_id",
    "message_count",
    "ended_at",
    "end_reason",
    "archived",
)
_TIMEOUT_S = 1.0
_T = TypeVar("_T")


class Reads:
    """What reading the agent's database keeps between reads: its tables' columns and its latest session list.

    A store owns one (``Store.agent_db``) and puts it in use with itself; a reader given none uses that one.
    """

    def __init__(self) -> None:
        # (path, schema_version) -> {table: frozenset(columns)}; schema_version changes with any schema change.
        self.columns: dict[tuple[str, int], dict[str, frozenset[str]]] = {}
        # (path, limit, stat) -> rows: the sidebar asks on every poll, the rows change only with the files.
        self.sessions: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self.lock = threading.Lock()


READS: InUse[Reads] = InUse(Reads)  # the store in use's (``session_store.use``)


def default_state_db_path() -> Path:
    """The agent's database as configured now (``api.store.config.STATE_DB_PATH`` read at call time)."""
    return Path(api.store.config.STATE_DB_PATH)


# ----------------------------------------------------------------------------------------------
# Opening without side effects
# ----------------------------------------------------------------------------------------------


def _uri(path: Path, params: str) -> str:
    return f"file:{quote(str(path), safe='/')}?mode=ro{params}"


def _is_wal_database(path: Path) -> bool:
    # Bytes 18/19 of the SQLite header are the write/read format versions: 2 means WAL.
    # Closing any descriptor of the file drops every POSIX lock this process holds on it, those of a live
    # SQLite connection too (the agent's goal store here): callers read the header only while no -wal or
    # -shm exists, that is while no connection in WAL mode is open.
    with open(path, "rb") as fh:
        header = fh.read(20)
    return len(header) == 20 and header[18] == 2


def _stat_key(path: Path) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in (path, Path(f"{path}-wal")):
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def files_stamp(db_path: Path | str | None = None) -> tuple[Any, ...]:
    """The stat of ``state.db`` and its ``-wal``: it changes whenever the agent writes (no connection)."""
    return _stat_key(Path(db_path) if db_path is not None else default_state_db_path())


def _connect(path: Path, params: str) -> sqlite3.Connection:
    return sqlite3.connect(_uri(path, params), uri=True, timeout=_TIMEOUT_S, check_same_thread=False)


def _with_connection(path: Path, read: Callable[[sqlite3.Connection, str], _T]) -> _T:
    """Run ``read(conn, path_key)`` on a read-only connection chosen so the read changes no file.

    Raises ``OSError``/``sqlite3.Error`` when the database cannot be read; callers map that to empty.
    """
    if not path.is_file():
        raise FileNotFoundError(str(path))
    key = str(path)
    wal = Path(f"{path}-wal")
    shm = Path(f"{path}-shm")
    if not wal.exists() and not shm.exists() and _is_wal_database(path):
        before = _stat_key(path)
        conn = _connect(path, "&immutable=1")
        try:
            result = read(conn, key)
        finally:
            conn.close()
        if _stat_key(path) == before:
            return result
        # A writer appeared while we read: fall through to a read that honours its locks.
    if wal.exists() and shm.exists():
        try:
            conn = _connect(path, "&readonly_shm=1")
            try:
                return read(conn, key)
            finally:
                conn.close()
        except sqlite3.OperationalError:
            pass
    conn = _connect(path, "")
    try:
        return read(conn, key)
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection, key: str, table: str, held: Reads | None = None) -> frozenset[str]:
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    reads = READS.get(held)
    with reads.lock:
        tables = reads.columns.get((key, version))
        cols = tables.get(table) if tables is not None else None
    if cols is None:
        # PRAGMA arguments cannot be bound; ``table`` is always one of our literals.
        cols = frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
        with reads.lock:
            if len(reads.columns) > 64:
                reads.columns.clear()
            reads.columns.setdefault((key, version), {})[table] = cols
    return cols


# ----------------------------------------------------------------------------------------------
# Messages of one session
# ----------------------------------------------------------------------------------------------


def _decode_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _row_to_message(names: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    values = dict(zip(names, row, strict=True))
    msg = {"role": values["role"], "content": values["content"], "timestamp": values["timestamp"]}
    for col in _MESSAGE_OPTIONAL:
        value = values.get(col)
        if value is None or value == "":
            continue
        msg[col] = _decode_json(value) if col in _JSON_COLUMNS else value
    if msg.get("role") == "tool" and msg.get("tool_name") and not msg.get("name"):
        msg["name"] = msg["tool_name"]
    if isinstance(msg.get("api_content"), str) and values.get("id") is not None:
        msg["_state_db_row_id"] = values["id"]
    return msg


def _read_messages(
    conn: sqlite3.Connection,
    key: str,
    sid: str,
    include_inactive: bool,
    since_timestamp: float | None,
    limit: int | None,
) -> list[dict[str, Any]]:
    cols = _columns(conn, key, "messages")
    if not cols or any(c not in cols for c in _MESSAGE_REQUIRED) or "session_id" not in cols:
        return []
    names = tuple(c for c in ("id", *_MESSAGE_REQUIRED, *_MESSAGE_OPTIONAL) if c in cols)
    where = ["session_id = ?"]
    params: list[Any] = [sid]
    if not include_inactive and "active" in cols:
        where.append("(active IS NULL OR active != 0)")
    if since_timestamp is not None:
        where.append("(timestamp IS NULL OR timestamp >= ?)")
        params.append(float(since_timestamp))
    order = "id" if "id" in cols else "timestamp"
    sql = f"SELECT {', '.join(names)} FROM messages WHERE {' AND '.join(where)}"
    if limit is not None:
        sql += f" ORDER BY {order} DESC LIMIT ?"
        params.append(max(0, int(limit)))
        rows = conn.execute(sql, params).fetchall()
        rows.reverse()
    else:
        rows = conn.execute(f"{sql} ORDER BY {order}", params).fetchall()
    return [_row_to_message(names, row) for row in rows]


def get_state_db_session_messages(
    sid: str,
    *,
    include_inactive: bool = False,
    since_timestamp: float | None = None,
    limit: int | None = None,
    db_path: Path | str | None = None,
) -> list[dict[str, Any]]:
    """The agent's stored messages of one session, oldest first; ``[]`` when unavailable.

    Rows archived by the agent's compaction (``active = 0``) are left out unless ``include_inactive``;
    ``limit`` keeps the newest N rows. Optional columns missing from older schemas are simply absent.
    """
    if not is_safe_session_id(sid):
        return []
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(
            path,
            lambda conn, key: _read_messages(conn, key, sid, include_inactive, since_timestamp, limit),
        )
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return []


# ----------------------------------------------------------------------------------------------
# The agent's session list
# ----------------------------------------------------------------------------------------------


def _read_sessions(conn: sqlite3.Connection, key: str, limit: int, reads: Reads) -> list[dict[str, Any]]:
    cols = _columns(conn, key, "sessions", reads)
    if "id" not in cols:
        raise sqlite3.OperationalError("no sessions table")
    names = [c for c in _SESSION_COLUMNS if c in cols]
    order = "started_at DESC, id" if "started_at" in cols else "id"
    rows = conn.execute(f"SELECT {', '.join(names)} FROM sessions ORDER BY {order} LIMIT ?", (int(limit),))
    return [dict(zip(names, row, strict=True)) for row in rows]


def list_agent_sessions(
    db_path: Path | str | None = None, *, limit: int = 500, reads: Reads | None = None
) -> list[dict[str, Any]]:
    """Rows of the agent's ``sessions`` table, newest first; ``[]`` when unavailable.

    Kept in ``reads`` (the store in use's when None) while the database and its WAL keep the same stat.
    """
    path = Path(db_path) if db_path is not None else default_state_db_path()
    held = READS.get(reads)
    key = (str(path), limit, _stat_key(path))
    with held.lock:
        cached = held.sessions.get(key)
    if cached is not None:
        return list(cached)
    try:
        rows = _with_connection(path, lambda conn, k: _read_sessions(conn, k, max(0, limit), held))
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return []
    with held.lock:
        held.sessions.clear()  # one database, one current listing
        held.sessions[key] = rows
    return list(rows)


def _read_session_ids(conn: sqlite3.Connection, key: str) -> set[str]:
    if "id" not in _columns(conn, key, "sessions"):
        raise sqlite3.OperationalError("no sessions table")
    return {row[0] for row in conn.execute("SELECT id FROM sessions") if isinstance(row[0], str)}


def session_ids(db_path: Path | str | None = None) -> set[str] | None:
    """Every session id the agent knows, or ``None`` when that cannot be read (callers fail open)."""
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(path, _read_session_ids)
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return None


def _read_has_session(conn: sqlite3.Connection, key: str, sid: str) -> bool:
    if "id" not in _columns(conn, key, "sessions"):
        raise sqlite3.OperationalError("no sessions table")
    return conn.execute("SELECT 1 FROM sessions WHERE id = ? LIMIT 1", (sid,)).fetchone() is not None


def has_session(sid: str, db_path: Path | str | None = None) -> bool | None:
    """Whether the agent has a ``sessions`` row for ``sid``; ``None`` when that cannot be read."""
    path = Path(db_path) if db_path is not None else default_state_db_path()
    if not is_safe_session_id(sid):
        return False
    try:
        return _with_connection(path, lambda conn, key: _read_has_session(conn, key, sid))
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return None


def _read_session_count(conn: sqlite3.Connection, key: str) -> int:
    if "id" not in _columns(conn, key, "sessions"):
        raise sqlite3.OperationalError("no sessions table")
    return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])


def _read_meta_value(conn: sqlite3.Connection, key: str, meta_key: str) -> str | None:
    if "key" not in _columns(conn, key, "state_meta"):
        return None
    row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (meta_key,)).fetchone()
    return row[0] if row is not None and isinstance(row[0], str) else None


def meta_value(db_path: Path | str, meta_key: str) -> str | None:
    """A value of the agent's ``state_meta`` table, read without writing (None: no such key, or no readable
    database) — so a session without a goal never opens the agent's store for writing."""
    try:
        return _with_connection(Path(db_path), lambda conn, key: _read_meta_value(conn, key, meta_key))
    except (OSError, sqlite3.Error):
        return None


def count_sessions(db_path: Path | str) -> int:
    """How many sessions the agent's database holds; raises ``OSError``/``sqlite3.Error`` when it cannot
    be read (``talaria doctor`` reports why)."""
    return _with_connection(Path(db_path), _read_session_count)


# ----------------------------------------------------------------------------------------------
# Compression lineages (the agent's ``parent_session_id`` chain)
# ----------------------------------------------------------------------------------------------

# The agent's own continuation edge (hermes_state._COMPRESSION_CHILD_SQL): a child whose parent ended
# with ``end_reason = 'compression'``; a delegate or a /branch child has another end reason on its parent.
_LINEAGE_HOPS = 100


def _parent_of(conn: sqlite3.Connection, sid: str) -> tuple[str | None, str | None]:
    row = conn.execute(
        "SELECT p.id, p.end_reason FROM sessions c JOIN sessions p ON p.id = c.parent_session_id WHERE c.id = ?",
        (sid,),
    ).fetchone()
    return (row[0], row[1]) if row else (None, None)


def _compression_child(conn: sqlite3.Connection, sid: str) -> str | None:
    row = conn.execute(
        "SELECT c.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id "
        "WHERE p.id = ? AND p.end_reason = 'compression' ORDER BY c.started_at, c.id LIMIT 1",
        (sid,),
    ).fetchone()
    return row[0] if row else None


def _read_lineage(conn: sqlite3.Connection, key: str, sid: str) -> list[str]:
    cols = _columns(conn, key, "sessions")
    if not {"id", "parent_session_id", "end_reason"} <= cols:
        return [sid]
    chain = [sid]
    seen = {sid}
    current = sid
    for _ in range(_LINEAGE_HOPS):
        parent, reason = _parent_of(conn, current)
        if parent is None or reason != "compression" or parent in seen:
            break
        chain.insert(0, parent)
        seen.add(parent)
        current = parent
    current = sid
    for _ in range(_LINEAGE_HOPS):
        child = _compression_child(conn, current)
        if child is None or child in seen:
            break
        chain.append(child)
        seen.add(child)
        current = child
    return chain


def session_lineage(sid: str, db_path: Path | str | None = None) -> list[str]:
    """The compression segments of ``sid``'s conversation, oldest first (``[sid]`` when alone or unreadable)."""
    if not is_safe_session_id(sid):
        return []
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(path, lambda conn, key: _read_lineage(conn, key, sid))
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return [sid]


def lineage_messages(sid: str, db_path: Path | str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """``(segment ids, messages)`` of ``sid``'s whole conversation: every segment's active rows in order."""
    segments = session_lineage(sid, db_path)
    messages: list[dict[str, Any]] = []
    for segment in segments:
        messages.extend(get_state_db_session_messages(segment, db_path=db_path))
    return segments, messages


def _read_compressed_parents(conn: sqlite3.Connection, key: str) -> dict[str, str]:
    if not {"id", "parent_session_id", "end_reason"} <= _columns(conn, key, "sessions"):
        return {}
    rows = conn.execute(
        "SELECT c.id, p.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id "
        "WHERE p.end_reason = 'compression'"
    )
    return {child: parent for child, parent in rows}


def compression_parents(db_path: Path | str | None = None) -> dict[str, str]:
    """``{segment id: the segment it continues}`` for every compression continuation; ``{}`` when unreadable."""
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(path, _read_compressed_parents)
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return {}


# ----------------------------------------------------------------------------------------------
# Content search through the agent's own full-text index
# ----------------------------------------------------------------------------------------------


def _fts_phrases(needle: str) -> str:
    # Each word a quoted phrase: the person's text never reaches FTS5 as query syntax.
    return " ".join('"' + word.replace('"', '""') + '"' for word in needle.split())


def _read_matching_sessions(conn: sqlite3.Connection, key: str, needle: str, limit: int) -> list[str]:
    cols = _columns(conn, key, "messages")
    active = "AND (m.active = 1 OR m.compacted = 1)" if {"active", "compacted"} <= cols else ""
    tables = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts%'")
    }
    # The trigram index matches inside words, as Talaria's own search does; it needs three characters a word.
    order = ["messages_fts"]
    if "messages_fts_trigram" in tables and all(len(word) >= 3 for word in needle.split()):
        order.insert(0, "messages_fts_trigram")
    for table in (t for t in order if t in tables):
        try:
            rows = conn.execute(
                f"SELECT m.session_id, max(m.timestamp) AS at FROM {table} JOIN messages m ON m.id = {table}.rowid "
                f"WHERE {table} MATCH ? {active} GROUP BY m.session_id ORDER BY at DESC LIMIT ?",
                (_fts_phrases(needle), int(limit)),
            ).fetchall()
        except sqlite3.OperationalError:
            continue
        return [row[0] for row in rows if isinstance(row[0], str)]
    return []


def search_session_ids(needle: str, limit: int = 50, db_path: Path | str | None = None) -> list[str]:
    """Sessions with a message matching every word of ``needle`` in the agent's full-text index (the
    trigram one when each word has three characters), most recently matching first; ``[]`` when unreadable."""
    if not needle.split():
        return []
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(path, lambda conn, key: _read_matching_sessions(conn, key, needle, limit))
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return []


def _read_ids_with_prefix(conn: sqlite3.Connection, key: str, prefix: str, limit: int) -> list[str]:
    if "id" not in _columns(conn, key, "sessions"):
        raise sqlite3.OperationalError("no sessions table")
    # The id's range, not LIKE: ids hold "_", which LIKE reads as a wildcard.
    rows = conn.execute(
        "SELECT id FROM sessions WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT ?",
        (prefix, prefix + "\U0010ffff", int(limit)),
    )
    return [str(row[0]) for row in rows]


def session_ids_with_prefix(prefix: str, *, limit: int = 50, db_path: Path | str | None = None) -> list[str]:
    """The agent's session ids starting with ``prefix``, greatest first; ``[]`` when unavailable."""
    path = Path(db_path) if db_path is not None else default_state_db_path()
    try:
        return _with_connection(
            path, lambda conn, key: _read_ids_with_prefix(conn, key, prefix, max(0, limit))
        )
    except (OSError, sqlite3.Error, ValueError, TypeError):
        return []
