"""Hostile input for the durability suite: a session folder full of traps, broken ``state.db`` files, bad ids.

``build_hostile_folder`` fills ``<root>/sessions`` with corrupt, truncated, non-UTF-8, deeply nested and
huge (sparse) files, symlinks leading outside (to files, a directory, ``/dev/zero``), a FIFO, a
directory named like a session, orphan backups; beside it ``<root>/../outside`` holds the files the
links point at, which nothing may change. ``tree_signature`` snapshots a folder without following links.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import sqlite3
import stat
from pathlib import Path

from talaria_testing.scenarios import TORN, messages

HUGE_BYTES = 100 * 1024 * 1024

HOSTILE_IDS: tuple = (
    "../etc/passwd", "..", ".", "/", "a/b", "a\\b", "x\x00y", "", " ", "\t", "a" * 201, "é", "ünï",
    "%2e%2e", "..%2f", "dur1.json", "dur1.json.bak", "x.y", "nul\n", "CON", "~root", "$HOME", "*", "?",
    "_index", "_deleted_webui_sessions", "_pruned_webui_orphans", "-", "--", "a b",
    123, 0, -1, 1.5, True, None, [], {}, ["dur1"], {"id": "dur1"},
)  # fmt: skip
RESERVED_IDS = ("_index", "_deleted_webui_sessions", "_pruned_webui_orphans")


def _doc(sid: str, n: int, **extra) -> bytes:
    return json.dumps({"session_id": sid, "title": sid, "messages": messages(n), **extra}).encode()


BIGINT_DOC = b'{"session_id": "bigint", "title": "t", "updated_at": 1' + b"0" * 400 + b', "messages": []}'


def sparse(path: Path, size: int, head: bytes = b"") -> None:
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)


def build_outside(outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.json").write_bytes(_doc("link_out", 3))
    (outside / "secret_bak.json").write_bytes(_doc("link_out", 10))
    (outside / "victim_bak.json").write_bytes(_doc("victim", 10))
    (outside / "victim2.json").write_bytes(_doc("victim2", 2))
    (outside / "index_target.json").write_bytes(b'["do not overwrite me"]')
    (outside / "a_dir").mkdir(exist_ok=True)
    (outside / "a_dir" / "inner.json").write_bytes(_doc("inner", 2))


def build_hostile_folder(sessions: Path, outside: Path, *, huge_valid: bool = False) -> dict[str, str]:
    """Fill ``sessions`` (valid sessions already saved by the caller stay); returns {name: what it is}."""
    build_outside(outside)
    kinds: dict[str, str] = {}

    def put(name: str, data: bytes, kind: str) -> None:
        (sessions / name).write_bytes(data)
        kinds[name] = kind

    put("torn.json", TORN, "truncated JSON")
    put("empty.json", b"", "empty file")
    put("nul.json", b"\0" * 100, "NUL bytes")
    put("list.json", b"[1, 2, 3]", "JSON list")
    put("str.json", b'"a string"', "JSON string")
    put("msgstr.json", b'{"session_id": "msgstr", "messages": "not a list"}', "messages not a list")
    put(
        "nondict.json",
        b'{"session_id": "nondict", "title": "t", "messages": [1, "a", null, [], {"role": 5}]}',
        "rows of odd types",
    )
    put("deep.json", b"[" * 200_000, "nesting 200k deep")
    put("deepobj.json", b'{"messages": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "valid but 5k deep")
    put(
        "latin1.json",
        b'{"session_id": "latin1", "title": "caf\xe9 \xff\xfe", "messages": []}',
        "non-UTF-8 bytes",
    )
    put(
        "surrogate.json",
        b'{"session_id": "surrogate", "title": "\\ud800\\udfff\\ud800", "messages": [{"role": "user", "content": "\\udc80", "timestamp": 1}]}',
        "lone surrogate escapes",
    )
    put("bom.json", b"\xef\xbb\xbf" + _doc("bom", 2), "UTF-8 BOM")
    put(
        "nan.json",
        b'{"session_id": "nan", "title": "t", "created_at": NaN, "updated_at": Infinity, "messages": []}',
        "NaN/Infinity literals",
    )
    weird = {"session_id": 5, "title": ["x"], "messages": [{"role": ["user"], "content": {"a": 1}, "timestamp": "soon"}],
             "context_messages": "nope", "truncation_watermark": "x", "created_at": "yesterday", "pinned": "maybe"}  # fmt: skip
    put("weirdtypes.json", json.dumps(weird).encode(), "fields of the wrong types")
    put("idmismatch.json", _doc("someone_else", 3), "session_id differs from the file name")
    put("bad name.json", _doc("bad name", 2), "file name outside the id alphabet")
    put("a.b.json", _doc("a.b", 2), "dotted file name")
    sparse(sessions / "huge.json", HUGE_BYTES)
    kinds["huge.json"] = "100 MB of zeros (sparse)"
    put("hugebak.json", _doc("hugebak", 2), "small live, huge backup")
    sparse(sessions / "hugebak.json.bak", HUGE_BYTES, b'{"messages": [')
    kinds["hugebak.json.bak"] = "100 MB backup, unparsable"
    put("corruptbak.json", _doc("corruptbak", 2), "valid live, corrupt backup")
    put("corruptbak.json.bak", TORN, "corrupt backup")
    put("orphan.json.bak", _doc("orphan", 5), "orphan backup (must come back)")
    put("x.json.replaced-abc", b"odd kept name", "kept-file look-alike")
    if huge_valid:
        body = b'{"session_id": "hugevalid", "title": "big", "messages": [{"role": "user", "content": "'
        with open(sessions / "hugevalid.json", "wb") as fh:
            fh.write(body)
            chunk = b"a" * (1 << 20)
            for _ in range(HUGE_BYTES // len(chunk)):
                fh.write(chunk)
            fh.write(b'", "timestamp": 1}]}')
        kinds["hugevalid.json"] = "100 MB valid session"
    links = {
        "link_out.json": outside / "secret.json",
        "link_out.json.bak": outside / "secret_bak.json",
        "victim.json.bak": outside / "victim_bak.json",
        "victim2.json": outside / "victim2.json",
        "dangling.json": outside / "missing.json",
        "zero.json": Path("/dev/zero"),
        "dirlink.json": outside / "a_dir",
        "_index.json": outside / "index_target.json",
    }
    for name, target in links.items():
        try:
            (sessions / name).unlink()
        except FileNotFoundError:
            pass
        os.symlink(target, sessions / name)
        kinds[name] = f"symlink to {target}"
    os.symlink("loop.json", sessions / "loop.json")
    kinds["loop.json"] = "symlink loop"
    put("victim.json", _doc("victim", 2), "live whose backup is a link outside")
    put("victim2.json.bak", _doc("victim2", 10), "backup whose live file is a link outside")
    os.mkfifo(sessions / "fifo.json")
    kinds["fifo.json"] = "FIFO"
    (sessions / "dir.json").mkdir()
    kinds["dir.json"] = "directory"
    return kinds


def tree_signature(folder: Path, *, hash_limit: int = 8 << 20) -> dict[str, tuple]:
    """{relative path: (kind, size, mtime_ns, sha1 or link target)} without following links or opening FIFOs."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, folder)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                digest = ""
                if st.st_size <= hash_limit:
                    with open(full, "rb") as fh:
                        digest = hashlib.sha1(fh.read()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))
    return out


def contents_present(folder: Path) -> set[str]:
    """sha1 of every regular file below ``folder`` up to 8 MiB (to find kept copies of small files).

    ``_index.json`` is left out: it is a cache that recovery rebuilds from the session files by design.
    """
    return {
        sig[3]
        for name, sig in tree_signature(folder).items()
        if sig[0] == "file" and sig[3] and Path(name).name != "_index.json"
    }


# ---------------------------------------------------------------------- state.db files


def _real_db(path: Path, *, wal: bool = False) -> None:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, title TEXT, started_at REAL)")
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL)"
    )
    for sid in ("orphan", "good1"):
        conn.execute("INSERT INTO sessions VALUES (?, 'webui', ?, 1.0)", (sid, sid))
        for i, m in enumerate(messages(4)):
            conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                (sid, m["role"], m["content"], m["timestamp"] + i),
            )
    conn.commit()
    conn.close()


def hostile_state_dbs(folder: Path) -> dict[str, Path]:
    """Broken and odd ``state.db`` files, each in its own folder (so ``-wal``/``-shm`` beside it are visible)."""
    out: dict[str, Path] = {}

    def slot(name: str) -> Path:
        d = folder / name
        d.mkdir(parents=True)
        out[name] = d / "state.db"
        return out[name]

    slot("garbage").write_bytes(os.urandom(4096))
    slot("text").write_bytes(b"this is not a database\n" * 100)
    slot("empty").write_bytes(b"")
    good = slot("truncated")
    _real_db(good)
    good.write_bytes(good.read_bytes()[:1500])
    header = slot("header_only")
    header.write_bytes(b"SQLite format 3\x00" + b"\xff" * 84)
    sparse(slot("huge"), HUGE_BYTES, b"SQLite format 3\x00")
    slot("directory").mkdir()
    schema = slot("wrong_schema")
    conn = sqlite3.connect(schema)
    conn.execute("CREATE TABLE messages (x)")
    conn.execute("CREATE TABLE sessions (y)")
    conn.commit()
    conn.close()
    _real_db(slot("valid"))
    wal = slot("wal_clean")
    _real_db(wal, wal=True)
    link = slot("symlink_outside")
    target = folder / "db_target.db"
    _real_db(target)
    link.symlink_to(target)
    return out


# ---------------------------------------------------------------------- a handler and a bounded child


class RecordingHandler:
    """The ``BaseHTTPRequestHandler`` shape the routes need, recording the response."""

    def __init__(self, method: str = "GET", headers: dict | None = None):
        self.wfile = io.BytesIO()
        self.status: int | None = None
        self.sent_headers: dict[str, str] = {}
        self.headers = headers or {}
        self.command = method
        self.client_address = ("127.0.0.1", 0)

    def send_response(self, status, message=None):
        self.status = status

    def send_header(self, key, value):
        self.sent_headers[key] = value

    def end_headers(self):
        pass

    def json(self):
        try:
            return json.loads(self.wfile.getvalue() or b"null")
        except ValueError:
            return None


def get_session_child(root: str, sid: str, conn) -> None:
    """``GET /api/session?session_id=sid`` with memory capped at 1.5 GiB; sends ``(status, payload)``."""
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
    from api.web import routes
    from talaria_testing.scenarios import bound

    with bound(Path(root), restore=False):
        handler = RecordingHandler()
        try:
            routes.dispatch(handler, "GET", "/api/session", {"session_id": sid})
            conn.send((handler.status, handler.json()))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as a crash
            conn.send((None, f"{type(exc).__name__}: {exc}"))


# ---------------------------------------------------------------------- hostile HTTP requests

HOSTILE_METHODS = (
    "GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "BREW", "get", "PROPFIND",
    "G\x00T", "GET /", "", "POST\t", "X" * 300,
)  # fmt: skip
HOSTILE_HOSTS = (
    None, "127.0.0.1:{port}", "localhost:{port}", "attacker.example", "attacker.example:{port}", "",
    "localhost.attacker.example", "[::1]:{port}", "127.0.0.1:{port}:9", "[nothost]", "user@127.0.0.1",
    "xn--80ak6aa92e.com", "a" * 5000,
)  # fmt: skip
HOSTILE_ORIGINS = (
    None, "http://127.0.0.1:{port}", "http://attacker.example", "null", "file://", "http://localhost:{port}",
    "javascript:alert(1)", "http://127.0.0.1:{port}.attacker.example",
)  # fmt: skip
HOSTILE_LENGTHS = ("{n}", "+{n}", " {n}", "{n} ", "-1", "0x10", "1e3", "{n}, {n}", "99999999999999999999", "")
HOSTILE_TYPES = (
    "application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    None, "application/json; charset=utf-16", "application/merge-patch+json", "APPLICATION/JSON",
)  # fmt: skip
HTTP_PATHS = (
    "/health", "/api/sessions", "/api/sessions?limit=2", "/api/sessions?cursor=%ff", "/api/sessions/search?q=a",
    "/api/session?session_id={sid}", "/api/session/new", "/api/session/rename", "/api/session/import",
    "/api/session/delete", "/api/chat/start", "/api/chat/stream?stream_id=nosuch", "/api/sessions/feed",
    "/", "/static/../server.py", "/%2e%2e/etc/passwd", "*", "http://evil/", "/api/" + "a" * 9000,
)  # fmt: skip


_POST_PATHS = frozenset(
    {
        "/api/session/new",
        "/api/session/rename",
        "/api/session/import",
        "/api/session/delete",
        "/api/chat/start",
    }
)


def _deep_json(depth: int) -> bytes:
    return b'{"title": "deep", "messages": ' + b"[" * depth + b"]" * depth + b"}"


def hostile_http_request(rng, port: int, sids: list[str]) -> bytes:
    """One raw request with a hostile method, target, header set, framing or body (never a real turn)."""
    method = rng.choice(HOSTILE_METHODS[:6]) if rng.random() < 0.7 else rng.choice(HOSTILE_METHODS)
    path = rng.choice(HTTP_PATHS).format(sid=rng.choice(sids))
    if rng.random() < 0.5:  # the method the route takes, so the hostile headers meet the route itself
        method = "POST" if path in _POST_PATHS else "GET"
    version = (
        rng.choice(("HTTP/1.1", "HTTP/1.0")) if rng.random() < 0.9 else rng.choice(("HTTP/2.0", "HTTP/1", ""))
    )
    body_kind = rng.random()
    if body_kind < 0.5:
        body = json.dumps({"session_id": rng.choice(sids + ["nosuch", "../x"]), "title": "fuzz"}).encode()
        if path.startswith("/api/chat/start"):
            body = b'{"session_id": "fuzz-no-such-session", "message": "hi"}'
    elif body_kind < 0.6:
        body = _deep_json(rng.choice((10, 70, 1000, 5000)))
    elif body_kind < 0.7:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    else:
        body = b""
    lines = [f"{method} {path} {version}".rstrip()]
    # Mostly well-formed framing and our own Host, so most requests reach a route with the rest hostile.
    host = rng.choice(HOSTILE_HOSTS[:3]) if rng.random() < 0.7 else rng.choice(HOSTILE_HOSTS)
    if host is not None:
        lines.append(f"Host: {host.format(port=port)}")
        if rng.random() < 0.05:
            lines.append(f"Host: {host.format(port=port)}")
    origin = rng.choice(HOSTILE_ORIGINS[:2]) if rng.random() < 0.6 else rng.choice(HOSTILE_ORIGINS)
    if origin is not None:
        lines.append(f"Origin: {origin.format(port=port)}")
    if rng.random() < 0.2:
        lines.append(f"Sec-Fetch-Site: {rng.choice(('cross-site', 'same-origin', 'none', 'same-site', 'x'))}")
    if rng.random() < 0.1:
        lines.append(
            f"Referer: {rng.choice(('http://attacker.example/', 'garbage', f'http://127.0.0.1:{port}/'))}"
        )
    content_type = "application/json" if rng.random() < 0.6 else rng.choice(HOSTILE_TYPES)
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if body or rng.random() < 0.5:
        for _ in range(1 if rng.random() < 0.9 else 2):
            length = "{n}" if rng.random() < 0.8 else rng.choice(HOSTILE_LENGTHS)
            lines.append("Content-Length: " + length.format(n=len(body)))
    extra = rng.random()
    if extra < 0.05:
        lines.append("Transfer-Encoding: chunked")
    elif extra < 0.1:
        lines.append(" folded: continuation")
    elif extra < 0.15:
        lines.append("X-Nul: a\x00b")
    elif extra < 0.2:
        lines.append("X-Big: " + "b" * rng.choice((100, 70_000)))
    elif extra < 0.25:
        lines.append("Expect: " + rng.choice(("100-continue", "nothing")))
    elif extra < 0.3:
        lines.extend(f"X-{n}: y" for n in range(120))
    elif extra < 0.35:
        lines.append("Last-Event-ID: " + rng.choice(("1", "-1", "x", "9" * 30)))
    head = "\r\n".join(lines) + "\r\n\r\n"
    return head.encode("utf-8", "surrogateescape") + body


def read_response_head(sock, limit: int = 1 << 20) -> tuple[bytes, dict[str, str], bytes]:
    """(status line, headers, body) — the body only when the response says how long it is."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length and length.isdigit():
        while len(rest) < int(length):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return lines[0], headers, rest
