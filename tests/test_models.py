"""Session fields, the file layout, save/load and the .bak policy."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import api.store.models as models
from api.store.models import Session, get_session
from talaria_testing import foreign_writer
from talaria_testing.transcripts import conversation, message_row


def _session(sid="s1", n=4, **kw):
    msgs = conversation(*(f"m{i}" for i in range(n)))
    return Session(session_id=sid, title="T", workspace="/tmp", model="m", messages=msgs, **kw)


def test_defaults_follow_the_field_table_normalisation(state_dir):
    s = Session(
        session_id="abc", model_provider="  OpenAI ", pinned=1, context_messages="nope", share_token=" t "
    )
    assert s.title == "Untitled"
    assert s.model_provider == "openai"
    assert s.pinned is True
    assert s.context_messages == []
    assert s.share_token == "t"
    assert s.truncation_watermark is None
    assert s.compression_anchor_details == {}
    assert s.input_tokens == 0


def test_missing_session_id_gets_a_twelve_hex_id(state_dir):
    assert len(Session().session_id) == 12


def test_zero_watermark_is_kept_as_the_truncate_to_empty_sentinel(state_dir):
    s = _session(truncation_watermark=0.0, truncation_boundary="0")
    s.save()
    loaded = Session.load("s1")
    assert loaded.truncation_watermark == 0.0
    assert loaded.truncation_boundary == 0.0


def test_file_layout_puts_metadata_before_messages_and_context_last(state_dir):
    s = _session(context_messages=[message_row("user", "m0", 1.0)])
    s.save()
    keys = list(json.loads(s.path.read_text()).keys())
    assert keys[0] == "session_id"
    assert keys.index("message_count") < keys.index("messages")
    assert keys.index("share_created_at") < keys.index("messages")
    assert keys.index("messages") < keys.index("context_messages")


def test_save_then_load_keeps_unknown_keys(state_dir):
    s = Session(
        session_id="u1", messages=[message_row("user", "hi", 1.0)], last_usage={"a": 1}, future_field=[1, 2]
    )
    s.save()
    raw = json.loads(s.path.read_text())
    raw["from_the_future"] = {"x": "y"}
    s.path.write_text(json.dumps(raw))
    loaded = Session.load("u1")
    loaded.save()
    again = json.loads(s.path.read_text())
    assert again["last_usage"] == {"a": 1}
    assert again["future_field"] == [1, 2]
    assert again["from_the_future"] == {"x": "y"}


_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
_tool_call = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=12), "type": st.just("function"),
     "function": st.fixed_dictionaries({"name": st.text(max_size=12), "arguments": st.text()})}
)  # fmt: skip
_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.text(), _json_values),
    },
    optional={
        "timestamp": st.floats(min_value=0, max_value=2e9, allow_nan=False),
        "tool_calls": st.lists(_tool_call, max_size=3),
        "extra": _json_values,
        "_partial": st.just(False),
    },
)
_unknown_keys = st.dictionaries(
    st.text(min_size=1, max_size=10).filter(lambda k: k.startswith("zz_")), _json_values, max_size=3
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_message, max_size=8), extra=_unknown_keys, title=st.text(max_size=40))
def test_save_load_is_identity_for_any_messages(state_dir, messages, extra, title):
    s = Session(
        session_id="prop",
        title=title or "Untitled",
        messages=messages,
        context_messages=messages[:2],
        **extra,
    )
    s.save()
    loaded = Session.load("prop")
    assert loaded.messages == messages
    assert loaded.context_messages == messages[:2]
    assert loaded.title == (title or "Untitled")
    payload = loaded.to_payload()
    for key, value in extra.items():
        assert payload[key] == value


@pytest.mark.parametrize(
    "sid",
    [
        "../x",
        "a/b",
        "a\x00b",
        "x" * 10_000,
        "sessión",
        "",
        ".",
        "..",
        "a.json",
        " a",
        "_index",
        "_deleted_webui_sessions",
    ],
)
def test_hostile_session_ids_never_reach_the_file_system(state_dir, sid):
    assert Session.load(sid) is None
    assert Session.load_metadata_only(sid) is None
    with pytest.raises(KeyError):
        get_session(sid)
    s = Session(session_id="ok")
    s.session_id = sid
    with pytest.raises(ValueError):
        s.save()
    assert list(state_dir.iterdir()) == []


def test_shrinking_save_writes_the_previous_file_as_backup(state_dir):
    s = _session(n=4)
    s.save()
    before = s.path.read_bytes()
    s.messages = s.messages[:2]
    s.save()
    assert s.backup_path.read_bytes() == before
    assert len(Session.load("s1").messages) == 2


def test_growing_save_leaves_the_backup_alone(state_dir):
    s = _session(n=4)
    s.save()
    s.messages = s.messages[:2]
    s.save()
    bak = s.backup_path.read_bytes()
    s.messages.append(message_row("user", "new", 9.0))
    s.save()
    assert s.backup_path.read_bytes() == bak


def test_a_stale_object_never_overwrites_a_newer_file(state_dir):
    """Promise 11: s lags the disk (another writer appended a row); its save keeps that row."""
    s = _session(n=4)
    s.save()
    other = Session.load("s1")
    other.messages.append(message_row("user", "x", 10.0))
    other.save()
    s.pinned = True
    s.save()
    on_disk = json.loads(s.path.read_text())
    assert len(on_disk["messages"]) == 5 and on_disk["pinned"] is True
    assert len(s.messages) == 5


def test_empty_save_during_a_live_turn_is_refused(state_dir):
    s = _session(n=4)
    s.save()
    before = s.path.read_bytes()
    s.messages = []
    s.active_stream_id = "stream1"
    assert s.save() is False
    assert s.path.read_bytes() == before


def test_metadata_only_stub_refuses_to_save(state_dir):
    _session(n=4).save()
    stub = Session.load_metadata_only("s1")
    assert stub.metadata_only
    assert stub.messages == []
    assert stub.message_count() == 4
    with pytest.raises(RuntimeError):
        stub.save()


def test_corrupt_existing_file_is_kept_before_it_is_overwritten(state_dir):
    s = _session(n=2)
    s.save()
    s.path.write_bytes(b'{"session_id": "s1", "messages": [tor')
    s.save()
    kept = list(state_dir.glob("s1.json.corrupt-*"))
    assert len(kept) == 1
    assert kept[0].read_bytes() == b'{"session_id": "s1", "messages": [tor'
    assert len(Session.load("s1").messages) == 2


def test_adjacent_duplicate_partials_collapse_on_load_with_a_backup(state_dir):
    partial = {"role": "assistant", "content": "", "_partial": True}
    s = Session(
        session_id="p1", messages=[message_row("user", "q", 1.0), dict(partial), dict(partial), dict(partial)]
    )
    s.save()
    loaded = Session.load("p1")
    assert len(loaded.messages) == 2
    assert len(json.loads(loaded.backup_path.read_text())["messages"]) == 4


def test_a_session_needing_a_collapse_still_loads_from_a_read_only_disk(tmp_path):
    from talaria_testing import failed_saves

    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, _sessions):
        partial = {"role": "assistant", "content": "", "_partial": True}
        Session(
            session_id="p1", messages=[message_row("user", "q", 1.0), dict(partial), dict(partial)]
        ).save()
        before = (mnt / "sessions" / "p1.json").read_bytes()
        with failed_saves.READ_ONLY(mnt):
            loaded = Session.load("p1")
            loaded_bytes = (mnt / "sessions" / "p1.json").read_bytes()
        assert len(loaded.messages) == 2 and loaded_bytes == before  # collapsed as read; saved later


def test_get_session_caches_and_reloads_when_the_file_changes(state_dir):
    _session(n=2).save()
    first = get_session("s1")
    assert get_session("s1") is first
    other = Session.load("s1")
    other.messages.append(message_row("user", "later", 5.0))
    other.save()
    assert len(get_session("s1").messages) == 3


def test_get_session_missing_raises_key_error(state_dir):
    with pytest.raises(KeyError):
        get_session("nope")


def test_compact_counts_the_messages_it_holds(state_dir):
    s = _session(n=3)
    s.save()
    s.messages.append(message_row("user", "x", 9.0))
    s.save()
    row = models.all_sessions()[0]
    assert row["message_count"] == 4
    assert row["user_message_count"] == 3
    assert row["last_message_at"] == 9.0


def test_a_fifo_or_link_in_place_of_a_session_file_is_refused_without_hanging(state_dir, tmp_path):
    import os

    os.mkfifo(state_dir / "fifo.json")
    outside = tmp_path / "outside.json"
    outside.write_text('{"session_id": "linked", "messages": []}')
    (state_dir / "linked.json").symlink_to(outside)
    for sid in ("fifo", "linked"):
        with pytest.raises(ValueError):
            Session.load(sid)


def test_the_file_name_decides_the_session_id(state_dir):
    (state_dir / "mine.json").write_text('{"session_id": "someone_else", "title": "t", "messages": []}')
    loaded = Session.load("mine")
    assert loaded.session_id == "mine"
    loaded.save()
    assert not (state_dir / "someone_else.json").exists()


def test_shrinking_save_fails_when_its_backup_cannot_be_written(state_dir, monkeypatch):
    from api.store import atomic

    s = _session(n=4)
    s.save()
    before = s.path.read_bytes()
    real = atomic.write_bytes_durable

    def no_space_for_backups(path, data, **kw):
        if path.name.endswith(".bak"):
            raise OSError(28, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(atomic, "write_bytes_durable", no_space_for_backups)
    s.messages = s.messages[:1]
    with pytest.raises(OSError):
        s.save()
    assert s.path.read_bytes() == before
    assert len(s.messages) == 4  # promise 10: the object holds what the file holds again


# ---------------------------------------------------------------------- promise 11: another writer's file is never overwritten


def test_another_programs_rename_and_pin_survive_our_appended_turn(state_dir):
    s = _session(n=4)
    s.save()
    foreign_writer.run(s.path, "--title", "Theirs", "--pin")
    s.messages.append(message_row("user", "ours", 9.0))
    s.save()
    doc = json.loads(s.path.read_text())
    assert (doc["title"], doc["pinned"], doc["manual_title"]) == ("Theirs", True, True)
    assert [m["content"] for m in doc["messages"]] == ["m0", "m1", "m2", "m3", "ours"]


def test_a_rename_elsewhere_beats_the_automatic_title_a_turn_gives(state_dir):
    s = _session(n=0)
    s.title = "Untitled"
    s.save()
    foreign_writer.run(s.path, "--title", "Theirs")
    s.messages.append(message_row("user", "hello there", 1.0))
    s.title = "hello there"  # the first turn titles an untitled session
    s.save()
    loaded = Session.load("s1")
    assert (loaded.title, loaded.manual_title, len(loaded.messages)) == ("Theirs", True, 1)


def test_turns_appended_by_both_programs_are_all_kept(state_dir):
    s = _session(n=2)
    s.save()
    foreign_writer.run(s.path, "--append-user", "theirs")
    s.messages.append(message_row("user", "ours", 9.0))
    s.save()
    assert [m["content"] for m in Session.load("s1").messages] == ["m0", "m1", "theirs", "ours"]


def test_a_conflicting_change_is_a_409_and_memory_becomes_the_newer_file(state_dir):
    from api.rules.errors import Conflict

    s = _session(n=4)
    s.save()
    models.cache_session(s)
    foreign_writer.run(s.path, "--keep", "2")
    newer = s.path.read_bytes()
    s.messages.append(message_row("user", "ours", 9.0))
    with pytest.raises(Conflict) as caught:
        s.save()
    assert caught.value.status == 409 and "another program" in caught.value.message
    assert s.path.read_bytes() == newer
    assert [m["content"] for m in get_session("s1").messages] == ["m0", "m1"]


def test_fields_another_program_does_not_know_survive_its_rewrite(state_dir):
    s = _session(n=4, compression_generation="a" * 32)
    s.compression_undo = {"context_messages": [], "compressed_len": 1}
    s.save()
    foreign_writer.run(s.path, "--title", "Theirs")
    s.pinned = True
    s.save()
    loaded = Session.load("s1")
    assert (loaded.title, loaded.pinned) == ("Theirs", True)
    assert loaded.compression_generation == "a" * 32 and loaded.compression_undo["compressed_len"] == 1


def _stream_until_done(srv, stream_id: str) -> list[str]:
    import http.client

    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    try:
        conn.request(
            "GET", f"/api/chat/stream?stream_id={stream_id}", headers={"Accept": "text/event-stream"}
        )
        resp = conn.getresponse()
        events = []
        for raw in resp:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("event: "):
                events.append(line[len("event: ") :])
                if events[-1] == "done":
                    return events
        return events
    finally:
        conn.close()


@pytest.mark.integration
def test_a_rename_by_another_program_during_a_turn_keeps_the_rename_and_the_whole_turn(tmp_path):
    from talaria_testing.fake_llm import FakeLLM, Reply, agent_server

    with FakeLLM() as llm:
        with agent_server(tmp_path, llm.base_url, env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"}) as srv:
            sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
            path = srv.session_dir / f"{sid}.json"
            llm.script(Reply(text="alpha beta gamma delta", hang_after=2), Reply(text="second answer"))
            stream_id = srv.post_json("/api/chat/start", {"session_id": sid, "message": "first"})["stream_id"]
            assert llm.wait_for_hang(60), "the turn never reached its first tokens"
            foreign_writer.run(path, "--title", "Renamed elsewhere", "--pin")
            assert srv.get_json(f"/api/session?session_id={sid}")["session"]["is_streaming"]
            llm.release()
            assert _stream_until_done(srv, stream_id)[-1] == "done"
            second = srv.post_json("/api/chat/start", {"session_id": sid, "message": "again"})["stream_id"]
            assert _stream_until_done(srv, second)[-1] == "done"
            shown = srv.get_json(f"/api/session?session_id={sid}")["session"]
        doc = json.loads(path.read_text())
        for view in (doc, shown):
            assert (view["title"], view["pinned"]) == ("Renamed elsewhere", True)
            assert [(m["role"], m["content"]) for m in view["messages"]] == [
                ("user", "first"),
                ("assistant", "alpha beta gamma delta"),
                ("user", "again"),
                ("assistant", "second answer"),
            ]


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_save_over_something_that_is_not_a_regular_file_moves_it_aside_and_never_blocks(state_dir, kind):
    """The save read the old file with a plain read: a FIFO put in its place blocked the save for ever,
    and a symbolic link was followed out of the folder."""
    import os
    import threading

    session = Session(session_id="odd", messages=[message_row("user", "hi", 1.0)])
    session.save()
    outside = state_dir.parent / "outside.json"
    outside.write_text("{}")
    session.path.unlink()
    if kind == "fifo":
        os.mkfifo(session.path)
    else:
        session.path.symlink_to(outside)
    saving = threading.Thread(target=session.save, daemon=True)
    saving.start()
    saving.join(5)
    assert not saving.is_alive()
    assert not session.path.is_symlink() and session.path.is_file()
    assert Session.load("odd").messages == session.messages
    assert [p.name.split("-")[0] for p in state_dir.glob("odd.json.unsafe-*")] == ["odd.json.unsafe"]
    assert outside.read_text() == "{}"


def test_a_queue_is_kept_after_the_messages_and_counted_ahead_of_them_and_an_empty_one_not_written(state_dir):
    s = Session(session_id="q1", messages=[message_row("user", "hi", 1.0)])
    s.save()
    assert "queued_messages" not in json.loads(s.path.read_text())
    s.queued_messages = [{"id": "a1", "text": "next", "created_at": 2.0}]
    s.save()
    text = s.path.read_text()
    assert text.index('"queued_count"') < text.index('"messages"') < text.index('"queued_messages"')
    loaded = Session.load("q1")
    assert loaded.queued_messages == [{"id": "a1", "text": "next", "created_at": 2.0}]
    assert loaded.compact()["queued_count"] == 1
    stub = models.metadata_stub(s.path)
    assert stub is not None and stub.compact()["queued_count"] == 1  # read from the prefix alone
    raw = json.loads(text)
    raw["queued_messages"].append({"id": "", "text": "mangled by another program"})
    s.path.write_text(json.dumps(raw))
    assert Session.load("q1").queued_messages == [{"id": "a1", "text": "next", "created_at": 2.0}]
