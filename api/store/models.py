"""``Session``: fields, the metadata-first JSON layout, durable load/save, the ``.bak`` policy; the store in use.

A session belongs to a store (``api.store.session_store.Store``: its folder, index, cache and locks), the one it
was loaded from, else the store in use (``store()``). hermes-webui's names ``SESSION_DIR``, ``SESSION_INDEX_FILE``,
``SESSIONS`` and ``LOCK`` read and point that store through the face ``api.models`` (``api/faces.py``). Without
``config.configure`` the folder comes from the environment on first use, as hermes-webui's does. The reconciliation names are re-exported from
``api.rules.reconcile``.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from api.rules import jsonio, session_merge
from api.rules.errors import Conflict
from api.rules.session_fields import (
    BULK_FIELDS,
    DERIVED_KEYS,
    KNOWN_FIELDS,
    METADATA_FIELDS,
    NORMALISERS,
    TALARIA_FIELDS,
    SessionFields,
    collapse_adjacent_duplicate_partials,
    count_or_none,
    float_or_none,
    is_safe_session_id,
    new_session_id,
    resolve_path_str,
)
from api.store import atomic, compression_undo, session_rows, tombstones
from api.store import config as _config
from api.store import session_store as _store
from api.store.safe_read import UnsafeFile
from api.store.session_files import (  # noqa: F401 - read_session_file and read_metadata_prefix: public here too
    METADATA_PREFIX_BYTES,
    bind_to_file_name,
    disk_sig,
    read_metadata_prefix,
    read_session_file,
)

log = logging.getLogger("talaria.models")

_METADATA_REQUIRED = ("session_id", "title", "created_at", "updated_at")


class UnsafeSessionId(ValueError):
    pass


class _ChangedDuringSave(Exception):
    """The file changed between our check and our rename."""


_SAVE_ATTEMPTS = 3


def _require_safe(sid: Any) -> str:
    if not is_safe_session_id(sid):
        raise UnsafeSessionId("invalid session id")
    return sid


class Session(SessionFields):
    """One conversation: the visible transcript (``messages``) and the model context (``context_messages``)."""

    def __init__(self, **kw: Any) -> None:
        sid = kw.get("session_id") or new_session_id()
        self.session_id = sid
        workspace = kw.get("workspace")
        self.workspace = resolve_path_str(_config.default_workspace() if workspace is None else workspace)
        created_ws = kw.get("created_workspace")
        self.created_workspace = resolve_path_str(created_ws) if created_ws else self.workspace
        self.model = kw.get("model") or _config.setting("default_model")
        now = time.time()
        self.created_at = kw.get("created_at") or now
        self.updated_at = kw.get("updated_at") or now
        for name, normalise in NORMALISERS:
            setattr(self, name, normalise(kw.get(name)))
        gen = kw.get("compression_generation") or compression_undo.generation_in(
            self.compression_anchor_details
        )
        self.compression_generation = gen if isinstance(gen, str) and gen else None
        if gen and compression_undo.generation_in(self.compression_anchor_details) != gen:  # an older file
            self.compression_anchor_details = {
                **self.compression_anchor_details,
                compression_undo.GENERATION_KEY: gen,
            }
        # The generation whose undo file is on disk, and the one the other undo files were last removed for.
        self._undo_stored: str | None = None
        self._undo_cleaned: str | None = None
        scene_index = kw.get("anchor_scene_index")
        self._anchor_scene_index = scene_index if isinstance(scene_index, dict) else None
        # The sidebar figures a metadata-only stub reports (written by Talaria ahead of "messages").
        self._metadata_message_count = count_or_none(kw.get("message_count"))
        self._metadata_queued_count = count_or_none(kw.get("queued_count")) or 0  # written only when not 0
        self._metadata_user_message_count = count_or_none(kw.get("user_message_count"))
        self._metadata_last_message_at = float_or_none(kw.get("last_message_at"))
        self._loaded_metadata_only = False
        self._saved_message_count: int | None = None
        self._disk_sig: tuple[Any, ...] | None = None
        self._base: dict[str, Any] | None = (
            None  # the payload as last read or written: what "our changes" are relative to
        )
        self._file_keys: frozenset[str] = frozenset()
        self._store: _store.Store[Session] | None = None  # None: the store in use
        self._extra: dict[str, Any] = {
            k: v for k, v in kw.items() if k not in KNOWN_FIELDS and k not in DERIVED_KEYS
        }

    def clear_pending_turn(self) -> None:
        """Forget the live-turn bookkeeping (the turn ended, was interrupted, or the history was reset)."""
        self.active_stream_id = None
        self.pending_user_message = None
        self.pending_attachments = []
        self.pending_started_at = None
        self.pending_user_source = None

    # ------------------------------------------------------------------ paths and layout

    @property
    def metadata_only(self) -> bool:
        """A sidebar stub: the bulky lists were not read (``load_metadata_only``); it cannot be saved."""
        return self._loaded_metadata_only

    @property
    def saved_message_count(self) -> int | None:
        """How many messages the file held when this object last read or wrote it (None: never)."""
        return self._saved_message_count

    @property
    def read_signature(self) -> tuple[Any, ...] | None:
        """The file's identity (inode, size, mtime) when this object last read or wrote it."""
        return self._disk_sig

    def home(self) -> _store.Store[Session]:
        """The store this session belongs to."""
        return self._store if self._store is not None else store()

    def bind(self, home: _store.Store[Session]) -> None:
        """Belong to ``home`` (a session built in memory belongs to the store in use until then)."""
        self._store = home

    @property
    def path(self) -> Path:
        return self.home().session_dir / f"{self.session_id}.json"

    @property
    def backup_path(self) -> Path:
        return self.home().session_dir / f"{self.session_id}.json.bak"

    def anchor_scene_index(self) -> dict[str, Any]:
        out = {}
        for key, scene in (self.anchor_activity_scenes or {}).items():
            out[key] = scene.get("updated_at") if isinstance(scene, dict) else None
        return out

    def to_payload(self) -> dict[str, Any]:
        payload = {name: getattr(self, name) for name in METADATA_FIELDS}
        payload["message_count"] = len(self.messages)
        payload["user_message_count"] = self.user_message_count()
        payload["last_message_at"] = self.last_message_at()
        payload["anchor_scene_index"] = self.anchor_scene_index()
        if self.queued_messages:  # ahead of "messages": the startup finds waiting queues from the prefix
            payload["queued_count"] = len(self.queued_messages)
        for name in BULK_FIELDS:
            payload[name] = getattr(self, name)
        payload["context_messages"] = self.context_messages
        for name in TALARIA_FIELDS[1:]:
            value = getattr(self, name)
            if name == "compression_undo" and self.compression_generation:
                continue  # kept beside the file (api/store/compression_undo.py)
            if name == "queued_messages" and not value:
                continue  # an empty queue leaves the file as hermes-webui writes it
            if value is not None:
                payload[name] = value
        for key, value in self._extra.items():
            payload.setdefault(key, value)
        for key, value in self.__dict__.items():  # ad-hoc public attributes survive too
            if not key.startswith("_") and key not in payload and key not in KNOWN_FIELDS:
                payload[key] = value
        return payload

    # ------------------------------------------------------------------ save

    def _disk_state(self, path: Path) -> tuple[int, bytes | None]:
        """(message count on disk, bytes when they had to be read); -1 = unparsable, -2 = absent,
        -3 = not a regular file (a link, FIFO or device: never read, never followed)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return -2, None
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if sig == self._disk_sig and self._saved_message_count is not None:
            return self._saved_message_count, None
        try:
            found = read_session_file(path)
        except UnsafeFile:
            return -3, None
        if found is None:
            return -2, None
        data = found[1]
        try:
            parsed = jsonio.loads(data)
        except (ValueError, UnicodeDecodeError):
            return -1, data
        msgs = parsed.get("messages") if isinstance(parsed, dict) else None
        return (len(msgs) if isinstance(msgs, list) else -1), data

    def save(self, touch_updated_at: bool = True, skip_index: bool = False) -> bool:
        """Durably write the session; True when written, False when refused as an unsafe empty save.

        A transaction: when the save raises (disk full, read-only, a conflict with another writer) or is
        refused, this object becomes what the file holds, so neither the cache nor a later save carries
        the change that did not land.
        """
        _require_safe(self.session_id)
        if self._loaded_metadata_only:
            raise RuntimeError("refusing to save a metadata-only session stub (its messages are not loaded)")
        try:
            for _attempt in range(_SAVE_ATTEMPTS):
                try:
                    st = self._write(touch_updated_at)
                    break
                except _ChangedDuringSave:
                    continue  # another program wrote in the meantime: take its version in and write again
            else:
                raise Conflict(
                    "This conversation keeps being changed by another program; this change was not saved."
                )
        except BaseException:
            self.revert_to_file()
            raise
        if st is None:
            self.revert_to_file()
            return False
        if self.compression_undo is None or self._undo_stored != self.compression_generation:
            self._undo_stored = None  # undone, cleared or replaced by the agent's own compression
        if self._undo_stored != self._undo_cleaned:
            compression_undo.remove_others(self.path, self._undo_stored)
            self._undo_cleaned = self._undo_stored
        home = self.home()
        if not skip_index:
            home.index.note_saved(
                home.session_dir, home.index_file, self.compact(), (st.st_size, st.st_mtime_ns)
            )
        if self.messages:
            _clear_tombstone(home.session_dir, self.session_id)
        return True

    def _write(self, touch_updated_at: bool) -> os.stat_result | None:
        if touch_updated_at:
            self.updated_at = time.time()
        path = self.path
        self._take_in_foreign_changes(path)
        gen, undo = self.compression_generation, self.compression_undo
        if isinstance(undo, dict) and gen and self._undo_stored != gen:
            compression_undo.store(path, gen, undo)  # first: a file naming a generation finds its undo
            self._undo_stored = gen
        incoming = len(self.messages)
        try:
            existing, existing_bytes = self._disk_state(path)
        except OSError as exc:
            log.warning("could not read %s before saving: %s", path.name, exc)
            existing, existing_bytes = -2, None
        if existing > 0 and incoming == 0 and (self.active_stream_id or self.pending_user_message):
            log.warning("refusing to save %s with no messages during a live turn", self.session_id)
            return None
        if existing == -3:
            atomic.move_aside(path, "unsafe")  # renamed, not copied: reading a FIFO would block the save
        elif existing == -1 and path.exists():
            atomic.keep_aside(path, "corrupt")
        elif existing > incoming:
            # A shrinking save never lands without its backup: if the backup cannot be written
            # (disk full, read-only), the save fails and the larger file stays.
            data = existing_bytes if existing_bytes is not None else path.read_bytes()
            atomic.write_bytes_durable(self.backup_path, data)

        # A file moved aside is gone from the name: nothing there to have changed under us.
        checked = self._disk_sig if self._base is not None and existing != -3 else None

        def remember(st: os.stat_result) -> None:
            if checked is not None and disk_sig(path) != checked:
                raise _ChangedDuringSave()
            # Known before the rename, so a concurrent get_session never mistakes our own write for a stranger's.
            self._disk_sig = (st.st_ino, st.st_size, st.st_mtime_ns)
            self._saved_message_count = incoming

        payload = self.to_payload()
        st = atomic.write_bytes_durable(path, jsonio.dumps_document(payload), before_replace=remember)
        self._base = session_merge.snapshot(payload)
        return st

    def _take_in_foreign_changes(self, path: Path) -> None:
        """When another program rewrote the file since we read it, become its version plus our changes.

        Changes that commute (a rename, a pin, an appended turn) are re-applied; anything both sides
        changed differently is a 409, and the stale object never overwrites the newer file.
        """
        if self._base is None or self._disk_sig is None:
            return  # built in memory, never read from the file: a deliberate write
        sig = disk_sig(path)
        if sig is None or sig == self._disk_sig:
            return
        theirs = _load_session_from_path(path, self._store)
        if theirs is None:
            # Unreadable: the save reads it again, keeps it aside as corrupt, then replaces it.
            self._disk_sig, self._saved_message_count = sig, None
            return
        theirs_payload = theirs.to_payload()
        for name in TALARIA_FIELDS:
            if name not in theirs._file_keys:
                theirs_payload.pop(name, None)
        try:
            merged = session_merge.merge(
                self._base, self.to_payload(), theirs_payload, absent_means_unchanged=TALARIA_FIELDS
            )
        except session_merge.MergeConflict as exc:
            raise Conflict(
                f"This conversation was changed by another program since Talaria read it ({exc.field} "
                "differs on both sides); this change was not saved. Reload to see the current version."
            ) from None
        log.info(
            "%s.json was changed by another program; its changes are kept and ours re-applied",
            self.session_id,
        )
        mine = Session.from_payload(merged, sig=theirs._disk_sig, store=self._store)
        mine._saved_message_count = theirs._saved_message_count
        mine._base = theirs._base
        if mine.compression_generation == self.compression_generation and mine.compression_undo is None:
            mine.compression_undo = self.compression_undo  # a compression of ours not yet beside the file
        self._adopt(mine)

    def changed_since_read(self) -> bool:
        """Whether a field or list differs from what this object last read or wrote (always, when never)."""
        return self._base is None or session_merge.changed_since(self._base, self.to_payload())

    def revert_to_file(self) -> None:
        """Hold what the file holds (every holder of this object sees it); when unreadable, leave the cache.

        The one rollback: a failed save calls it, and so does ``api.store.session_edit.edit`` when its body raises.
        """
        try:
            fresh = _load_session_from_path(self.path, self._store)
        except Exception:  # noqa: BLE001 - whatever happens, the unsaved state must not stay cached
            fresh = None
        if fresh is not None:
            self._adopt(fresh)
            return
        self.home().drop(self.session_id, only=self)

    def _adopt(self, other: Session) -> None:
        self.__dict__.clear()
        self.__dict__.update(other.__dict__)

    # ------------------------------------------------------------------ load

    @classmethod
    def from_payload(
        cls,
        data: dict[str, Any],
        *,
        sig: tuple[Any, ...] | None = None,
        store: _store.Store[Session] | None = None,
    ) -> Session:
        messages = data.get("messages")
        on_disk = len(messages) if isinstance(messages, list) else 0
        if isinstance(messages, list):
            collapsed, _ = collapse_adjacent_duplicate_partials(messages)
            if collapsed is not messages:
                data = dict(data, messages=collapsed)
        session = cls(**data)
        session._store = store
        session._saved_message_count = on_disk
        session._disk_sig = sig
        session._file_keys = frozenset(data)
        if session.compression_undo is None and session.compression_generation:
            session.compression_undo = compression_undo.load(session.path, session.compression_generation)
            session._undo_stored = session.compression_generation if session.compression_undo else None
            session._undo_cleaned = session._undo_stored
        session._base = session_merge.snapshot(session.to_payload())
        return session

    @classmethod
    def load(cls, sid: str, store: _store.Store[Session] | None = None) -> Session | None:
        if not is_safe_session_id(sid):
            return None
        path = (store or _in_use()).session_dir / f"{sid}.json"
        found = read_session_file(path)
        if found is None:
            return None
        st, raw = found
        data = jsonio.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"session file {path.name} does not hold a JSON object")
        bind_to_file_name(data, sid)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        session = cls.from_payload(data, sig=sig, store=store)
        if session._saved_message_count != len(session.messages):
            try:
                session.save(touch_updated_at=False, skip_index=True)
            except OSError as exc:  # a read-only or full disk still reads: the session is the file as it is
                log.warning("could not save the collapsed %s.json: %s", sid, exc)
        return session

    @classmethod
    def load_metadata_only(cls, sid: str, store: _store.Store[Session] | None = None) -> Session | None:
        if not is_safe_session_id(sid):
            return None
        folder = (store or _in_use()).session_dir
        return metadata_stub(folder / f"{sid}.json", store) or cls.load(sid, store)

    @staticmethod
    def stub_from_path(path: Path) -> Session | None:
        """A metadata-only session from a file's prefix (``metadata_stub``), for the index."""
        return metadata_stub(path)

    @staticmethod
    def from_path(path: Path) -> Session | None:
        """A whole session file parsed without saving, None on any error, for the index."""
        return _load_session_from_path(path)

    # ------------------------------------------------------------------ sidebar row

    def message_count(self) -> int:
        return session_rows.message_count(self)

    def has_sidebar_figures(self) -> bool:
        """A stub whose file carries every figure of its sidebar row (files Talaria wrote do)."""
        return session_rows.has_sidebar_figures(self)

    def user_message_count(self) -> int:
        return session_rows.user_message_count(self)

    def last_message_at(self) -> float:
        return session_rows.last_message_at(self)

    def compact(self) -> dict[str, Any]:
        """The session's index row (``api.store.session_rows``)."""
        return session_rows.index_row(self)

    def __repr__(self) -> str:
        return f"<Session {self.session_id} {len(self.messages)} msgs>"


def metadata_stub(path: Path, store: _store.Store[Session] | None = None) -> Session | None:
    """A metadata-only session from the file's prefix (it refuses to save); None when the prefix lacks it."""
    data = read_metadata_prefix(path)
    if data is None or any(k not in data for k in _METADATA_REQUIRED):
        return None
    bind_to_file_name(data, Path(path).name[: -len(".json")])
    session = Session(**data)
    session._store = store
    session._loaded_metadata_only = True
    return session


def _load_session_from_path(path: Path, store: _store.Store[Session] | None = None) -> Session | None:
    """Parse one sidecar without saving (index rebuild, recovery); None on any error."""
    try:
        found = read_session_file(Path(path))
        if found is None:
            return None
        st, raw = found
        data = jsonio.loads(raw)
        if not isinstance(data, dict):
            return None
        bind_to_file_name(data, Path(path).name[: -len(".json")])
        return Session.from_payload(data, sig=(st.st_ino, st.st_size, st.st_mtime_ns), store=store)
    except Exception as exc:  # noqa: BLE001 - a broken file is a logged skip
        log.warning("skipping unreadable session file %s: %s", Path(path).name, exc)
        return None


def _clear_tombstone(session_dir: Path, sid: str) -> None:
    try:
        tombstones.forget_session(session_dir, sid)
    except OSError as exc:
        log.warning("could not clear the tombstones of %s: %s", sid, exc)


# ---------------------------------------------------------------------- the store in use


def _default_store() -> _store.Store[Session]:
    return _store.Store(_config.sessions_folder(), Session)


Store = _store.Store[Session]


def store(given: Store | None = None) -> Store:
    """``given`` (the store a caller holding its app passes down), else the store in use: the app's, else one on
    the settings' folder built on first use (hermes-webui's way)."""
    if given is not None:
        return given
    return _store.current(_default_store)


_in_use = store  # for the functions whose ``store`` parameter hides the function


def get_session(sid: str, metadata_only: bool = False, *, store: Store | None = None) -> Session:
    """The cached session (reloaded when the file changed underneath), else loaded from disk; KeyError if none."""
    return _in_use(store).get(sid, metadata_only=metadata_only)


def cache_session(session: Session, *, store: Store | None = None) -> None:
    _in_use(store).put(session)


def all_sessions(*, store: Store | None = None) -> list[dict[str, Any]]:
    """A copy of every sidebar row, newest first (hermes-webui's name; ``Store.all_rows``). O(sessions): requests
    use the store's readers that cost what they return (``Store.page``, ``Store.row``...)."""
    return _in_use(store).all_rows()


# ---------------------------------------------------------------------- reconciliation names

from api.rules.reconcile import (  # noqa: E402,F401 - part of the api.store.models contract
    _context_messages_include_compression_marker,
    merge_session_messages_append_only,
    reconciled_view,
    state_db_delta_after_context,
)
from api.store.state_db import get_state_db_session_messages  # noqa: E402,F401


def reconciled_state_db_messages_for_session(
    session: Any, *, prefer_context: bool = False, state_messages: list[Any] | None = None
) -> list[Any]:
    """The session's reconciled view (``api.rules.reconcile.reconciled_view``), reading state.db through this
    module's ``get_state_db_session_messages(sid)`` (looked up at call time: tests replace it) when no rows
    are given."""
    if session is None:
        return []
    if state_messages is None:
        sid: Any = getattr(session, "session_id", None)
        state_messages = get_state_db_session_messages(sid)
    return reconciled_view(session, state_messages, prefer_context=prefer_context)
