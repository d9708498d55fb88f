"""``search.db``: the full-text index of the sessions' messages, derived from the session files.

One row per message a person reads (``messages``), indexed by FTS5 twice: ``words`` (unicode61, every
row; ranked by bm25, snippets marked) and ``trigrams`` (only the rows holding Chinese, Japanese or Korean
text, which unicode61 cannot cut into words). ``sessions`` records, per session, the file's size and
mtime_ns the rows were made from and the fields the filters read. A session's rows become its file's in
one transaction, so a process killed mid-update leaves the old rows and the old stamp, which the next
start sees differ from the file. Nothing here decides a save: the index is rebuilt from the files.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.rules import search_query
from api.rules.search_query import MARK_CLOSE, MARK_OPEN, Query

SCHEMA_VERSION = "3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    sid TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    updated_at REAL, title TEXT, model TEXT, workspace TEXT, project_id TEXT, source TEXT);
CREATE TABLE IF NOT EXISTS messages(
    id INTEGER PRIMARY KEY, sid TEXT NOT NULL, idx INTEGER NOT NULL, cjk INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_sid ON messages(sid);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
    body, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS trigrams USING fts5(
    body, content='messages', content_rowid='id', tokenize='trigram');
CREATE VIRTUAL TABLE IF NOT EXISTS titles USING fts5(title, content='sessions', tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS title_added AFTER INSERT ON sessions WHEN new.title IS NOT NULL BEGIN
    INSERT INTO titles(rowid, title) VALUES (new.rowid, new.title);
END;
CREATE TRIGGER IF NOT EXISTS title_removed AFTER DELETE ON sessions WHEN old.title IS NOT NULL BEGIN
    INSERT INTO titles(titles, rowid, title) VALUES ('delete', old.rowid, old.title);
END;
CREATE TRIGGER IF NOT EXISTS messages_added AFTER INSERT ON messages BEGIN
    INSERT INTO words(rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER IF NOT EXISTS cjk_added AFTER INSERT ON messages WHEN new.cjk = 1 BEGIN
    INSERT INTO trigrams(rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER IF NOT EXISTS messages_removed AFTER DELETE ON messages BEGIN
    INSERT INTO words(words, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TRIGGER IF NOT EXISTS cjk_removed AFTER DELETE ON messages WHEN old.cjk = 1 BEGIN
    INSERT INTO trigrams(trigrams, rowid, body) VALUES ('delete', old.id, old.body);
END;
"""
SNIPPET_TOKENS = 24


class IndexBroken(Exception):
    """The file is not a usable index (garbage, another schema): it is made again."""


@dataclass(frozen=True)
class Entry:
    """What one session file gives the index."""

    sid: str
    size: int
    mtime_ns: int
    updated_at: float | None
    title: str | None
    model: str | None
    workspace: str | None
    project_id: str | None
    source: str | None
    texts: tuple[tuple[int, str], ...]  # (message index, words) of the messages a person reads


@dataclass(frozen=True)
class Filters:
    after: float | None = None
    before: float | None = None
    model: str | None = None
    workspace: str | None = None
    project_id: str | None = None
    source: str | None = None

    def sql(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[object] = []
        for column, value in (
            ("model", self.model),
            ("workspace", self.workspace),
            ("project_id", self.project_id),
            ("source", self.source),
        ):
            if value is not None:
                clauses.append(f"s.{column} = ?")
                args.append(value)
        if self.after is not None:
            clauses.append("s.updated_at >= ?")
            args.append(self.after)
        if self.before is not None:
            clauses.append("s.updated_at < ?")
            args.append(self.before)
        return "".join(" AND " + c for c in clauses), args


@dataclass(frozen=True)
class Hit:
    sid: str
    message_idx: int
    snippet: str  # with the private match markers
    body: str  # the message's words as indexed (Markdown source)


class SearchIndex:
    """One open ``search.db``. Writes come from one thread (the indexer); reads from any, each on its
    own connection (WAL: a reader never waits for the writer)."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        try:
            self._writer = self._connect()
        except sqlite3.DatabaseError as exc:
            raise IndexBroken(str(exc)) from exc
        try:
            self._writer.executescript(_SCHEMA)
            row = self._writer.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                with self._writer:
                    self._writer.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise IndexBroken(f"schema {row[0]!r}")
        except sqlite3.DatabaseError as exc:
            self._writer.close()
            raise IndexBroken(str(exc)) from exc

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        # A lost last transaction is found at the next start (the stamp differs from the file).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            conn.execute("PRAGMA query_only=1")
        return conn

    def close(self) -> None:
        self._writer.close()

    def check(self) -> None:
        """Raise ``IndexBroken`` when SQLite finds the file damaged."""
        try:
            row = self._writer.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            raise IndexBroken(str(exc)) from exc
        if row is None or row[0] != "ok":
            raise IndexBroken(str(row))

    def stamps(self) -> dict[str, tuple[int, int]]:
        """Each indexed session's (size, mtime_ns) as its rows were made."""
        try:
            rows = self._writer.execute("SELECT sid, size, mtime_ns FROM sessions").fetchall()
        except sqlite3.DatabaseError as exc:
            raise IndexBroken(str(exc)) from exc
        return {sid: (size, mtime_ns) for sid, size, mtime_ns in rows}

    def _delete_rows(self, sid: str) -> None:
        conn = self._writer
        conn.execute("DELETE FROM messages WHERE sid = ?", (sid,))  # the triggers drop its words
        conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))

    def _replace(self, entry: Entry) -> None:
        """The session's rows become the entry's: its messages that kept their place and words keep their
        rows (a save mostly appends or changes a field), the others are dropped or added."""
        conn = self._writer
        conn.execute("DELETE FROM sessions WHERE sid = ?", (entry.sid,))
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.sid,
                entry.size,
                entry.mtime_ns,
                entry.updated_at,
                entry.title,
                entry.model,
                entry.workspace,
                entry.project_id,
                entry.source,
            ),
        )
        wanted = {(idx, search_query.indexable(text)) for idx, text in entry.texts}
        held = conn.execute("SELECT id, idx, body FROM messages WHERE sid = ?", (entry.sid,)).fetchall()
        stale = [(row_id,) for row_id, idx, body in held if (idx, body) not in wanted]
        kept = {(idx, body) for _row_id, idx, body in held}
        # The triggers keep the words (and the trigrams of CJK rows) in step with these rows.
        conn.executemany("DELETE FROM messages WHERE id = ?", stale)
        conn.executemany(
            "INSERT INTO messages(sid, idx, cjk, body) VALUES (?, ?, ?, ?)",
            [(entry.sid, idx, int(search_query.has_cjk(body)), body) for idx, body in sorted(wanted - kept)],
        )

    def apply(self, entries: Iterable[Entry], removed: Iterable[str] = ()) -> None:
        """Make each entry's session rows its own and drop the removed sessions, in one transaction."""
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sid in removed:
                self._delete_rows(sid)
            for entry in entries:
                self._replace(entry)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def count(self) -> int:
        return int(self._reader().execute("SELECT count(*) FROM sessions").fetchone()[0])

    # ------------------------------------------------------------------------------------ queries

    def titled(self, needle: str, filters: Filters, limit: int) -> list[str]:
        """Sessions whose title holds ``needle`` (lowercase), newest first: through the titles' trigram
        index when it has three characters, else by reading every title."""
        where, args = filters.sql()
        if len(needle) >= 3:
            sql = (
                "SELECT s.sid FROM titles JOIN sessions s ON s.rowid = titles.rowid "
                f"WHERE titles MATCH ?{where} ORDER BY s.updated_at DESC LIMIT ?"
            )
            params: list[Any] = ['"' + needle.replace('"', '""') + '"', *args, limit]
        else:
            sql = f"SELECT s.sid FROM sessions s WHERE instr(lower(s.title), ?) > 0{where} ORDER BY s.updated_at DESC LIMIT ?"
            params = [needle, *args, limit]
        return [row[0] for row in self._reader().execute(sql, params)]

    def search(self, query: Query, filters: Filters, skip: Iterable[str] = ()) -> Iterator[Hit]:
        """Sessions matching ``query``, best first (each session once, at its best message)."""
        seen = set(skip)
        hits = self._cjk_hits(query, filters) if query.cjk else self._word_hits(query, filters)
        for hit in hits:
            if hit.sid not in seen:
                seen.add(hit.sid)
                yield hit

    def _word_hits(self, query: Query, filters: Filters) -> Iterator[Hit]:
        expr = search_query.word_match(query)
        if expr is None:
            return
        where, args = filters.sql()
        # Message rows in bm25 order, fetched a batch at a time: a page of sessions reads about a page.
        sql = (
            "SELECT m.sid, m.idx, snippet(words, 0, ?, ?, '…', ?), m.body FROM words "
            "JOIN messages m ON m.id = words.rowid JOIN sessions s ON s.sid = m.sid "
            f"WHERE words MATCH ?{where} ORDER BY words.rank LIMIT ? OFFSET ?"
        )
        batch, offset = 200, 0
        while True:
            rows = (
                self._reader()
                .execute(sql, (MARK_OPEN, MARK_CLOSE, SNIPPET_TOKENS, expr, *args, batch, offset))
                .fetchall()
            )
            for sid, idx, snippet, body in rows:
                yield Hit(sid, idx, snippet, body)
            if len(rows) < batch:
                return
            offset += batch
            batch *= 4

    def _cjk_hits(self, query: Query, filters: Filters) -> Iterator[Hit]:
        expr, short = search_query.trigram_parts(query)
        where, args = filters.sql()
        like = "".join(" AND instr(lower(m.body), ?) > 0" for _ in short)
        if expr is not None:
            sql = (
                "SELECT m.sid, m.idx, m.body FROM trigrams JOIN messages m ON m.id = trigrams.rowid "
                f"JOIN sessions s ON s.sid = m.sid WHERE trigrams MATCH ?{like}{where} ORDER BY trigrams.rank"
            )
            params: list[Any] = [expr, *short, *args]
        else:
            sql = (
                "SELECT m.sid, m.idx, m.body FROM messages m JOIN sessions s ON s.sid = m.sid "
                f"WHERE m.cjk = 1{like}{where} ORDER BY s.updated_at DESC"
            )
            params = [*short, *args]
        # Exclusions are tested per row: the trigram table has no NOT of whole words.
        words = query.words()
        for sid, idx, body in self._reader().execute(sql, params):
            if any(_holds(body, term) for term in query.excluded):
                continue
            yield Hit(sid, idx, search_query.snippet_around(body, words) or body[:120], body)


def _holds(body: str, term: search_query.Term) -> bool:
    return term.text.lower() in body.lower()
