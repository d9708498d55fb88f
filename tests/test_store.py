"""The store: a folder of sessions with its own index, cache, locks and write path; hermes-webui's names over
the store in use."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time

import pytest

import api.config
import api.models
from api.rules.errors import NotFound
from api.store import atomic, state_db
from api.store import session_store as store
from api.store.models import Session
from talaria_testing.stores import store_on


def _on_disk(folder, sid):
    return json.loads((folder / f"{sid}.json").read_text())


def test_two_stores_on_two_folders_keep_their_own_files_cache_and_index(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first, second = store.Store(one, Session), store.Store(two, Session)
    for home, title in ((first, "first"), (second, "second")):
        home.create(Session(session_id="same", title=title, messages=[{"role": "user", "content": title}]))
    with first.edit("same") as session:
        session.title = "first, edited"
    first.close()
    second.close()
    assert _on_disk(one, "same")["title"] == "first, edited"
    assert _on_disk(two, "same")["title"] == "second"
    assert second.get("same").title == "second"
    assert [row["title"] for row in json.loads((one / "_index.json").read_text())] == ["first, edited"]


def test_an_edit_that_raises_leaves_the_file_and_the_cached_session_as_they_were(store):
    store.create(Session(session_id="s", title="kept", messages=[{"role": "user", "content": "hi"}]))
    with pytest.raises(RuntimeError), store.edit("s") as session:
        session.title = "lost"
        raise RuntimeError("the body failed")
    assert store.get("s").title == "kept"
    assert _on_disk(store.session_dir, "s")["title"] == "kept"


def test_an_unknown_or_unsafe_id_is_not_found_before_any_file_is_read(store):
    for sid in ("missing", "../escape", ""):
        with pytest.raises(NotFound), store.edit(sid):
            pass


def test_setting_hermes_webuis_names_points_the_store_in_use(tmp_path, monkeypatch):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    with store_on(tmp_path / "unused") as home:
        monkeypatch.setattr(api.models, "SESSION_DIR", folder)
        monkeypatch.setattr(api.config, "_get_session_agent_lock", lambda sid: contextlib.nullcontext())
        assert home.session_dir == folder and home.index_file == folder / "_index.json"
        assert folder == api.config.SESSION_DIR and api.models.SESSIONS is home.sessions
        Session(session_id="s", title="t", messages=[{"role": "user", "content": "x"}]).save()
        assert (folder / "s.json").is_file()
        assert isinstance(home.lock("s"), contextlib.nullcontext)
        monkeypatch.undo()
        assert home.session_dir == tmp_path / "unused"
        assert not isinstance(home.lock("s"), contextlib.nullcontext)


def test_two_stores_keep_their_own_reads_of_state_db_and_the_store_in_use_lends_its_own(tmp_path):
    db = tmp_path / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT, title TEXT, started_at REAL)")
        conn.execute("INSERT INTO sessions VALUES ('a1', 'agent', 1.0)")
    first, second = store.Store(tmp_path / "one", Session), store.Store(tmp_path / "two", Session)
    assert [row["id"] for row in state_db.list_agent_sessions(db, reads=first.agent_db)] == ["a1"]
    assert first.agent_db.sessions and first.agent_db.columns
    assert not second.agent_db.sessions and not second.agent_db.columns
    previous = store.use(second)
    try:
        assert state_db.READS.get() is second.agent_db
        assert [row["id"] for row in state_db.list_agent_sessions(db)] == ["a1"]
        assert second.agent_db.sessions and second.agent_db.columns
    finally:
        store.use(previous)


def test_each_store_sweeps_a_folder_of_killed_writes_once_for_itself(tmp_path):
    first, second = store.Store(tmp_path / "one", Session), store.Store(tmp_path / "two", Session)

    def left_by_a_killed_write():
        leftover = tmp_path / f"s.json.tmp.{os.getpid()}.{time.time_ns():x}"
        leftover.write_bytes(b"{")
        old = time.time() - atomic.TEMP_GRACE_S - 60
        os.utime(leftover, (old, old))
        return leftover

    leftover = left_by_a_killed_write()
    atomic.sweep_once(tmp_path, swept=first.swept)
    assert not leftover.exists()
    leftover = left_by_a_killed_write()
    atomic.sweep_once(tmp_path, swept=first.swept)  # swept once already for this store
    assert leftover.exists()
    atomic.sweep_once(tmp_path, swept=second.swept)
    assert not leftover.exists()
