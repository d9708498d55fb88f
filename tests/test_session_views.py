"""Sessions as the page shows them, in process: paging, rendered messages, the anchor index, the sidebar, agent sessions."""

from __future__ import annotations

import json
import time
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.agent import agent_sessions
from api.services import session_catalogue, session_list, session_views
from api.store.models import Session
from talaria_testing.sessions import saved_session
from talaria_testing.transcripts import message_row

# ---------------------------------------------------------------------- paging


def test_paging_returns_the_last_messages_before_an_index(state_dir):
    session = saved_session(n=10)
    page = session_views.get_session_payload(session.session_id, msg_limit=3)["session"]
    assert [m["_idx"] for m in page["messages"]] == [7, 8, 9]
    assert page["has_more_before"] is True and page["total_messages"] == 10
    older = session_views.get_session_payload(session.session_id, msg_limit=3, msg_before=7)["session"]
    assert [m["_idx"] for m in older["messages"]] == [4, 5, 6]
    first = session_views.get_session_payload(session.session_id, msg_limit=5, msg_before=2)["session"]
    assert [m["_idx"] for m in first["messages"]] == [0, 1] and first["has_more_before"] is False
    everything = session_views.get_session_payload(session.session_id)["session"]
    assert len(everything["messages"]) == 10 and everything["has_more_before"] is False


@given(
    total=st.integers(0, 50),
    limit=st.one_of(st.none(), st.integers(1, 60)),
    before=st.one_of(st.none(), st.integers(0, 80)),
)
def test_page_bounds_are_a_window_ending_before_msg_before(total, limit, before):
    start, end = session_views.page_bounds(total, limit, before)
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
            message_row("user", "**bold** <script>alert(1)</script>", 1.0),
            message_row("assistant", [{"type": "text", "text": "[x](javascript:alert(1))"}], 2.0),
            {"role": "tool", "content": "raw <b>tool</b>", "tool_call_id": "c1"},
        ],
    )
    session.save()
    messages = session_views.get_session_payload(session.session_id)["session"]["messages"]
    assert "<strong>bold</strong>" in messages[0]["html"] and "<script" not in messages[0]["html"]
    assert "href" not in messages[1]["html"]  # the link is dropped: shown as inert text
    assert "html" not in messages[2]
    assert messages[0]["content"] == "**bold** <script>alert(1)</script>"  # stored content unchanged


def test_full_session_reports_can_uncompress(state_dir):
    session = saved_session(n=2)
    assert session_views.full_session(session)["can_uncompress"] is False
    session.compression_undo = {"context_messages": []}
    assert session_views.full_session(session)["can_uncompress"] is True


# ---------------------------------------------------------------------- agent sessions


@pytest.fixture
def fake_state_db(monkeypatch):
    module = types.ModuleType("api.store.state_db")
    module.rows = []
    module.messages = {}
    module.list_agent_sessions = lambda **_: list(module.rows)
    module.lineage_messages = lambda sid: ([sid], list(module.messages.get(sid, [])))
    module.compression_parents = dict
    monkeypatch.setattr(agent_sessions, "state_db", module)
    return module


def test_agent_sessions_exclude_talaria_webui_and_deleted_ids(state_dir, fake_state_db):
    mine = saved_session(n=1)
    gone = saved_session(n=1)
    session_catalogue.delete_session(gone.session_id)
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
    listing = session_views.list_sessions()
    assert [a["id"] for a in listing["agent_sessions"]] == ["cli1"]
    assert listing["agent_sessions"][0] == {
        "id": "cli1", "title": "From the CLI", "source": "cli", "model": "m", "started_at": 5.0, "message_count": 2, "read_only": True,
    }  # fmt: skip


def test_agent_session_is_returned_read_only(state_dir, fake_state_db):
    fake_state_db.rows = [{"id": "cli1", "title": "CLI chat", "source": "cli"}]
    fake_state_db.messages = {"cli1": [message_row("user", "hi", 1.0), message_row("assistant", "*yo*", 2.0)]}
    session = session_views.get_session_payload("cli1", msg_limit=1)["session"]
    assert session["read_only"] is True and session["title"] == "CLI chat"
    assert [m["_idx"] for m in session["messages"]] == [1] and "<em>yo</em>" in session["messages"][0]["html"]
    assert session["has_more_before"] is True and session["total_messages"] == 2


def test_a_broken_state_db_reader_means_no_agent_sessions(state_dir, fake_state_db):
    def boom(**_):
        raise RuntimeError("locked")

    fake_state_db.list_agent_sessions = boom
    assert session_views.list_sessions()["agent_sessions"] == []


def test_listing_is_newest_first(state_dir):
    old = Session(title="old", updated_at=time.time() - 100)
    old.save(touch_updated_at=False)
    new = saved_session(title="new")
    rows = session_views.list_sessions()["sessions"]
    assert [r["session_id"] for r in rows] == [new.session_id, old.session_id]


def test_the_sidebar_page_carries_the_listing_rows_projected_and_follows_changes(state_dir):
    first = saved_session(title="one")

    def page() -> dict:
        return json.loads(b"".join(session_views.sessions_page_json()))

    listing = session_views.list_sessions()
    assert page()["sessions"] == [session_list.sidebar_row(r) for r in listing["sessions"]]
    assert page()["agent_sessions"] == listing["agent_sessions"]
    session_catalogue.rename_session(first.session_id, "renamed")
    saved_session(title="two")
    assert [r["title"] for r in page()["sessions"]] == ["two", "renamed"]


def test_a_session_compressed_elsewhere_gets_its_anchor_index_from_the_server(state_dir):
    """hermes-webui records the anchor's key but no index: the page is sent the index all the same."""
    rows = [
        {"role": "user", "content": "q1", "_ts": 1.0},
        {"role": "assistant", "content": "a1", "_ts": 2.0},
        {"role": "user", "content": "q2", "_ts": 3.0},
    ]
    key = {"role": "assistant", "ts": 2.0, "text": "a1", "attachments": 0}
    Session(session_id="anch1", messages=rows, compression_anchor_message_key=key).save()
    assert session_views.full_session_by_id("anch1")["compression_anchor_idx"] == 1
