"""The read-only state.db reader: what it returns, which schemas it tolerates, and that it changes nothing."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import api.store.config
from api.store import state_db


def _agent_db(path: Path):
    from hermes_state import SessionDB  # hermes-agent's own writer, so the schema is the real one

    return SessionDB(db_path=path)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def agent_db(db_path):
    db = _agent_db(db_path)
    yield db
    db.close()


def _snapshot(path: Path) -> dict:
    out = {}
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        p = path.with_name(name)
        out[name] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return out


def _read_everything(path: Path, sid: str) -> None:
    state_db.get_state_db_session_messages(sid, db_path=path)
    state_db.get_state_db_session_messages(
        sid, db_path=path, include_inactive=True, limit=2, since_timestamp=1.0
    )
    state_db.list_agent_sessions(path)
    state_db.session_ids(path)
    state_db.has_session(sid, path)


def _raw_db(path: Path, ddl: str, rows: list[tuple] = (), insert: str | None = None) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(ddl)
    if insert:
        conn.executemany(insert, rows)
    conn.commit()
    conn.close()


# ----------------------------------------------------------------------------- messages


def test_messages_come_back_in_insertion_order_with_optional_columns(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    call = [{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    agent_db.append_message("s1", "user", content="hi", timestamp=30.0)
    agent_db.append_message("s1", "assistant", content="", tool_calls=call, timestamp=10.0, reasoning="think")
    agent_db.append_message(
        "s1", "tool", content="out", tool_name="terminal", tool_call_id="call_1", timestamp=20.0
    )
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path)
    assert [r["timestamp"] for r in rows] == [30.0, 10.0, 20.0]  # ordered by id, not by timestamp
    assert rows[0] == {"role": "user", "content": "hi", "timestamp": 30.0}
    assert rows[1]["tool_calls"][0]["id"] == "call_1"  # JSON decoded
    assert rows[1]["reasoning"] == "think"
    assert rows[2]["tool_name"] == "terminal" and rows[2]["name"] == "terminal"
    assert rows[2]["tool_call_id"] == "call_1"
    assert all("id" not in r and "active" not in r and "session_id" not in r for r in rows)


def test_api_content_rows_carry_their_state_db_row_id(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    agent_db.append_message("s1", "user", content="plain", timestamp=1.0)
    row_id = agent_db.append_message(
        "s1", "user", content="shown", api_content="[Workspace::v1: /w]\nshown", timestamp=2.0
    )
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path)
    assert "_state_db_row_id" not in rows[0]
    assert rows[1]["api_content"] == "[Workspace::v1: /w]\nshown"
    assert rows[1]["_state_db_row_id"] == row_id


def test_rows_archived_by_compaction_are_hidden_unless_asked_for(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    for i in range(4):
        agent_db.append_message(
            "s1", "user" if i % 2 == 0 else "assistant", content=f"m{i}", timestamp=float(i)
        )
    agent_db.archive_and_compact("s1", [{"role": "user", "content": "summary", "timestamp": 10.0}])
    assert [r["content"] for r in state_db.get_state_db_session_messages("s1", db_path=db_path)] == [
        "summary"
    ]
    everything = state_db.get_state_db_session_messages("s1", db_path=db_path, include_inactive=True)
    assert [r["content"] for r in everything] == ["m0", "m1", "m2", "m3", "summary"]


def test_limit_keeps_the_newest_rows_in_ascending_order(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    for i in range(5):
        agent_db.append_message("s1", "user", content=f"m{i}", timestamp=float(i))
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path, limit=2)
    assert [r["content"] for r in rows] == ["m3", "m4"]


def test_since_timestamp_filters_older_rows(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    for i in range(4):
        agent_db.append_message("s1", "user", content=f"m{i}", timestamp=float(i))
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path, since_timestamp=2.0)
    assert [r["content"] for r in rows] == ["m2", "m3"]


def test_only_the_requested_session_is_read(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    agent_db.create_session("s2", "cli")
    agent_db.append_message("s1", "user", content="one", timestamp=1.0)
    agent_db.append_message("s2", "user", content="two", timestamp=1.0)
    assert [r["content"] for r in state_db.get_state_db_session_messages("s2", db_path=db_path)] == ["two"]


@pytest.mark.parametrize("sid", ["", "../s1", "s1.json", "s 1", "s1'; DROP TABLE messages; --", None, 5])
def test_unsafe_session_ids_read_nothing(agent_db, db_path, sid):
    agent_db.create_session("s1", "webui")
    agent_db.append_message("s1", "user", content="one", timestamp=1.0)
    assert state_db.get_state_db_session_messages(sid, db_path=db_path) == []


def test_absent_database_is_empty_and_is_not_created(db_path):
    assert state_db.get_state_db_session_messages("s1", db_path=db_path) == []
    assert state_db.list_agent_sessions(db_path) == []
    assert state_db.session_ids(db_path) is None
    assert state_db.has_session("s1", db_path) is None
    assert not db_path.exists()


def test_unreadable_database_is_empty(db_path):
    db_path.write_bytes(b"this is not a database" * 100)
    assert state_db.get_state_db_session_messages("s1", db_path=db_path) == []
    assert state_db.session_ids(db_path) is None
    assert db_path.read_bytes() == b"this is not a database" * 100


def test_default_path_is_read_from_config_at_call_time(monkeypatch, tmp_path):
    db = _agent_db(tmp_path / "elsewhere.db")
    db.create_session("s1", "webui")
    db.append_message("s1", "user", content="found", timestamp=1.0)
    db.close()
    monkeypatch.setattr(api.store.config, "STATE_DB_PATH", tmp_path / "elsewhere.db")
    assert state_db.default_state_db_path() == tmp_path / "elsewhere.db"
    assert [r["content"] for r in state_db.get_state_db_session_messages("s1")] == ["found"]


# ----------------------------------------------------------------------------- older schemas


def test_oldest_schema_without_optional_columns_is_read(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT, timestamp REAL);",
        [("s1", "assistant", "second", 2.0), ("s1", "user", "first", 1.0)],
        "INSERT INTO messages VALUES (?, ?, ?, ?)",
    )
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path)
    assert rows == [  # no id column: ordered by timestamp
        {"role": "user", "content": "first", "timestamp": 1.0},
        {"role": "assistant", "content": "second", "timestamp": 2.0},
    ]


def test_schema_with_id_but_no_active_column_keeps_every_row(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT,"
        " timestamp REAL, tool_calls TEXT);",
        [("s1", "user", "a", 5.0, None), ("s1", "assistant", "", 4.0, '[{"id": "c"}]')],
        "INSERT INTO messages (session_id, role, content, timestamp, tool_calls) VALUES (?, ?, ?, ?, ?)",
    )
    rows = state_db.get_state_db_session_messages("s1", db_path=db_path)
    assert [r["timestamp"] for r in rows] == [5.0, 4.0]
    assert rows[1]["tool_calls"] == [{"id": "c"}]


def test_undecodable_json_column_is_kept_as_text(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT,"
        " timestamp REAL, tool_calls TEXT);",
        [("s1", "assistant", "", 1.0, "not json")],
        "INSERT INTO messages (session_id, role, content, timestamp, tool_calls) VALUES (?, ?, ?, ?, ?)",
    )
    assert state_db.get_state_db_session_messages("s1", db_path=db_path)[0]["tool_calls"] == "not json"


def test_messages_table_missing_a_required_column_reads_nothing(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE messages (session_id TEXT, role TEXT, content TEXT);",
        [("s1", "user", "x")],
        "INSERT INTO messages VALUES (?, ?, ?)",
    )
    assert state_db.get_state_db_session_messages("s1", db_path=db_path) == []


def test_database_without_tables_reads_nothing(db_path):
    _raw_db(db_path, "CREATE TABLE other (x INTEGER);")
    assert state_db.get_state_db_session_messages("s1", db_path=db_path) == []
    assert state_db.list_agent_sessions(db_path) == []
    assert state_db.session_ids(db_path) is None
    assert state_db.has_session("s1", db_path) is None


def test_schema_change_is_seen_by_the_next_read(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);",
        [("s1", "assistant", "a", 1.0)],
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
    )
    assert "reasoning" not in state_db.get_state_db_session_messages("s1", db_path=db_path)[0]
    _raw_db(db_path, "ALTER TABLE messages ADD COLUMN reasoning TEXT; UPDATE messages SET reasoning = 'r';")
    assert state_db.get_state_db_session_messages("s1", db_path=db_path)[0]["reasoning"] == "r"


# ----------------------------------------------------------------------------- the agent's session list


def test_agent_sessions_are_listed_newest_first(agent_db, db_path):
    agent_db.create_session("old", "cli", model="m1")
    agent_db.create_session("new", "telegram", model="m2", parent_session_id="old")
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE sessions SET started_at = 100 WHERE id = 'old'")
    conn.execute("UPDATE sessions SET started_at = 200 WHERE id = 'new'")
    conn.commit()
    conn.close()
    rows = state_db.list_agent_sessions(db_path)
    assert [r["id"] for r in rows] == ["new", "old"]
    assert rows[0]["source"] == "telegram" and rows[0]["model"] == "m2"
    assert rows[0]["parent_session_id"] == "old"
    assert {"title", "message_count", "ended_at", "end_reason", "archived", "started_at"} <= set(rows[0])
    assert [r["id"] for r in state_db.list_agent_sessions(db_path, limit=1)] == ["new"]


def test_session_ids_and_has_session(agent_db, db_path):
    agent_db.create_session("s1", "webui")
    assert state_db.session_ids(db_path) == {"s1"}
    assert state_db.has_session("s1", db_path) is True
    assert state_db.has_session("s2", db_path) is False
    assert state_db.has_session("../s1", db_path) is False


def test_older_sessions_table_lists_the_columns_it_has(db_path):
    _raw_db(
        db_path,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL);",
        [("a", "cli", 1.0)],
        "INSERT INTO sessions VALUES (?, ?, ?)",
    )
    assert state_db.list_agent_sessions(db_path) == [{"id": "a", "source": "cli", "started_at": 1.0}]
    assert state_db.session_ids(db_path) == {"a"}


# ----------------------------------------------------------------------------- reading changes nothing


def test_every_connection_is_a_read_only_uri(agent_db, db_path, monkeypatch):
    agent_db.create_session("s1", "webui")
    agent_db.append_message("s1", "user", content="x", timestamp=1.0)
    seen = []
    real_connect = sqlite3.connect

    def spy(target, *args, **kwargs):
        seen.append((str(target), kwargs.get("uri")))
        return real_connect(target, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    _read_everything(db_path, "s1")
    assert seen and all(
        uri is True and target.startswith("file:") and "mode=ro" in target for target, uri in seen
    )


def test_reads_without_a_writer_leave_every_file_byte_identical(db_path):
    db = _agent_db(db_path)
    db.create_session("s1", "webui")
    for i in range(20):
        db.append_message("s1", "user", content=f"m{i}", timestamp=float(i))
    db.close()
    before = _snapshot(db_path)
    for _ in range(25):
        _read_everything(db_path, "s1")
    assert _snapshot(db_path) == before
    assert len(state_db.get_state_db_session_messages("s1", db_path=db_path)) == 20


def test_reads_of_a_crashed_writers_files_leave_them_byte_identical(tmp_path):
    live = tmp_path / "live" / "state.db"
    live.parent.mkdir()
    db = _agent_db(live)
    db.create_session("s1", "webui")
    for i in range(20):
        db.append_message("s1", "user", content=f"m{i}", timestamp=float(i))
    crashed = tmp_path / "crashed" / "state.db"
    crashed.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):  # what a killed agent leaves behind: rows still in the WAL
        shutil.copyfile(f"{live}{suffix}", f"{crashed}{suffix}")
    db.close()
    before = _snapshot(crashed)
    assert before["state.db-wal"] is not None and before["state.db-shm"] is not None
    for _ in range(25):
        _read_everything(crashed, "s1")
    assert _snapshot(crashed) == before
    assert len(state_db.get_state_db_session_messages("s1", db_path=crashed)) == 20


def test_reads_between_a_live_writers_commits_keep_every_row(db_path):
    db = _agent_db(db_path)
    db.create_session("s1", "webui")
    wal, shm = Path(f"{db_path}-wal"), Path(f"{db_path}-shm")
    written = []
    for i in range(60):
        db.append_message("s1", "user" if i % 2 == 0 else "assistant", content=f"m{i}", timestamp=float(i))
        written.append(f"m{i}")
        rows = state_db.get_state_db_session_messages("s1", db_path=db_path)
        assert [r["content"] for r in rows] == written  # each read sees every committed row
        _read_everything(db_path, "s1")
        assert wal.exists() and shm.exists()  # our reads never remove the writer's files
    db.close()
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = [
            r[0] for r in conn.execute("SELECT content FROM messages WHERE session_id = 's1' ORDER BY id")
        ]
    finally:
        conn.close()
    assert stored == written


def test_rollback_journal_database_is_read_without_creating_files(db_path):
    _raw_db(
        db_path,
        "PRAGMA journal_mode=DELETE; CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT,"
        " role TEXT, content TEXT, timestamp REAL);",
        [("s1", "user", "a", 1.0)],
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
    )
    before = sorted(p.name for p in db_path.parent.iterdir())
    assert [r["content"] for r in state_db.get_state_db_session_messages("s1", db_path=db_path)] == ["a"]
    assert sorted(p.name for p in db_path.parent.iterdir()) == before


def test_a_read_leaves_the_locks_of_a_live_connection_of_this_process_in_place(agent_db, db_path):
    """Closing a descriptor of the file drops every POSIX lock the process holds on it: the agent's goal
    store, a live connection of the server, lost its hold, and a worker's agent closing its own connection
    then took itself for the last one and checkpointed and removed the log under it ("malformed" after)."""
    agent_db.set_meta("goal:s1", "kept")
    assert Path(f"{db_path}-wal").exists()
    assert state_db.meta_value(db_path, "goal:s1") == "kept"
    other = "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('select 1 from state_meta').fetchall()"
    subprocess.run([sys.executable, "-c", other, str(db_path)], check=True)
    assert Path(f"{db_path}-wal").exists()  # this process's connection still holds the log
    assert state_db.meta_value(db_path, "goal:s1") == "kept"
