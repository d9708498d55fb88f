"""The agent's own sessions written by its own ``SessionDB`` (a compressed CLI conversation, a Telegram
chat, a cron run), and a read-only snapshot of ``state.db`` to prove that nothing else changed it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

CLI_ROOT, CLI_TIP, TELEGRAM, CRON = "cli_first_seg", "cli_second_seg", "tg_chat_1", "cron_run_1"


def _append(db, sid: str, *pairs: tuple[str, str], at: float) -> None:
    for i, (role, text) in enumerate(pairs):
        db.append_message(sid, role, text, timestamp=at + i)


def write_agent_sessions(db_path: Path) -> None:
    """A CLI conversation compressed once (two segments), a Telegram chat and a cron run."""
    from hermes_state import SessionDB

    now = time.time() - 1000
    db = SessionDB(db_path=db_path)
    try:
        db.create_session(CLI_ROOT, source="cli", model="cli-model")
        db.set_session_title(CLI_ROOT, "Refactor the parser")
        _append(
            db, CLI_ROOT, ("user", "start with the lexer"), ("assistant", "lexer done, zebrafish"), at=now
        )
        db.end_session(CLI_ROOT, "compression")
        db.create_session(CLI_TIP, source="cli", model="cli-model", parent_session_id=CLI_ROOT)
        _append(db, CLI_TIP, ("user", "now the parser"), ("assistant", "parser done"), at=now + 10)
        db.create_session(TELEGRAM, source="telegram")
        db.set_session_title(TELEGRAM, "Groceries")
        _append(db, TELEGRAM, ("user", "buy milk"), ("assistant", "noted"), at=now + 20)
        db.create_session(CRON, source="cron")
        _append(db, CRON, ("user", "nightly report"), ("assistant", "all green"), at=now + 30)
    finally:
        db.close()


def add_agent_session(db_path: Path, sid: str, source: str, title: str, text: str) -> None:
    """A new session the agent writes (as while the page is open)."""
    from hermes_state import SessionDB

    db = SessionDB(db_path=db_path)
    try:
        db.create_session(sid, source=source)
        db.set_session_title(sid, title)
        _append(db, sid, ("user", text), ("assistant", "ok"), at=time.time())
    finally:
        db.close()


def snapshot(db_path: Path) -> tuple[list, list]:
    """Every ``sessions`` and ``messages`` row, read through a read-only connection."""
    conn = sqlite3.connect(f"file:{quote(str(db_path))}?mode=ro", uri=True)
    try:
        sessions = conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
        messages = conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
    finally:
        conn.close()
    return sessions, messages
