"""Switching versions in process against a real ``state.db`` that holds every version's rows: the reconciled
transcript and model context follow the version shown, across a new turn, a restart and recovery; a kept
file that is missing, a link or a FIFO refuses the switch and changes nothing; a compression made before the
edited message survives a switch and the context keeps its summary.
"""

from __future__ import annotations

import os
import time

import pytest

from api.rules.errors import BadRequest, Conflict
from api.services import compression, session_ops, session_versions
from api.services.session_recovery import recover_all_sessions_on_startup
from api.store import models
from api.store.models import merge_session_messages_append_only, reconciled_state_db_messages_for_session
from talaria_testing.scripted_compressor import install_scripted_compressor
from talaria_testing.transcripts import conversation, message_row
from talaria_testing.version_switching import FIRST, INDEX, PREFIX, SECOND, SID, build


@pytest.fixture
def agent_db(tmp_path):
    """The agent's own database, holding the rows of both versions (as it does after an edit)."""
    from hermes_state import SessionDB

    db = SessionDB(db_path=tmp_path / "state.db")
    db.create_session(SID, source="webui")
    for m in PREFIX + FIRST + SECOND:
        db.append_message(SID, m["role"], m["content"], timestamp=m["timestamp"])
    yield db
    db.close()


def _texts(rows) -> list[str]:
    return [m.get("content") for m in rows]


def _views(agent_db) -> tuple[list[str], list[str]]:
    """(the reconciled transcript, the reconciled model context) of the session as the store holds it."""
    session = models.get_session(SID)
    state = agent_db.get_messages(SID)
    display = merge_session_messages_append_only(
        session.messages,
        state,
        truncation_watermark=session.truncation_watermark,
        truncation_boundary=session.truncation_boundary,
    )
    context = reconciled_state_db_messages_for_session(session, prefer_context=True, state_messages=state)
    return _texts(display), _texts(context)


def _restart(state_dir) -> dict:
    models.store().sessions.clear()
    models.store().index.forget(state_dir)
    return recover_all_sessions_on_startup(state_dir, rebuild_index=True)


def _new_turn(agent_db, text: str) -> list[str]:
    now = time.time()
    rows = [message_row("user", text, now), message_row("assistant", f"re: {text}", now + 0.5)]
    session = models.get_session(SID)
    session.messages.extend(dict(m) for m in rows)
    if session.context_messages:
        session.context_messages.extend(dict(m) for m in rows)
    session_ops.advance_watermark_after_turn(session, now)
    session.save()
    for m in rows:
        agent_db.append_message(SID, m["role"], m["content"], timestamp=m["timestamp"])
    return _texts(rows)


@pytest.mark.parametrize(("target", "rows", "hidden"), [(0, FIRST, SECOND), (1, SECOND, FIRST)])
def test_the_reconciled_views_follow_the_version_shown_across_a_turn_restart_and_recovery(
    state_dir, agent_db, target, rows, hidden
):
    build()
    if target == 1:
        session_versions.switch_version(SID, INDEX, 0)
    session_versions.switch_version(SID, INDEX, target)
    expected = _texts(PREFIX + rows)
    assert _views(agent_db) == (expected, expected)

    expected += _new_turn(agent_db, "next question")
    assert _views(agent_db) == (expected, expected)
    summary = _restart(state_dir)
    assert summary["restored"] == 0  # a switch to a shorter version is deliberate, not a loss
    assert _views(agent_db) == (expected, expected)
    assert not set(_texts(hidden)) & set(_views(agent_db)[1])


def test_a_switch_whose_kept_file_is_gone_or_unsafe_is_refused_and_changes_nothing(state_dir, tmp_path):
    build()
    (kept,) = state_dir.glob(f"{SID}.json.version-*")
    before = (state_dir / f"{SID}.json").read_bytes()
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(kept.read_bytes())
    kept.unlink()
    for make in (lambda: None, lambda: kept.symlink_to(outside), lambda: os.mkfifo(kept)):
        make()
        with pytest.raises(Conflict):
            session_versions.switch_version(SID, INDEX, 0)
        assert (state_dir / f"{SID}.json").read_bytes() == before
        assert sorted(p.name for p in state_dir.glob(f"{SID}.json.version-*")) == (
            [kept.name] if kept.exists() or kept.is_symlink() else []
        )
        if kept.exists() or kept.is_symlink():
            kept.unlink()


def test_a_compression_before_the_edited_message_survives_a_switch_and_keeps_its_summary(
    state_dir, monkeypatch
):
    install_scripted_compressor(monkeypatch)
    prefix = conversation("c1", "c2", "c3", "c4")
    first, second = conversation("v1 q", "v1 a", start=10.0), conversation("v2 q", "v2 a", start=20.0)
    models.Session(session_id=SID, title="c", model="fake-model", messages=[dict(m) for m in prefix]).save()
    compression.manual_compress(SID)
    compressed = list(models.get_session(SID).context_messages)

    def show(rows):
        session = models.get_session(SID)
        session.messages = [*session.messages, *[dict(m) for m in rows]]
        session.context_messages = [*session.context_messages, *[dict(m) for m in rows]]
        session.save()

    show(first)
    session_ops.truncate_session(SID, len(prefix))
    assert models.get_session(SID).context_messages == compressed  # the edit keeps the compression before it
    show(second)

    session_versions.switch_version(SID, len(prefix), 0)
    session = models.get_session(SID)
    assert _texts(session.messages) == _texts(prefix + first)
    assert session.context_messages == compressed + first
    assert session.compression_anchor_mode == "manual"
    session_versions.switch_version(SID, len(prefix), 1)
    assert models.get_session(SID).context_messages == compressed + second


def test_hermes_webui_reads_the_version_shown_as_a_linear_session_and_its_save_leaves_a_plain_one(state_dir):
    from talaria_testing import hermes_webui

    build()
    session_versions.switch_version(SID, INDEX, 0)
    path = state_dir / f"{SID}.json"
    doc = hermes_webui.load(path)
    assert _texts(doc["messages"]) == _texts(PREFIX + FIRST)
    assert not hermes_webui.reads_as_continuation(doc)
    hermes_webui.run_turn(path, "from hermes-webui", "its answer")
    models.store().sessions.clear()
    session = models.get_session(SID)
    assert _texts(session.messages) == _texts(PREFIX + FIRST) + ["from hermes-webui", "its answer"]
    assert session.message_versions is None  # its save dropped the field: no control names a lost tail
    with pytest.raises(BadRequest):
        session_versions.switch_version(SID, INDEX, 1)
