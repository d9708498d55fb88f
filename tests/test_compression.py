"""Manual compression: only the context changes, errors change nothing, uncompress gives it back."""

from __future__ import annotations

import time

import pytest

from api.rules import jsonio
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import compression
from api.store.models import Session
from talaria_testing import failed_saves, scripted_turns
from talaria_testing.scripted_compressor import install_scripted_compressor


def _msg(role, content, ts):
    return {"role": role, "content": content, "timestamp": ts, "_ts": ts}


def _conversation(n=6):
    return [_msg("user" if i % 2 == 0 else "assistant", f"turn {i}", float(i + 1)) for i in range(n)]


@pytest.fixture
def session(state_dir):
    s = Session(session_id="c1", title="T", messages=_conversation(), model="fake")
    s.save()
    return s


def test_compress_keeps_visible_transcript_byte_for_byte(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    before = [dict(m) for m in session.messages]
    result = compression.manual_compress("c1")
    loaded = Session.load("c1")
    assert result["ok"] and result["changed"]
    assert loaded.messages == before
    assert [m["content"] for m in loaded.context_messages] == ["turn 0", "turn 5"]


def test_compress_stamps_anchor_watermark_mode_and_generation(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    t0 = time.time()
    compression.manual_compress("c1")
    loaded = Session.load("c1")
    assert loaded.compression_anchor_mode == "manual"
    assert loaded.truncation_watermark == loaded.truncation_boundary >= t0
    assert loaded.truncation_watermark == loaded.context_messages[-1]["timestamp"]
    assert loaded.compression_anchor_visible_idx == 5
    assert loaded.compression_anchor_message_key == {
        "role": "assistant",
        "ts": 6.0,
        "text": "turn 5",
        "attachments": 0,
    }
    assert len(loaded.compression_generation) == 32
    assert loaded.last_prompt_tokens >= 1
    assert (
        loaded.compression_anchor_summary.startswith(
            "[CONTEXT COMPACTION — REFERENCE ONLY] Compressed: 6 → 2 messages"
        )
        or loaded.compression_anchor_summary
    )


def test_compress_passes_focus_topic_cut_to_500_chars(session, monkeypatch):
    record = install_scripted_compressor(monkeypatch)
    result = compression.manual_compress("c1", "  " + "f" * 100_000)
    assert result["focus_topic"] == "f" * 500
    assert record["agents"][0].context_compressor.calls[0]["focus_topic"] == "f" * 500
    assert record["agents"][0].kwargs["session_id"] == "c1"


def test_compress_that_changes_nothing_changes_nothing(session, monkeypatch):
    install_scripted_compressor(monkeypatch, lambda messages, **kw: messages)
    before = session.path.read_bytes()
    result = compression.manual_compress("c1")
    assert result["changed"] is False
    assert session.path.read_bytes() == before


def test_compress_keeps_a_backup_holding_messages_the_live_file_lacks(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    session.messages = session.messages[:4]
    session.save()  # shrinking save → .bak holds 6 messages
    bak = session.backup_path.read_bytes()
    compression.manual_compress("c1")
    kept = list(session.path.parent.glob("c1.json.bak.precompress-*"))
    assert [p.read_bytes() for p in kept] == [bak]


@pytest.mark.parametrize(
    "compress_fn,message",
    [
        (
            lambda m, **kw: (_ for _ in ()).throw(RuntimeError("boom at /home/me/secret/path")),
            "Compression failed: boom at <path>",
        ),
        (lambda m, **kw: "not a list", "Compression failed: the compressor returned no messages"),
        (
            lambda m, **kw: [{"content": "no role"}],
            "Compression failed: the compressor returned a message without a role",
        ),
        (lambda m, **kw: [], "Compression failed: the compressor returned no messages"),
    ],
)
def test_compressor_failures_are_clear_errors_and_change_nothing(session, monkeypatch, compress_fn, message):
    install_scripted_compressor(monkeypatch, compress_fn)
    before = session.path.read_bytes()
    with pytest.raises(BadRequest) as err:
        compression.manual_compress("c1")
    assert err.value.message == message
    assert session.path.read_bytes() == before


def test_compress_refuses_short_conversations(state_dir, monkeypatch):
    install_scripted_compressor(monkeypatch)
    Session(session_id="short", messages=_conversation(3)).save()
    with pytest.raises(BadRequest, match="need at least 4 messages"):
        compression.manual_compress("short")


def test_compress_refuses_a_session_mid_turn(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    with scripted_turns.live_turn(session):
        before = session.path.read_bytes()
        with pytest.raises(Conflict):
            compression.manual_compress("c1")
        assert session.path.read_bytes() == before


def test_compress_without_a_provider_is_a_clear_error(session, monkeypatch):
    install_scripted_compressor(monkeypatch, api_key=None)
    with pytest.raises(BadRequest, match="No provider configured"):
        compression.manual_compress("c1")


def test_compress_of_missing_session_is_404(state_dir, monkeypatch):
    install_scripted_compressor(monkeypatch)
    with pytest.raises(NotFound):
        compression.manual_compress("missing")


def test_session_changed_during_compression_is_409_and_not_applied(session, monkeypatch):
    from api.store.models import get_session

    def compress_while_editing(messages, **kw):
        get_session("c1").messages.append(_msg("user", "typed meanwhile", 99.0))
        return [messages[0], messages[-1]]

    install_scripted_compressor(monkeypatch, compress_while_editing)
    with pytest.raises(Conflict, match="modified during compression"):
        compression.manual_compress("c1")
    assert Session.load("c1").context_messages == []


def test_uncompress_restores_the_previous_context_and_clears_the_anchor(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    session.context_messages = list(session.messages)
    session.save()
    compression.manual_compress("c1")
    compression.uncompress("c1")
    loaded = Session.load("c1")
    assert loaded.context_messages == loaded.messages
    assert loaded.compression_anchor_mode is None
    assert loaded.compression_anchor_summary is None
    assert loaded.truncation_watermark is None
    assert loaded.compression_generation is None


def test_uncompress_keeps_turns_added_after_the_compression(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    session.context_messages = list(session.messages)
    session.save()
    compression.manual_compress("c1")
    s = Session.load("c1")
    new_turn = [_msg("user", "after", time.time() + 1), _msg("assistant", "reply", time.time() + 2)]
    s.messages.extend(new_turn)
    s.context_messages.extend(new_turn)
    s.save()
    from api.store import models

    models.store().sessions.clear()
    compression.uncompress("c1")
    loaded = Session.load("c1")
    assert [m["content"] for m in loaded.context_messages] == [f"turn {i}" for i in range(6)] + [
        "after",
        "reply",
    ]


def test_uncompress_without_a_compression_is_409(session):
    with pytest.raises(Conflict):
        compression.uncompress("c1")


def test_async_compress_job_reports_done(session, monkeypatch):
    install_scripted_compressor(monkeypatch)
    assert compression.start_compress_job("c1")["status"] == "running"
    deadline = time.time() + 5
    status = compression.compress_job_status("c1")
    while status["status"] == "running" and time.time() < deadline:
        time.sleep(0.02)
        status = compression.compress_job_status("c1")
    assert status["status"] == "done"
    assert status["result"]["ok"] is True
    assert compression.compress_job_status("other")["status"] == "idle"


def test_anchor_key_uses_ts_and_collapsed_text():
    key = compression.anchor_message_key(
        {"role": "user", "content": "  a \n\n b ", "_ts": 3.5, "timestamp": 9}
    )
    assert key == {"role": "user", "ts": 3.5, "text": "a b", "attachments": 0}


def test_compressor_that_aborts_its_summary_is_a_clear_error_and_changes_nothing(session, monkeypatch):
    from talaria_testing import scripted_compressor

    install_scripted_compressor(monkeypatch, lambda messages, **kw: messages)
    monkeypatch.setattr(scripted_compressor.ScriptedCompressor, "_last_compress_aborted", True, raising=False)
    before = session.path.read_bytes()
    with pytest.raises(BadRequest, match="could not write the summary"):
        compression.manual_compress("c1")
    assert session.path.read_bytes() == before


# ---------------------------------------------------------------------- promise 10: a failed save changes nothing


@pytest.mark.parametrize("fault", sorted(failed_saves.FAULTS))
@pytest.mark.parametrize("action", ["compress", "uncompress"])
def test_a_compression_whose_save_fails_changes_nothing_and_a_later_pin_keeps_the_file(
    action, fault, tmp_path
):
    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, _sessions):
        msgs = _conversation()
        s = Session(session_id="cmp", messages=msgs, context_messages=list(msgs), title="Kept", model="fake")
        s.save()
        if action == "uncompress":
            compression.manual_compress("cmp")
            operation = lambda: compression.uncompress("cmp")  # noqa: E731
        else:
            operation = lambda: compression.manual_compress("cmp")  # noqa: E731
        failed_saves.fails_and_changes_nothing(mnt, "cmp", operation, failed_saves.FAULTS[fault])
        on_disk = Session.load("cmp")
        assert Session.load("cmp").context_messages == on_disk.context_messages
        assert bool(on_disk.compression_undo) is (action == "uncompress")


def test_a_backup_older_than_the_compression_is_set_aside_where_hermes_webui_recovery_does_not_look(
    session, monkeypatch
):
    """hermes-webui restores ``<sid>.json.bak`` over a live file with fewer messages at its start-up."""
    from api.services import session_ops
    from api.services.session_recovery import recover_all_sessions_on_startup

    install_scripted_compressor(monkeypatch)
    session_ops.undo_last("c1")  # a shrinking save: the 6-message file becomes the backup
    older = session.backup_path.read_bytes()
    compressed = compression.manual_compress("c1")
    assert compressed["changed"]
    folder = session.path.parent
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".json.bak")]
    kept = list(folder.glob("c1.json.bak.precompress-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == older
    live = session.path.read_bytes()
    assert recover_all_sessions_on_startup(folder)["restored"] == 0
    assert session.path.read_bytes() == live


def test_a_file_of_an_older_version_with_the_undo_inside_still_uncompresses_and_then_keeps_it_beside(
    session, monkeypatch, state_dir
):
    """Older Talaria wrote compression_undo and compression_generation into the session file itself; such
    a file still uncompresses, and its next save moves the undo beside the file, where a hermes-webui save
    (which drops both keys) cannot erase it."""
    from api.store import models
    from talaria_testing import hermes_webui

    install_scripted_compressor(monkeypatch)
    session.context_messages = list(session.messages)
    session.save()
    compression.manual_compress("c1")
    path = state_dir / "c1.json"
    doc = jsonio.loads(path.read_bytes())
    old_layout = dict(doc, compression_undo=Session.load("c1").compression_undo)
    old_layout["compression_anchor_details"] = {
        k: v for k, v in doc["compression_anchor_details"].items() if k != "compression_generation"
    }
    for undo_file in state_dir.glob("c1.json.undo-*"):
        undo_file.unlink()
    path.write_bytes(jsonio.dumps(old_layout))
    models.store().sessions.clear()
    loaded = Session.load("c1")
    assert (
        loaded.compression_undo is not None and loaded.compression_generation == doc["compression_generation"]
    )
    loaded.pinned = True
    loaded.save()  # a save by this version
    hermes_webui.run_turn(path, "later", "answer")
    models.store().sessions.clear()
    compression.uncompress("c1")
    assert [m["content"] for m in Session.load("c1").context_messages] == [f"turn {i}" for i in range(6)] + [
        "later",
        "answer",
    ]
