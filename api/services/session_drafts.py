"""A session's unsent draft, kept on the server so any tab or device that opens the session finds it.

The draft lives in the session file's ``composer_draft`` field as hermes-webui keeps it (a dict; here
``{"text", "updated_at"}``), saved durably through ``session_edit`` without touching ``updated_at``: a draft
is not activity, so the sidebar order stays. Sending a message clears it (``api.services.streaming``).
"""

from __future__ import annotations

import time
from typing import Any

from api.rules.errors import BadRequest, Conflict, PayloadTooLarge
from api.rules.sanitize import scrub_surrogates
from api.store import models, session_edit
from api.store.session_lookup import load_session

DRAFT_MAX_BYTES = 200 * 1024  # as much as one message may carry


def _shown(session_id: str, draft: Any) -> dict[str, Any]:
    draft = draft if isinstance(draft, dict) else {}
    text = draft.get("text") if isinstance(draft.get("text"), str) else ""
    updated = draft.get("updated_at") if isinstance(draft.get("updated_at"), (int, float)) else None
    return {"session_id": session_id, "text": text, "updated_at": updated}


def get_draft(session_id: str, *, store: models.Store | None = None) -> dict[str, Any]:
    """``{session_id, text, updated_at}``; an empty text when there is none."""
    session = load_session(session_id, store=store)
    with session_edit.lock(session_id, store=store):
        return _shown(session_id, session.composer_draft)


def save_draft(session_id: str, text: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Keep ``text`` as the session's draft (an empty one removes it); the file is saved only on a change."""
    if not isinstance(text, str):
        raise BadRequest("text must be a string")
    if len(text.encode("utf-8", "surrogatepass")) > DRAFT_MAX_BYTES:
        raise PayloadTooLarge(f"the draft is too long (at most {DRAFT_MAX_BYTES // 1024} KB)")
    text = scrub_surrogates(text)
    with session_edit.edit(session_id, touch_updated_at=False, store=store) as session:
        if session.read_only:
            raise Conflict("This session is read-only.")
        if _shown(session_id, session.composer_draft)["text"] == text:
            raise session_edit.Unchanged
        session.composer_draft = {"text": text, "updated_at": time.time()} if text else {}
    return _shown(session_id, session.composer_draft)
