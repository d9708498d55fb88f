"""The one way to change a session: ``with edit(session_id) as session:`` locks, loads, saves once.

Every writer of a session file goes through here: ``edit`` for a session that exists, ``create`` for a
new one. ``edit`` holds the per-session lock for the whole change and yields the session fully loaded (the
object the cache holds, so every holder sees the change).

- A clean exit saves once, always: a row changed in place cannot be told from the row as read without
  copying every row first, so the edit does not guess. A body that finds nothing to change raises
  ``Unchanged`` and the edit ends without a save.
- A body that raises after changing the session makes it what its file holds again
  (``Session.revert_to_file``), once. A body that raises before changing any field or list (a refusal)
  leaves the object as read: the refusal costs no read and does not load again what loading resolves
  (a workspace path through the very link the refusal is about). So a body changes a row by replacing
  it, or together with its list or a field.
- A save that fails has already reverted the session (``Session.save``, once); the error goes on.

Writers that save many times (a streaming turn's write-ahead, its checkpoints and its final merge) open
one edit per save: the lock is never held across agent work, and each save is its own transaction. The
one save outside this module is ``Session.load`` rewriting a file whose adjacent duplicate partial rows
it collapsed, inside the load that ``edit`` itself calls.

The store (``api.store.session_store.Store.edit``) does the work: the one a caller passes (``store=``, its app's),
else the store in use (``api.store.models.store``, hermes-webui's way). The lock is the store's per-session lock
(reentrant: a body may call code that edits the same session).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from api.store import models
from api.store.session_store import Unchanged

__all__ = ["Unchanged", "create", "edit", "lock"]


def lock(session_id: str, *, store: models.Store | None = None) -> AbstractContextManager[Any]:
    """The per-session lock, for code that reads a session or moves its files without saving it."""
    return models.store(store).lock(session_id)


def edit(
    session_id: str, *, touch_updated_at: bool = True, store: models.Store | None = None
) -> AbstractContextManager[models.Session]:
    """Lock, load fully, yield the session, save once on a clean exit (``api.store.session_store.Store.edit``).

    Missing or unsafe ids are ``NotFound``, an unreadable file a 500. ``touch_updated_at=False`` keeps the
    sidebar order (metadata edits, checkpoints, markers).
    """
    return models.store(store).edit(session_id, touch_updated_at=touch_updated_at)


def create(
    session: models.Session, *, touch_updated_at: bool = True, store: models.Store | None = None
) -> None:
    """Save a session built in memory under its lock, then cache it; a failed save caches nothing."""
    models.store(store).create(session, touch_updated_at=touch_updated_at)
