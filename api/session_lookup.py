"""One Talaria session by id, for a request: the session, or a domain error a person can act on.

An unsafe or unknown id is ``NotFound`` before any path is built; a link, FIFO or device where a
session file should be is not served; a file that cannot be parsed is a clear 500 that points at the
recovery audit. The folder is ``api.models.SESSION_DIR``, read at call time (tests patch it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from api import models
from api.errors import ApiError, NotFound
from api.session_fields import is_safe_session_id

log = logging.getLogger("talaria.admin")


def session_dir() -> Path:
    return Path(models.SESSION_DIR)


def load_session(sid: str) -> models.Session:
    """The session, or NotFound; an unreadable file is a clear 500 that points at the recovery audit."""
    if not is_safe_session_id(sid):
        raise NotFound("Session not found")
    try:
        return models.get_session(sid)
    except KeyError:
        raise NotFound("Session not found") from None
    except ValueError as exc:  # a link, FIFO or device where a session file should be
        log.warning("session %s is not readable as a session: %s", sid, exc)
        raise NotFound("Session not found") from None
    except Exception as exc:  # noqa: BLE001 - a hostile or damaged file: parse errors, wrong types, depth
        log.warning("session %s could not be loaded: %s: %s", sid, type(exc).__name__, exc)
        raise ApiError("Session file could not be read; run the recovery audit", status=500) from None
