"""Retry, undo, truncate (edit), clear: each shrinks on purpose and stamps its provenance."""

from __future__ import annotations

import pytest

from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import session_ops
from api.store import atomic
from api.store.models import Session
from talaria_testing import failed_saves, scripted_turns
from talaria_testing.transcripts import conversation, message_row


@pytest.fixture
def session(state_dir):
    msgs = conversation("u1", "a1", "u2", "a2")
    s = Session(session_id="ops", messages=msgs, context_messages=list(msgs), title="Kept")
    s.save()
    return s


def test_undo_removes_the_last_turn_and_stamps_a_shrink_generation(session):
    result = session_ops.undo_last("ops")
    loaded = Session.load("ops")
    assert result == {"removed_count": 2, "removed_preview": "u2"}
    assert [m["content"] for m in loaded.messages] == ["u1", "a1"]
    assert [m["content"] for m in loaded.context_messages] == ["u1", "a1"]
    assert loaded.truncation_watermark == loaded.truncation_boundary == 2.0
    assert len(loaded.intentional_shrink_generation) == 32
    assert len(Session.load("ops").messages) == 2
    assert session.backup_path.exists()


def test_retry_returns_the_last_user_text(session):
    assert session_ops.retry_last("ops") == {"last_user_text": "u2", "removed_count": 2}


def test_retry_and_undo_with_no_user_message_raise_value_error(state_dir):
    Session(session_id="empty", messages=[message_row("assistant", "hello", 1.0)]).save()
    with pytest.raises(ValueError, match="No previous message to retry."):
        session_ops.retry_last("empty")
    with pytest.raises(ValueError, match="Nothing to undo."):
        session_ops.undo_last("empty")


def test_undo_refuses_while_streaming(session):
    with scripted_turns.live_turn(session), pytest.raises(Conflict):
        session_ops.undo_last("ops")


def test_truncate_keeps_the_first_rows_and_aligns_the_context(session):
    session_ops.truncate_session("ops", 1)
    loaded = Session.load("ops")
    assert [m["content"] for m in loaded.messages] == ["u1"]
    assert [m["content"] for m in loaded.context_messages] == ["u1"]
    assert loaded.truncation_watermark == 1.0


@pytest.mark.parametrize("bad", [-1, "2", 2.0, None, True, 99])
def test_truncate_rejects_bad_keep_counts_and_changes_nothing(session, bad):
    before = session.path.read_bytes()
    with pytest.raises(BadRequest):
        session_ops.truncate_session("ops", bad)
    assert session.path.read_bytes() == before


def _left_pending(sid: str) -> Session:
    """A session whose file names a turn no process runs (the server died mid-turn)."""
    msgs = conversation("u1", "a1", "u2")
    s = Session(
        session_id=sid, messages=msgs, title="Kept", active_stream_id="gone", pending_user_message="u2"
    )
    s.save()
    return s


def test_an_edit_after_an_interrupted_turn_closes_it_in_the_same_single_save(state_dir, monkeypatch):
    _left_pending("stale")
    written = []
    monkeypatch.setattr(
        atomic, "STEP_HOOK", lambda step, path: written.append(path.name) if step == "replaced" else None
    )
    session_ops.truncate_session("stale", 2)
    assert written.count("stale.json") == 1
    loaded = Session.load("stale")
    assert [m["content"] for m in loaded.messages] == ["u1", "a1"]
    assert loaded.active_stream_id is None and loaded.pending_user_message is None


def test_a_refused_edit_after_an_interrupted_turn_leaves_the_file_as_it_was(state_dir):
    session = _left_pending("stale")
    before = session.path.read_bytes()
    with pytest.raises(BadRequest):
        session_ops.truncate_session("stale", 99)
    assert session.path.read_bytes() == before


def test_truncate_context_alignment_keeps_a_leading_summary():
    display = [
        message_row("user", "u1", 1.0),
        message_row("assistant", "a1", 2.0),
        message_row("user", "u2", 3.0),
        message_row("assistant", "a2", 4.0),
    ]
    summary = {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] s"}
    context = [summary, display[2], display[3]]
    assert session_ops.truncate_context_for_display_keep(display, context, 2) == [summary]
    assert session_ops.truncate_context_for_display_keep(display, context, 3) == [summary, display[2]]


def test_clear_empties_with_the_zero_sentinel_and_a_clear_generation(session):
    session_ops.clear_session("ops")
    loaded = Session.load("ops")
    assert loaded.messages == [] and loaded.context_messages == []
    assert loaded.truncation_watermark == 0.0 and loaded.truncation_boundary == 0.0
    assert len(loaded.clear_generation) == 32
    assert loaded.title == "Untitled"


def test_clear_keeps_a_manual_title(session):
    session.manual_title = True
    session.save()
    session_ops.clear_session("ops")
    assert Session.load("ops").title == "Kept"


@pytest.mark.parametrize(
    "messages,expected",
    [
        ([], 0.0),
        ([{"timestamp": 5}], 5.0),
        ([{"_ts": 7.5}], 7.5),
        ([{"timestamp": "bad"}], 0.0),
        (["x"], 0.0),
    ],
)
def test_truncation_watermark_reads_timestamp_then_ts(messages, expected):
    assert session_ops._truncation_watermark_for(messages) == expected


def test_watermark_advances_after_a_new_turn_but_zero_stays(state_dir):
    s = Session(session_id="w", messages=[message_row("user", "x", 10.0)], truncation_watermark=2.0)
    session_ops.advance_watermark_after_turn(s)
    assert s.truncation_watermark == 10.0
    s.truncation_watermark = 0.0
    session_ops.advance_watermark_after_turn(s)
    assert s.truncation_watermark == 0.0


def _compressed(state_dir) -> Session:
    """Six rows, compressed after the fourth (anchor row 3), one turn since."""
    msgs = [message_row("user" if i % 2 == 0 else "assistant", f"m{i}", float(i + 1)) for i in range(6)]
    summary = {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] m0..m3", "timestamp": 4.0}
    s = Session(
        session_id="cmp",
        messages=msgs,
        context_messages=[summary, msgs[3], msgs[4], msgs[5]],
        compression_anchor_visible_idx=3,
        compression_anchor_details={"message_idx": 3},
        compression_undo={"context_messages": list(msgs[:4]), "compressed_len": 2},
    )
    s.save()
    return s


@pytest.mark.parametrize("keep", [0, 2, 3])
def test_an_edit_that_removes_summarized_rows_forgets_the_compression(state_dir, keep):
    _compressed(state_dir)
    session_ops.truncate_session("cmp", keep)
    loaded = Session.load("cmp")
    assert loaded.context_messages == [] and loaded.compression_undo is None
    assert loaded.compression_anchor_visible_idx is None
    assert [m["content"] for m in loaded.messages] == [f"m{i}" for i in range(keep)]


def test_an_edit_after_the_anchor_keeps_the_compression(state_dir):
    _compressed(state_dir)
    session_ops.undo_last("cmp")
    loaded = Session.load("cmp")
    assert [m["content"] for m in loaded.context_messages] == [
        "[CONTEXT COMPACTION — REFERENCE ONLY] m0..m3",
        "m3",
    ]
    assert loaded.compression_undo is not None and loaded.compression_anchor_visible_idx == 3


# ---------------------------------------------------------------------- promise 10: a failed save changes nothing

HISTORY_EDITS = {
    "clear": lambda sid: session_ops.clear_session(sid),
    "undo": lambda sid: session_ops.undo_last(sid),
    "retry": lambda sid: session_ops.retry_last(sid),
    "truncate": lambda sid: session_ops.truncate_session(sid, 1),
}


@pytest.mark.parametrize("fault", sorted(failed_saves.FAULTS))
@pytest.mark.parametrize("edit", sorted(HISTORY_EDITS))
def test_a_history_edit_whose_save_fails_changes_nothing_and_a_later_pin_keeps_the_file(
    edit, fault, tmp_path
):
    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, _sessions):
        msgs = [
            message_row("user", "u1", 1.0),
            message_row("assistant", "a1", 2.0),
            message_row("user", "u2", 3.0),
        ]
        Session(session_id="ops", messages=msgs, context_messages=list(msgs), title="Kept").save()
        failed_saves.fails_and_changes_nothing(
            mnt, "ops", lambda: HISTORY_EDITS[edit]("ops"), failed_saves.FAULTS[fault]
        )


def test_undo_in_a_compressed_session_keeps_the_removed_turns_state_db_rows_out_of_the_context(state_dir):
    from api.rules.anchor import anchor_message_key
    from api.store.models import reconciled_state_db_messages_for_session

    _compressed(state_dir)
    session = Session.load("cmp")
    session.compression_anchor_message_key = anchor_message_key(session.messages[3])
    # The compressed context was stamped when it was made, later than the rows it stands for.
    for k, row in enumerate(session.context_messages):
        row["timestamp"] = 50.0 + k
    session.messages.append(message_row("user", "removed", 60.0))
    session.context_messages.append(message_row("user", "removed", 60.0))
    session.save()
    session_ops.undo_last("cmp")
    loaded = Session.load("cmp")
    earlier = [message_row("user" if i % 2 == 0 else "assistant", f"m{i}", float(i + 1)) for i in range(6)]
    state_rows = [
        *earlier,
        message_row("user", "removed", 60.0),
        message_row("assistant", "its answer", 61.0),
    ]
    view = reconciled_state_db_messages_for_session(loaded, prefer_context=True, state_messages=state_rows)
    assert "removed" not in [m["content"] for m in view] and "its answer" not in [m["content"] for m in view]


def test_history_edits_of_a_session_file_that_is_a_link_are_not_found(state_dir, tmp_path):
    """A link where the session file should be raised ValueError here, which the history-edit routes
    answered as 200 with an error naming the file; every service now loads sessions the same way."""
    outside = tmp_path / "outside.json"
    outside.write_text('{"session_id": "linked", "messages": [{"role": "user", "content": "hi"}]}')
    (state_dir / "linked.json").symlink_to(outside)
    for edit in (session_ops.undo_last, session_ops.retry_last, session_ops.clear_session):
        with pytest.raises(NotFound):
            edit("linked")
    assert "hi" in outside.read_text()
