"""Session administration in process: create, edit, paging, delete and undo, search, import, agent sessions."""

from __future__ import annotations

import json
import os
import time
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api import config, models, session_admin, session_index, session_list, tombstones
from api.errors import BadRequest, Conflict, NotFound
from api.models import Session
from talaria_testing import failed_saves


def _msg(role: str, content, ts: float) -> dict:
    return {"role": role, "content": content, "timestamp": ts}


def _saved(title: str = "t", n: int = 0, **kw) -> Session:
    messages = [_msg("user" if i % 2 == 0 else "assistant", f"message {i}", 1000.0 + i) for i in range(n)]
    session = Session(title=title, messages=messages, **kw)
    session.save()
    return session


# ---------------------------------------------------------------------- create and edit


def test_create_saves_the_session_at_once(state_dir):
    full = session_admin.create_session(model="m1", title="  My   title ")
    path = state_dir / f"{full['session_id']}.json"
    assert path.is_file()
    on_disk = json.loads(path.read_bytes())
    assert on_disk["title"] == "My title" and on_disk["model"] == "m1" and on_disk["manual_title"] is True
    assert full["messages"] == [] and full["total_messages"] == 0 and full["has_more_before"] is False


def test_create_accepts_an_existing_workspace_folder_under_the_roots(state_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(tmp_path))
    full = session_admin.create_session(workspace=str(tmp_path))
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
        session_admin.create_session(**kwargs)
    assert list(state_dir.glob("*.json")) == [] or [p.name for p in state_dir.glob("*.json")] == [
        "_index.json"
    ]


def test_rename_sets_manual_title_and_keeps_updated_at(state_dir):
    session = _saved(n=2)
    before = session.updated_at
    row = session_admin.rename_session(session.session_id, "New name")
    assert row["title"] == "New name" and row["manual_title"] is True
    assert json.loads(session.path.read_bytes())["updated_at"] == before


@pytest.mark.parametrize("title", ["", "   ", None, 42, "x" * 201])
def test_rename_rejects_bad_titles(state_dir, title):
    session = _saved()
    with pytest.raises(BadRequest):
        session_admin.rename_session(session.session_id, title)


def test_rename_of_a_missing_session_is_404(state_dir):
    with pytest.raises(NotFound):
        session_admin.rename_session("nosuchsession", "x")


def test_pin_and_archive_need_booleans(state_dir):
    session = _saved()
    assert session_admin.set_flag(session.session_id, "pinned", True)["pinned"] is True
    assert session_admin.set_flag(session.session_id, "archived", True)["archived"] is True
    assert json.loads(session.path.read_bytes())["pinned"] is True
    for value in (1, "true", None):
        with pytest.raises(BadRequest):
            session_admin.set_flag(session.session_id, "pinned", value)


# ---------------------------------------------------------------------- paging


def test_paging_returns_the_last_messages_before_an_index(state_dir):
    session = _saved(n=10)
    page = session_admin.get_session_payload(session.session_id, msg_limit=3)["session"]
    assert [m["_idx"] for m in page["messages"]] == [7, 8, 9]
    assert page["has_more_before"] is True and page["total_messages"] == 10
    older = session_admin.get_session_payload(session.session_id, msg_limit=3, msg_before=7)["session"]
    assert [m["_idx"] for m in older["messages"]] == [4, 5, 6]
    first = session_admin.get_session_payload(session.session_id, msg_limit=5, msg_before=2)["session"]
    assert [m["_idx"] for m in first["messages"]] == [0, 1] and first["has_more_before"] is False
    everything = session_admin.get_session_payload(session.session_id)["session"]
    assert len(everything["messages"]) == 10 and everything["has_more_before"] is False


@given(
    total=st.integers(0, 50),
    limit=st.one_of(st.none(), st.integers(1, 60)),
    before=st.one_of(st.none(), st.integers(0, 80)),
)
def test_page_bounds_are_a_window_ending_before_msg_before(total, limit, before):
    start, end = session_admin.page_bounds(total, limit, before)
    assert 0 <= start <= end <= total
    assert end == (total if before is None else min(before, total))
    if limit is not None:
        assert end - start == min(limit, end)
    else:
        assert start == 0


def test_messages_carry_sanitized_html_for_user_and_assistant_only(state_dir):
    session = Session(
        title="t",
        messages=[
            _msg("user", "**bold** <script>alert(1)</script>", 1.0),
            _msg("assistant", [{"type": "text", "text": "[x](javascript:alert(1))"}], 2.0),
            {"role": "tool", "content": "raw <b>tool</b>", "tool_call_id": "c1"},
        ],
    )
    session.save()
    messages = session_admin.get_session_payload(session.session_id)["session"]["messages"]
    assert "<strong>bold</strong>" in messages[0]["html"] and "<script" not in messages[0]["html"]
    assert "href" not in messages[1]["html"]  # the link is dropped: shown as inert text
    assert "html" not in messages[2]
    assert messages[0]["content"] == "**bold** <script>alert(1)</script>"  # stored content unchanged


def test_full_session_reports_can_uncompress(state_dir):
    session = _saved(n=2)
    assert session_admin.full_session(session)["can_uncompress"] is False
    session.compression_undo = {"context_messages": []}
    assert session_admin.full_session(session)["can_uncompress"] is True


def test_unsafe_missing_or_reserved_ids_are_404(state_dir):
    _saved(n=1)  # the folder now holds _index.json
    session_admin.delete_session(_saved(n=1).session_id)  # ... and the delete tombstone
    for sid in ("missing1", "../x", "_index", "_deleted_webui_sessions"):
        with pytest.raises(NotFound):
            session_admin.get_session_payload(sid)
        with pytest.raises(NotFound):
            session_admin.rename_session(sid, "x")
        with pytest.raises(NotFound):
            session_admin.delete_session(sid)
    session_index.flush()
    assert (state_dir / "_index.json").is_file() and (state_dir / "_deleted_webui_sessions.json").is_file()


# ---------------------------------------------------------------------- delete and undo


def test_delete_moves_files_to_trash_tombstones_and_hides(state_dir):
    session = _saved(n=4)
    session.messages = session.messages[:2]
    session.save()  # a shrinking save leaves a .bak
    sid = session.session_id
    assert session.backup_path.exists()
    result = session_admin.delete_session(sid)
    trash = state_dir.parent / "trash" / result["undo_token"]
    assert sorted(p.name for p in trash.iterdir()) == [f"{sid}.json", f"{sid}.json.bak"]
    assert not session.path.exists() and not session.backup_path.exists()
    assert sid in tombstones.read_deleted_ids(state_dir)
    assert sid not in {r["session_id"] for r in models.all_sessions()}
    with pytest.raises(NotFound):
        session_admin.get_session_payload(sid)
    with pytest.raises(NotFound):
        session_admin.delete_session(sid)


def test_restore_deleted_brings_back_files_row_and_lifts_the_tombstone(state_dir):
    session = _saved(title="keep me", n=3)
    sid = session.session_id
    token = session_admin.delete_session(sid)["undo_token"]
    row = session_admin.restore_deleted(token)
    assert row["session_id"] == sid and row["title"] == "keep me" and row["message_count"] == 3
    assert session.path.is_file()
    assert sid not in tombstones.read_deleted_ids(state_dir)
    assert sid in {r["session_id"] for r in models.all_sessions()}
    assert not (state_dir.parent / "trash" / token).exists()
    with pytest.raises(NotFound):
        session_admin.restore_deleted(token)


def test_delete_and_its_undo_carry_the_backup_set_aside_by_a_compression(state_dir):
    session = _saved(n=3)
    sid = session.session_id
    aside = state_dir / f"{sid}.json.bak.precompress-1700000000000"
    aside.write_bytes(b"older")
    token = session_admin.delete_session(sid)["undo_token"]
    assert not aside.exists() and (state_dir.parent / "trash" / token / aside.name).read_bytes() == b"older"
    session_admin.restore_deleted(token)
    assert aside.read_bytes() == b"older" and session.path.is_file()


@pytest.mark.parametrize(
    "token", [None, 5, "", "../../etc-1234567890123", "abc", "abc-12", "a/b-1234567890123"]
)
def test_restore_rejects_malformed_tokens(state_dir, token):
    with pytest.raises(BadRequest):
        session_admin.restore_deleted(token)


def test_restore_refuses_to_overwrite_a_session_that_came_back(state_dir):
    session = _saved(n=1)
    token = session_admin.delete_session(session.session_id)["undo_token"]
    Session(session_id=session.session_id, title="new", messages=[_msg("user", "x", 5.0)]).save()
    with pytest.raises(Conflict):
        session_admin.restore_deleted(token)


def test_delete_refuses_a_streaming_session(state_dir):
    session = _saved(n=1)
    session.active_stream_id = "stream1"
    models.cache_session(session)
    with pytest.raises(Conflict):
        session_admin.delete_session(session.session_id)
    assert session.path.exists()


# ---------------------------------------------------------------------- search


def test_search_matches_titles_case_insensitively(state_dir):
    _saved(title="Holiday plans")
    _saved(title="Work notes")
    rows = session_admin.search_sessions("HOLIDAY")["sessions"]
    assert [r["title"] for r in rows] == ["Holiday plans"]
    assert "match" not in rows[0]
    assert session_admin.search_sessions("   ")["sessions"] == []


def test_content_search_finds_messages_with_index_and_snippet(state_dir):
    session = Session(
        title="misc",
        messages=[_msg("user", "hello", 1.0), _msg("assistant", "The Quick brown fox jumps", 2.0)],
    )
    session.save()
    assert session_admin.search_sessions("quick brown")["sessions"] == []
    with models.LOCK:
        models.SESSIONS.clear()  # read from the file, not the cache
    rows = session_admin.search_sessions("quick brown", content=True)["sessions"]
    assert len(rows) == 1
    assert rows[0]["match"]["message_idx"] == 1
    assert "Quick brown fox" in rows[0]["match"]["snippet"]


def test_content_search_handles_queries_json_escapes(state_dir):
    Session(title="q", messages=[_msg("user", 'she said "hi"\nthen left', 1.0)]).save()
    with models.LOCK:
        models.SESSIONS.clear()
    rows = session_admin.search_sessions('said "hi"', content=True)["sessions"]
    assert len(rows) == 1


def test_search_caps_results(state_dir):
    for i in range(session_admin.SEARCH_MAX_RESULTS + 5):
        Session(title=f"same {i}").save()
    assert len(session_admin.search_sessions("same")["sessions"]) == session_admin.SEARCH_MAX_RESULTS


@given(text=st.text(max_size=40), start=st.integers(0, 40), length=st.integers(1, 10))
def test_raw_precheck_never_hides_a_real_match(text, start, length):
    needle = text[start : start + length].lower()
    if not needle or needle not in text.lower():
        return
    raw = models.dumps_session_json({"messages": [{"role": "user", "content": text}]})
    assert session_admin._raw_may_contain(raw, needle)
    assert session_admin.find_in_messages([{"role": "user", "content": text}], needle) is not None


# ---------------------------------------------------------------------- agent sessions


@pytest.fixture
def fake_state_db(monkeypatch):
    module = types.ModuleType("api.state_db")
    module.rows = []
    module.messages = {}
    module.list_agent_sessions = lambda: list(module.rows)
    module.get_state_db_session_messages = lambda sid: list(module.messages.get(sid, []))
    monkeypatch.setattr(session_admin, "state_db", module)
    return module


def test_agent_sessions_exclude_talaria_webui_and_deleted_ids(state_dir, fake_state_db):
    mine = _saved(n=1)
    gone = _saved(n=1)
    session_admin.delete_session(gone.session_id)
    fake_state_db.rows = [
        {
            "id": "cli1",
            "title": "From the CLI",
            "source": "cli",
            "model": "m",
            "started_at": 5.0,
            "message_count": 2,
        },
        {"id": mine.session_id, "source": "webui"},
        {"id": gone.session_id, "source": "cli"},
        {"id": "rotated1", "source": "webui"},
        {"id": "../bad", "source": "cli"},
        "not a row",
    ]
    listing = session_admin.list_sessions()
    assert [a["id"] for a in listing["agent_sessions"]] == ["cli1"]
    assert listing["agent_sessions"][0] == {
        "id": "cli1", "title": "From the CLI", "source": "cli", "model": "m", "started_at": 5.0, "message_count": 2, "read_only": True,
    }  # fmt: skip


def test_agent_session_is_returned_read_only(state_dir, fake_state_db):
    fake_state_db.rows = [{"id": "cli1", "title": "CLI chat", "source": "cli"}]
    fake_state_db.messages = {"cli1": [_msg("user", "hi", 1.0), _msg("assistant", "*yo*", 2.0)]}
    session = session_admin.get_session_payload("cli1", msg_limit=1)["session"]
    assert session["read_only"] is True and session["title"] == "CLI chat"
    assert [m["_idx"] for m in session["messages"]] == [1] and "<em>yo</em>" in session["messages"][0]["html"]
    assert session["has_more_before"] is True and session["total_messages"] == 2


def test_a_broken_state_db_reader_means_no_agent_sessions(state_dir, fake_state_db):
    def boom():
        raise RuntimeError("locked")

    fake_state_db.list_agent_sessions = boom
    assert session_admin.list_sessions()["agent_sessions"] == []


def test_listing_is_newest_first(state_dir):
    old = Session(title="old", updated_at=time.time() - 100)
    old.save(touch_updated_at=False)
    new = _saved(title="new")
    rows = session_admin.list_sessions()["sessions"]
    assert [r["session_id"] for r in rows] == [new.session_id, old.session_id]


def test_the_sidebar_page_carries_the_listing_rows_projected_and_follows_changes(state_dir):
    first = _saved(title="one")

    def page() -> dict:
        return json.loads(b"".join(session_admin.sessions_page_json()))

    listing = session_admin.list_sessions()
    assert page()["sessions"] == [session_list.sidebar_row(r) for r in listing["sessions"]]
    assert page()["agent_sessions"] == listing["agent_sessions"]
    session_admin.rename_session(first.session_id, "renamed")
    _saved(title="two")
    assert [r["title"] for r in page()["sessions"]] == ["two", "renamed"]


def test_links_and_fifos_are_not_served_and_a_misnamed_file_stays_in_its_own_file(state_dir, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"session_id": "linked", "title": "outside", "messages": []}))
    (state_dir / "linked.json").symlink_to(outside)
    os.mkfifo(state_dir / "fifo.json")
    (state_dir / "other.json").write_text(
        json.dumps({"session_id": "someone_else", "title": "x", "messages": []})
    )
    (state_dir / "weird.json").write_text(
        json.dumps({"title": ["x"], "messages": [{"role": ["user"], "content": {"a": 1}}]})
    )
    for sid in ("linked", "fifo"):
        with pytest.raises(NotFound):
            session_admin.get_session_payload(sid)
    session_admin.rename_session("other", "renamed")  # the file name decides which session it is
    assert json.loads((state_dir / "other.json").read_text())["title"] == "renamed"
    assert not (state_dir / "someone_else.json").exists()
    weird = session_admin.get_session_payload("weird")["session"]
    assert weird["messages"][0]["_idx"] == 0 and "html" not in weird["messages"][0]


# ---------------------------------------------------------------------- promise 10: a failed save changes nothing

METADATA_EDITS = {
    "rename": lambda sid: session_admin.rename_session(sid, "Never saved"),
    "pin": lambda sid: session_admin.set_flag(sid, "pinned", True),
    "archive": lambda sid: session_admin.set_flag(sid, "archived", True),
    "delete": lambda sid: session_admin.delete_session(sid),
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


def test_a_session_compressed_elsewhere_gets_its_anchor_index_from_the_server(state_dir):
    """hermes-webui records the anchor's key but no index: the page is sent the index all the same."""
    rows = [
        {"role": "user", "content": "q1", "_ts": 1.0},
        {"role": "assistant", "content": "a1", "_ts": 2.0},
        {"role": "user", "content": "q2", "_ts": 3.0},
    ]
    key = {"role": "assistant", "ts": 2.0, "text": "a1", "attachments": 0}
    Session(session_id="anch1", messages=rows, compression_anchor_message_key=key).save()
    assert session_admin.full_session_by_id("anch1")["compression_anchor_idx"] == 1
