"""The session catalogue in process: create, rename, pin, archive, delete and its undo, search; a failed save changes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.rules import jsonio
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import session_catalogue, session_views
from api.store import config, models, tombstones
from api.store.models import Session
from talaria_testing import failed_saves, scripted_turns
from talaria_testing.sessions import saved_session
from talaria_testing.transcripts import message_row

# ---------------------------------------------------------------------- create and edit


def test_create_saves_the_session_at_once(state_dir):
    full = session_catalogue.create_session(model="m1", title="  My   title ")
    path = state_dir / f"{full['session_id']}.json"
    assert path.is_file()
    on_disk = json.loads(path.read_bytes())
    assert on_disk["title"] == "My title" and on_disk["model"] == "m1" and on_disk["manual_title"] is True
    assert full["messages"] == [] and full["total_messages"] == 0 and full["has_more_before"] is False


def test_create_accepts_an_existing_workspace_folder_under_the_roots(state_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(tmp_path))
    full = session_catalogue.create_session(workspace=str(tmp_path))
    assert full["workspace"] == str(tmp_path.resolve())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"workspace": "/no/such/folder"},
        {"workspace": 5},
        {"workspace": "a\x00b"},
        {"model": 3},
        {"title": ""},
        {"title": "x" * 201},
        {"title": ["a"]},
    ],
)
def test_create_rejects_bad_fields_and_writes_nothing(state_dir, kwargs):
    with pytest.raises(BadRequest):
        session_catalogue.create_session(**kwargs)
    assert list(state_dir.glob("*.json")) == [] or [p.name for p in state_dir.glob("*.json")] == [
        "_index.json"
    ]


def test_rename_sets_manual_title_and_keeps_updated_at(state_dir):
    session = saved_session(n=2)
    before = session.updated_at
    row = session_catalogue.rename_session(session.session_id, "New name")
    assert row["title"] == "New name" and row["manual_title"] is True
    assert json.loads(session.path.read_bytes())["updated_at"] == before


@pytest.mark.parametrize("title", ["", "   ", None, 42, "x" * 201])
def test_rename_rejects_bad_titles(state_dir, title):
    session = saved_session()
    with pytest.raises(BadRequest):
        session_catalogue.rename_session(session.session_id, title)


def test_rename_of_a_missing_session_is_404(state_dir):
    with pytest.raises(NotFound):
        session_catalogue.rename_session("nosuchsession", "x")


def test_pin_and_archive_need_booleans(state_dir):
    session = saved_session()
    assert session_catalogue.set_flag(session.session_id, "pinned", True)["pinned"] is True
    assert session_catalogue.set_flag(session.session_id, "archived", True)["archived"] is True
    assert json.loads(session.path.read_bytes())["pinned"] is True
    for value in (1, "true", None):
        with pytest.raises(BadRequest):
            session_catalogue.set_flag(session.session_id, "pinned", value)


# ---------------------------------------------------------------------- delete and undo


def test_delete_moves_files_to_trash_tombstones_and_hides(state_dir):
    session = saved_session(n=4)
    session.messages = session.messages[:2]
    session.save()  # a shrinking save leaves a .bak
    sid = session.session_id
    assert session.backup_path.exists()
    result = session_catalogue.delete_session(sid)
    trash = state_dir.parent / "trash" / result["undo_token"]
    assert sorted(p.name for p in trash.iterdir()) == [f"{sid}.json", f"{sid}.json.bak"]
    assert not session.path.exists() and not session.backup_path.exists()
    assert sid in tombstones.read_deleted_ids(state_dir)
    assert sid not in {r["session_id"] for r in models.all_sessions()}
    with pytest.raises(NotFound):
        session_views.get_session_payload(sid)
    with pytest.raises(NotFound):
        session_catalogue.delete_session(sid)


def test_restore_deleted_brings_back_files_row_and_lifts_the_tombstone(state_dir):
    session = saved_session(title="keep me", n=3)
    sid = session.session_id
    token = session_catalogue.delete_session(sid)["undo_token"]
    row = session_catalogue.restore_deleted(token)
    assert row["session_id"] == sid and row["title"] == "keep me" and row["message_count"] == 3
    assert session.path.is_file()
    assert sid not in tombstones.read_deleted_ids(state_dir)
    assert sid in {r["session_id"] for r in models.all_sessions()}
    assert not (state_dir.parent / "trash" / token).exists()
    with pytest.raises(NotFound):
        session_catalogue.restore_deleted(token)


def test_delete_and_its_undo_carry_the_backup_set_aside_by_a_compression(state_dir):
    session = saved_session(n=3)
    sid = session.session_id
    aside = state_dir / f"{sid}.json.bak.precompress-1700000000000"
    aside.write_bytes(b"older")
    token = session_catalogue.delete_session(sid)["undo_token"]
    assert not aside.exists() and (state_dir.parent / "trash" / token / aside.name).read_bytes() == b"older"
    session_catalogue.restore_deleted(token)
    assert aside.read_bytes() == b"older" and session.path.is_file()


@pytest.mark.parametrize(
    "token", [None, 5, "", "../../etc-1234567890123", "abc", "abc-12", "a/b-1234567890123"]
)
def test_restore_rejects_malformed_tokens(state_dir, token):
    with pytest.raises(BadRequest):
        session_catalogue.restore_deleted(token)


def test_restore_refuses_to_overwrite_a_session_that_came_back(state_dir):
    session = saved_session(n=1)
    token = session_catalogue.delete_session(session.session_id)["undo_token"]
    Session(session_id=session.session_id, title="new", messages=[message_row("user", "x", 5.0)]).save()
    with pytest.raises(Conflict):
        session_catalogue.restore_deleted(token)


def test_delete_refuses_a_streaming_session(state_dir):
    session = saved_session(n=1)
    with scripted_turns.live_turn(session), pytest.raises(Conflict):
        session_catalogue.delete_session(session.session_id)
    assert session.path.exists()


def test_a_session_left_pending_by_a_failed_save_can_be_deleted(state_dir):
    """The file of a turn whose final save failed still names its stream; delete answered 409 until
    the next chat/start although nothing streamed."""
    session = saved_session(n=1)
    session.active_stream_id, session.pending_user_message = "gone", "hello"
    session.save()
    assert (
        models.get_session(session.session_id).active_stream_id == "gone"
    )  # held in memory, as after the save
    session_catalogue.delete_session(session.session_id)
    assert not session.path.exists()


# ---------------------------------------------------------------------- search


def test_search_matches_titles_case_insensitively(state_dir):
    saved_session(title="Holiday plans")
    saved_session(title="Work notes")
    rows = session_catalogue.search_sessions("HOLIDAY")["sessions"]
    assert [r["title"] for r in rows] == ["Holiday plans"]
    assert "match" not in rows[0]
    assert session_catalogue.search_sessions("   ")["sessions"] == []


def test_content_search_finds_messages_with_index_and_snippet(state_dir):
    session = Session(
        title="misc",
        messages=[
            message_row("user", "hello", 1.0),
            message_row("assistant", "The Quick brown fox jumps", 2.0),
        ],
    )
    session.save()
    assert session_catalogue.search_sessions("quick brown")["sessions"] == []
    models.store().sessions.clear()  # read from the file, not the cache
    rows = session_catalogue.search_sessions("quick brown", content=True)["sessions"]
    assert len(rows) == 1
    assert rows[0]["match"]["message_idx"] == 1
    assert "Quick brown fox" in rows[0]["match"]["snippet"]


def test_a_content_snippet_is_the_plain_text_a_reader_sees_not_the_markdown(state_dir):
    """Search snippets showed raw Markdown (asterisks, backticks, link targets)."""
    text = "Intro.\n\n## Setup\n\nRun **the quick** `install` step from [the docs](https://example.com/x)."
    Session(title="misc", messages=[message_row("assistant", text, 1.0)]).save()
    (row,) = session_catalogue.search_sessions("the quick", content=True)["sessions"]
    assert row["match"]["snippet"] == "Intro. Setup Run the quick install step from the docs."
    # Words that only the source holds together (across the marks) still match, on the source.
    (row,) = session_catalogue.search_sessions("quick** `install", content=True)["sessions"]
    assert "**the quick** `install`" in row["match"]["snippet"]


def test_content_search_handles_queries_json_escapes(state_dir):
    Session(title="q", messages=[message_row("user", 'she said "hi"\nthen left', 1.0)]).save()
    models.store().sessions.clear()
    rows = session_catalogue.search_sessions('said "hi"', content=True)["sessions"]
    assert len(rows) == 1


def test_search_caps_results(state_dir):
    for i in range(session_catalogue.SEARCH_MAX_RESULTS + 5):
        Session(title=f"same {i}").save()
    assert len(session_catalogue.search_sessions("same")["sessions"]) == session_catalogue.SEARCH_MAX_RESULTS


@given(text=st.text(max_size=40), start=st.integers(0, 40), length=st.integers(1, 10))
def test_raw_precheck_never_hides_a_real_match(text, start, length):
    needle = text[start : start + length].lower()
    if not needle or needle not in text.lower():
        return
    raw = jsonio.dumps_document({"messages": [{"role": "user", "content": text}]})
    assert session_catalogue._raw_may_contain(raw, needle)
    assert session_catalogue.find_in_messages([{"role": "user", "content": text}], needle) is not None


# ---------------------------------------------------------------------- promise 10: a failed save changes nothing

METADATA_EDITS = {
    "rename": lambda sid: session_catalogue.rename_session(sid, "Never saved"),
    "pin": lambda sid: session_catalogue.set_flag(sid, "pinned", True),
    "archive": lambda sid: session_catalogue.set_flag(sid, "archived", True),
    "delete": lambda sid: session_catalogue.delete_session(sid),
}


@pytest.mark.parametrize("fault", sorted(failed_saves.FAULTS))
@pytest.mark.parametrize("edit", sorted(METADATA_EDITS))
def test_an_edit_whose_save_fails_changes_nothing_and_a_later_pin_keeps_the_file(edit, fault, tmp_path):
    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, _sessions):
        msgs = [{"role": "user", "content": "kept", "timestamp": 1.0}]
        Session(session_id="adm", title="Kept", messages=msgs).save()
        failed_saves.fails_and_changes_nothing(
            mnt, "adm", lambda: METADATA_EDITS[edit]("adm"), failed_saves.FAULTS[fault]
        )
