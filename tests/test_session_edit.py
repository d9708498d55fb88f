"""The one write path: ``session_edit.edit`` locks, loads, saves once, and reverts once on failure."""

from __future__ import annotations

import errno
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rules import jsonio
from api.rules.errors import NotFound
from api.store import atomic, models, session_edit
from api.store.models import Session
from talaria_testing import failed_saves
from talaria_testing.transcripts import conversation, message_row


def _saved(sid: str = "e1", n: int = 2) -> Session:
    session = Session(
        session_id=sid, title="T", workspace="/tmp", messages=conversation(*(f"m{i}" for i in range(n)))
    )
    session_edit.create(session)
    return session


def _on_disk(sid: str) -> dict:
    return jsonio.loads((models.store().session_dir / f"{sid}.json").read_bytes())


def _as_file(session: Session) -> dict:
    """The session as its file would hold it, without the figures a save derives."""
    payload = session.to_payload()
    return {k: payload[k] for k in ("title", "messages", "pinned", "context_messages")}


@pytest.fixture
def writes(monkeypatch):
    """The session files replaced (one per durable save)."""
    replaced: list[str] = []

    def hook(step, path):
        if step == "replaced" and path.name.endswith(".json") and path.name != "_index.json":
            replaced.append(path.name)

    monkeypatch.setattr(atomic, "STEP_HOOK", hook)
    return replaced


@pytest.fixture
def reverts(monkeypatch):
    """How many times a session became its file again."""
    calls: list[str] = []
    real = Session.revert_to_file

    def counted(self):
        calls.append(self.session_id)
        real(self)

    monkeypatch.setattr(Session, "revert_to_file", counted)
    return calls


def _refuse_saves_of(monkeypatch, name: str) -> None:
    def hook(step, path):
        if step == "tmp_written" and path.name.startswith(name + "."):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "STEP_HOOK", hook)


def test_a_clean_edit_saves_once_and_the_cache_holds_what_was_saved(state_dir, writes):
    _saved()
    writes.clear()
    with session_edit.edit("e1") as session:
        session.messages.append(message_row("user", "more", 5.0))
        session.title = "Renamed"
    assert writes == ["e1.json"]
    assert _on_disk("e1")["title"] == "Renamed"
    assert models.get_session("e1") is session
    assert [m["content"] for m in _on_disk("e1")["messages"]][-1] == "more"


def test_an_edit_that_finds_nothing_to_change_writes_nothing(state_dir, writes):
    _saved()
    before = (state_dir / "e1.json").read_bytes()
    writes.clear()
    with session_edit.edit("e1") as session:
        raise session_edit.Unchanged
    assert writes == []
    assert (state_dir / "e1.json").read_bytes() == before
    assert session.title == "T"


def test_an_edit_whose_body_raises_writes_nothing_and_reverts_once(state_dir, writes, reverts):
    _saved()
    before = (state_dir / "e1.json").read_bytes()
    writes.clear()
    with pytest.raises(ValueError, match="refused"), session_edit.edit("e1") as session:
        session.messages.clear()
        session.title = "Never saved"
        raise ValueError("refused")
    assert writes == []
    assert reverts == ["e1"]
    assert (state_dir / "e1.json").read_bytes() == before
    cached = models.get_session("e1")
    assert cached is session  # every holder of the object sees it as the file has it
    assert _as_file(cached) == {k: _on_disk("e1")[k] for k in _as_file(cached)}


def test_an_edit_refused_before_any_change_keeps_the_object_as_read_and_reads_nothing(state_dir, reverts):
    _saved()
    held = models.get_session("e1")
    with pytest.raises(ValueError), session_edit.edit("e1") as session:
        raise ValueError("refused")
    assert reverts == []
    assert models.get_session("e1") is held is session
    assert session.title == "T" and len(session.messages) == 2


def test_an_edit_whose_save_fails_reverts_once_and_no_later_save_carries_it(state_dir, monkeypatch, reverts):
    _saved()
    before = (state_dir / "e1.json").read_bytes()
    _refuse_saves_of(monkeypatch, "e1.json")
    with pytest.raises(OSError) as failed, session_edit.edit("e1") as session:
        session.messages.append(message_row("user", "lost", 5.0))
        session.title = "Lost"
    assert failed.value.errno == errno.ENOSPC
    assert reverts == ["e1"]
    assert (state_dir / "e1.json").read_bytes() == before
    assert session.title == "T" and len(session.messages) == 2
    monkeypatch.setattr(atomic, "STEP_HOOK", None)
    with session_edit.edit("e1", touch_updated_at=False) as session:
        session.pinned = True
    saved = _on_disk("e1")
    assert saved["pinned"] is True and saved["title"] == "T"
    assert [m["content"] for m in saved["messages"]] == ["m0", "m1"]


def _rename_and_grow(sid: str) -> None:
    with session_edit.edit(sid) as session:
        session.title = "Lost"
        session.messages.append(message_row("user", "lost", 5.0))


@pytest.mark.parametrize("fault", sorted(failed_saves.FAULTS))
def test_an_edit_the_real_disk_refuses_leaves_memory_and_file_as_they_were(tmp_path, fault):
    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, _sessions):
        _saved("disk")
        failed_saves.fails_and_changes_nothing(
            mnt, "disk", lambda: _rename_and_grow("disk"), failed_saves.FAULTS[fault]
        )


@pytest.mark.parametrize("sid", ["missing", "../e1", "e1/../../x", ""])
def test_an_edit_of_a_missing_or_unsafe_session_is_not_found_and_writes_nothing(state_dir, writes, sid):
    _saved()
    writes.clear()
    with pytest.raises(NotFound), session_edit.edit(sid):
        pytest.fail("the body of an edit of no session ran")
    assert writes == []


def test_a_failed_create_caches_nothing(state_dir, monkeypatch):
    _refuse_saves_of(monkeypatch, "new1.json")
    with pytest.raises(OSError):
        session_edit.create(Session(session_id="new1", title="N", workspace="/tmp", messages=[]))
    with pytest.raises(KeyError):
        models.get_session("new1")


def test_edits_of_one_session_run_one_at_a_time(state_dir):
    _saved()
    inside = threading.Event()
    release = threading.Event()

    def slow() -> None:
        with session_edit.edit("e1") as session:
            inside.set()
            release.wait(5)
            session.messages.append(message_row("user", "first", 5.0))

    worker = threading.Thread(target=slow)
    worker.start()
    assert inside.wait(5)
    second = threading.Thread(target=lambda: _append("second"))
    second.start()
    second.join(0.2)
    assert second.is_alive(), "a second edit ran while the first held the session"
    release.set()
    worker.join(5)
    second.join(5)
    assert [m["content"] for m in _on_disk("e1")["messages"]][-2:] == ["first", "second"]


def _append(text: str) -> None:
    with session_edit.edit("e1") as session:
        session.messages.append(message_row("user", text, 6.0))


# A model of the file: each step is an edit that saves, changes nothing, raises in its body, or meets a
# disk that refuses the save; after each step memory equals the file and the file equals the model.
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["save", "unchanged", "raise", "refused"]),
        st.sampled_from(["append", "title", "clear"]),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_memory_and_file_follow_only_the_edits_that_saved(state_dir, monkeypatch, steps):
    sid = "p" + uuid.uuid4().hex[:10]
    _saved(sid)
    model = {"title": "T", "messages": ["m0", "m1"]}
    for serial, (ending, change) in enumerate(steps):
        if ending == "refused":
            _refuse_saves_of(monkeypatch, f"{sid}.json")
        try:
            with session_edit.edit(sid) as session:
                if ending == "unchanged":
                    raise session_edit.Unchanged
                if change == "append":
                    session.messages.append(message_row("user", f"x{serial}", 10.0 + serial))
                elif change == "title":
                    session.title = f"t{serial}"
                else:
                    session.messages = []
                if ending == "raise":
                    raise RuntimeError("body failed")
        except (RuntimeError, OSError):
            pass
        finally:
            monkeypatch.setattr(atomic, "STEP_HOOK", None)
        if ending == "save":
            if change == "append":
                model["messages"].append(f"x{serial}")
            elif change == "title":
                model["title"] = f"t{serial}"
            else:
                model["messages"] = []
        disk = _on_disk(sid)
        assert {"title": disk["title"], "messages": [m["content"] for m in disk["messages"]]} == model
        cached = models.get_session(sid)
        assert cached.title == model["title"]
        assert [m["content"] for m in cached.messages] == model["messages"]
