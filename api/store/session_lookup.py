"""One Talaria session by id, for a request: the session, or a domain error a person can act on.

An unsafe or unknown id is ``NotFound`` before any path is built; a link, FIFO or device where a
session file should be is not served; a file that cannot be parsed is a clear 500 that points at the
recovery audit. The session comes from the store a caller passes (``store=``, its app's), else the store in use
(``api.store.models.store``).
"""

from __future__ import annotations

from pathlib import Path

from api.store import models


def session_dir(*, store: models.Store | None = None) -> Path:
    return models.store(store).session_dir


def load_session(sid: str, *, store: models.Store | None = None) -> models.Session:
    """The session, or NotFound; an unreadable file is a clear 500 that points at the recovery audit."""
    return models.store(store).load(sid)
