"""Each deliberate edit stays as the person left it across a new turn, reconciliation with a real
``state.db`` that still holds the removed rows, a restart, and recovery; a genuine loss afterwards is
still restored from the backup.
"""

from __future__ import annotations

import time

import pytest

import api.store.models as models
from api.services import compression, session_ops
from api.services.session_recovery import recover_all_sessions_on_startup
from api.store import state_db
from api.store.models import (
    Session,
    merge_session_messages_append_only,
    reconciled_state_db_messages_for_session,
)
from talaria_testing.scripted_compressor import install_scripted_compressor
from talaria_testing.transcripts import conversation, message_row

SID = "e2e_edit"


ORIGINAL = conversation("u1", "a1", "u2", "a2", "u3", "a3")


@pytest.fixture
def agent_db(tmp_path):
    from hermes_state import SessionDB

    db = SessionDB(db_path=tmp_path / "state.db")
    db.create_session(SID, source="webui")
    for m in ORIGINAL:
        db.append_message(SID, m["role"], m["content"], timestamp=m["timestamp"])
    yield db, tmp_path / "state.db"
    db.close()


def _state_rows(db_path):
    return state_db.get_state_db_session_messages(SID, db_path=db_path)


def _new_turn(db, text):
    """What a completed chat turn leaves: both rows in the session file and in the agent's state.db."""
    now = time.time()
    user, answer = message_row("user", text, now), message_row("assistant", f"re: {text}", now + 0.5)
    session = models.get_session(SID)
    session.messages.extend([dict(user), dict(answer)])
    if session.context_messages:
        session.context_messages.extend([dict(user), dict(answer)])
    session_ops.advance_watermark_after_turn(session, now)
    session.save()
    db.append_message(SID, "user", user["content"], timestamp=user["timestamp"])
    db.append_message(SID, "assistant", answer["content"], timestamp=answer["timestamp"])


def _restart(state_dir):
    models.store().sessions.clear()
    models.store().index.forget(state_dir)
    return recover_all_sessions_on_startup(state_dir, rebuild_index=True)


def _contents(rows):
    return [m.get("content") for m in rows]


def _compress(sid):
    compression.manual_compress(sid)


def _compress_then_uncompress(sid):
    compression.manual_compress(sid)
    compression.uncompress(sid)


def _truncate_two(sid):
    session_ops.truncate_session(sid, 2)


EDITS = {
    # name: (operation, visible transcript after it (before the new turn), model context after it)
    "compress": (_compress, _contents(ORIGINAL), ["u1", "a3"]),
    "uncompress": (_compress_then_uncompress, _contents(ORIGINAL), _contents(ORIGINAL)),
    "retry": (session_ops.retry_last, ["u1", "a1", "u2", "a2"], ["u1", "a1", "u2", "a2"]),
    "undo": (session_ops.undo_last, ["u1", "a1", "u2", "a2"], ["u1", "a1", "u2", "a2"]),
    "truncate": (_truncate_two, ["u1", "a1"], ["u1", "a1"]),
    "clear": (session_ops.clear_session, [], []),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edit_survives_new_turn_reconciliation_restart_and_recovery(edit, state_dir, agent_db, monkeypatch):
    install_scripted_compressor(monkeypatch)
    db, db_path = agent_db
    Session(
        session_id=SID,
        title="E2E",
        model="fake-model",
        messages=[dict(m) for m in ORIGINAL],
        context_messages=[dict(m) for m in ORIGINAL],
    ).save()
    operation, visible, context = EDITS[edit]

    operation(SID)
    _new_turn(db, "next question")
    expected_visible = visible + ["next question", "re: next question"]
    expected_context = context + ["next question", "re: next question"]

    session = models.get_session(SID)
    state = _state_rows(db_path)
    assert len(state) == len(ORIGINAL) + 2  # the agent still holds every removed row
    display = merge_session_messages_append_only(
        session.messages,
        state,
        truncation_watermark=session.truncation_watermark,
        truncation_boundary=session.truncation_boundary,
    )
    assert _contents(display) == expected_visible
    model_context = reconciled_state_db_messages_for_session(
        session, prefer_context=True, state_messages=state
    )
    assert _contents(model_context) == expected_context

    session.save()
    summary = _restart(state_dir)
    assert summary["restored"] == 0
    reloaded = models.get_session(SID)
    assert _contents(reloaded.messages) == expected_visible
    assert (
        _contents(
            reconciled_state_db_messages_for_session(reloaded, prefer_context=True, state_messages=state)
        )
        == expected_context
    )

    # A genuine loss afterwards: a bad write drops the newest rows; the backup brings them back.
    broken = models.get_session(SID)
    del broken.messages[-2:]
    broken.save()
    summary = _restart(state_dir)
    assert summary["restored"] == 1
    assert _contents(models.get_session(SID).messages) == expected_visible
