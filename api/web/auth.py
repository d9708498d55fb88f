"""Optional password login: password hashing, signed session cookie, CSRF token, login rate limit.

Everything here is pure or keeps small in-memory state; the HTTP layer reads headers, calls these and
writes the result. Auth is off when the password is empty, which ``check_bind_allowed`` permits only on
loopback addresses.

- Password: PBKDF2-SHA256, ``PBKDF2_ITERATIONS`` rounds, 16-byte random salt, stored as
  ``pbkdf2_sha256$<iters>$<salt_b64>$<hash_b64>``. The configured password is hashed once when the
  manager is built (a configured value that already is such a string is used as the hash), so the
  plain text is not kept.
- Cookie: ``talaria_session=<payload>.<sig>``; payload is base64url JSON ``{"sid", "iat", "exp"}``, sig is
  base64url HMAC-SHA256 under a key derived from the secret. ``HttpOnly; SameSite=Strict; Path=/``;
  ``Secure`` when asked. Logout revokes the sid in memory only: after a restart a logged-out cookie is
  valid again until it expires (30 days by default).
- CSRF: the token is HMAC-SHA256(csrf key, sid); the page sends it in ``X-CSRF-Token`` on every
  state-changing request; it is compared in constant time.
- Rate limit, per client IP (IPv6 grouped by /64): ``max_failures`` (5) wrong passwords within
  ``failure_window`` (60 s) lock that IP out for the window; each further lockout doubles, up to
  ``max_lockout`` (1 h). A correct password clears the IP's record; one hour without a lockout clears
  the doubling. While locked, even the right password gets 429 without being checked. At most
  ``max_failures`` checks per IP run at once, so parallel guesses cannot slip past the count.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest, Forbidden, TooManyRequests, Unauthorized
from api.store import atomic
from api.store.safe_read import read_regular_file

PBKDF2_ITERATIONS = 600_000
_PBKDF2_MAX_ITERATIONS = 10_000_000
_HASH_PREFIX = "pbkdf2_sha256"
COOKIE_NAME = "talaria_session"
CSRF_HEADER = "X-CSRF-Token"
SECRET_FILE_NAME = ".talaria_secret"
SECRET_BYTES = 32
DEFAULT_COOKIE_MAX_AGE = 30 * 24 * 3600
_MAX_COOKIE_VALUE = 1024
_MAX_TRACKED_CLIENTS = 10_000


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- passwords ---------------------------------------------------------------------------------------


def hash_password(password: str) -> str:
    """``pbkdf2_sha256$<iters>$<salt_b64>$<hash_b64>`` with a fresh random salt."""
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8", "surrogatepass"), salt, PBKDF2_ITERATIONS)
    return f"{_HASH_PREFIX}${PBKDF2_ITERATIONS}${_b64(salt)}${_b64(digest)}"


def _parse_hash(encoded: str) -> tuple[int, bytes, bytes] | None:
    try:
        prefix, iters_text, salt_text, digest_text = encoded.split("$")
        iterations = int(iters_text)
        salt, digest = _unb64(salt_text), _unb64(digest_text)
    except (ValueError, AttributeError, TypeError):
        return None
    if (
        prefix != _HASH_PREFIX
        or not 1 <= iterations <= _PBKDF2_MAX_ITERATIONS
        or not salt
        or len(digest) != 32
    ):
        return None
    return iterations, salt, digest


def verify_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded``; a malformed hash never matches."""
    parsed = _parse_hash(encoded)
    if parsed is None or not isinstance(password, str):
        return False
    iterations, salt, digest = parsed
    candidate = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8", "surrogatepass"), salt, iterations)
    return hmac.compare_digest(candidate, digest)


# --- binding and the secret --------------------------------------------------------------------------


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and addresses in 127.0.0.0/8 or ::1 (also IPv4-mapped); no DNS lookups."""
    name = (host or "").strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def check_bind_allowed(host: str, password: str) -> None:
    """Raise ``ValueError`` when listening on ``host`` would expose Talaria without a password."""
    if password or is_loopback_host(host):
        return
    raise ValueError(
        f"Refusing to listen on {host or 'all interfaces'!r} without a password: only loopback "
        "(127.0.0.0/8, ::1, localhost) may run without login. Set a password (TALARIA_PASSWORD, or "
        "'password' under 'webui:' in $HERMES_HOME/config.yaml), or listen on 127.0.0.1."
    )


def load_or_create_secret(state_dir: Path) -> bytes:
    """The 32-byte cookie key from ``<state_dir>/.talaria_secret``, created (mode 0600) when missing.

    A file of the wrong size is kept aside as ``.talaria_secret.invalid-<unix_ms>`` and replaced.
    """
    state_dir = Path(state_dir)
    path = state_dir / SECRET_FILE_NAME
    try:
        found = read_regular_file(path, max_bytes=SECRET_BYTES * 64)
        data = found[1] if found is not None else None
    except ValueError:  # not a regular file, or far too large: replaced like a wrong one
        data = b""
    if data is not None and len(data) == SECRET_BYTES:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        return data
    if data is not None:
        aside = atomic.keep_aside(path, "invalid")
        if aside is not None:
            os.chmod(aside, 0o600)
    state_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(SECRET_BYTES)
    atomic.write_bytes_durable(path, key, mode=0o600)
    os.chmod(path, 0o600)  # in case a stale temp file kept wider bits
    return key


# --- rate limit --------------------------------------------------------------------------------------


def _client_key(client_ip: str) -> str:
    # One IPv6 host usually owns a whole /64; counting per address would let it rotate freely.
    try:
        address = ipaddress.ip_address((client_ip or "").split("%", 1)[0])
    except ValueError:
        return str(client_ip)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass
class _ClientRecord:
    failures: list[float] = field(default_factory=list)
    locked_until: float = 0.0
    strikes: int = 0
    in_flight: int = 0


# --- the manager -------------------------------------------------------------------------------------


class AuthManager:
    """Login, cookie sessions, CSRF tokens and the login rate limit for one server."""

    def __init__(
        self,
        password: str,
        secret_key: bytes,
        *,
        clock: Callable[[], float] = time.time,
        cookie_max_age: int = DEFAULT_COOKIE_MAX_AGE,
        max_failures: int = 5,
        failure_window: float = 60.0,
        max_lockout: float = 3600.0,
    ):
        if not isinstance(secret_key, bytes | bytearray) or len(secret_key) < 16:
            raise ValueError("secret_key must be at least 16 bytes")
        self.enabled = bool(password)
        if not self.enabled:
            self._password_hash = None
        elif _parse_hash(password) is not None:
            self._password_hash = password
        else:
            self._password_hash = hash_password(password)
        self._cookie_key = hmac.new(bytes(secret_key), b"talaria session cookie v1", hashlib.sha256).digest()
        self._csrf_key = hmac.new(bytes(secret_key), b"talaria csrf token v1", hashlib.sha256).digest()
        self._clock = clock
        self.cookie_max_age = int(cookie_max_age)
        self.max_failures = max_failures
        self.failure_window = failure_window
        self.max_lockout = max_lockout
        self._lock = threading.Lock()
        self._clients: dict[str, _ClientRecord] = {}
        self._revoked: dict[str, float] = {}

    # login and rate limit

    def login(self, password: str, client_ip: str) -> tuple[str, str]:
        """``(cookie_value, csrf_token)`` for the right password.

        Raises ``Unauthorized`` for a wrong one, ``TooManyRequests`` (with ``retry_after`` seconds)
        while the client is locked out, ``BadRequest`` when login is not enabled.
        """
        if not self.enabled:
            raise BadRequest("Password login is not enabled on this server")
        key = _client_key(client_ip)
        record = self._begin_attempt(key)
        ok = False
        try:
            ok = verify_password(password if isinstance(password, str) else "", self._password_hash or "")
        finally:
            self._end_attempt(key, record, ok)
        if not ok:
            raise Unauthorized("Wrong password")
        return self._new_session()

    def _begin_attempt(self, key: str) -> _ClientRecord:
        with self._lock:
            now = self._clock()
            record = self._clients.get(key)
            if record is None:
                self._prune_clients(now)
                record = self._clients[key] = _ClientRecord()
            if record.locked_until > now:
                wait = max(1, int(record.locked_until - now + 0.999))
                raise TooManyRequests(f"Too many failed logins; try again in {wait} s", retry_after=wait)
            record.failures = [t for t in record.failures if t > now - self.failure_window]
            if len(record.failures) + record.in_flight >= self.max_failures:
                raise TooManyRequests("Too many login attempts at once; try again in 1 s", retry_after=1)
            record.in_flight += 1
            return record

    def _end_attempt(self, key: str, record: _ClientRecord, ok: bool) -> None:
        with self._lock:
            record.in_flight -= 1
            now = self._clock()
            if ok:
                record.failures.clear()
                record.strikes = 0
                if record.in_flight == 0 and self._clients.get(key) is record:
                    del self._clients[key]
                return
            if record.strikes and now - record.locked_until > self.max_lockout:
                record.strikes = 0
            record.failures.append(now)
            if len(record.failures) >= self.max_failures:
                record.strikes += 1
                lockout = min(self.failure_window * 2 ** (record.strikes - 1), self.max_lockout)
                record.locked_until = now + lockout
                record.failures.clear()

    def _prune_clients(self, now: float) -> None:
        if len(self._clients) < _MAX_TRACKED_CLIENTS:
            return
        forget_before = now - max(self.failure_window, self.max_lockout)
        for key, record in list(self._clients.items()):
            last = max(record.failures, default=record.locked_until)
            if record.in_flight == 0 and record.locked_until <= now and last < forget_before:
                del self._clients[key]
        while len(self._clients) >= _MAX_TRACKED_CLIENTS:
            # Still full of live records: drop the one whose lockout ends soonest.
            oldest = min(self._clients, key=lambda k: self._clients[k].locked_until)
            del self._clients[oldest]

    # sessions

    def _new_session(self) -> tuple[str, str]:
        now = int(self._clock())
        payload = {"sid": secrets.token_urlsafe(18), "iat": now, "exp": now + self.cookie_max_age}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode("ascii"))
        value = f"{body}.{self._sign(body)}"
        return value, self.csrf_token(payload)

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._cookie_key, body.encode("ascii"), hashlib.sha256).digest())

    def _session_from_value(self, value: str) -> dict[str, Any] | None:
        value = value.strip().strip('"')
        if not value or len(value) > _MAX_COOKIE_VALUE or not value.isascii() or "." not in value:
            return None
        body, _, signature = value.rpartition(".")
        if not hmac.compare_digest(self._sign(body).encode("ascii"), signature.encode("ascii")):
            return None
        try:
            payload = json.loads(_unb64(body))
        except ValueError:
            return None
        if not isinstance(payload, dict):
            return None
        sid, exp = payload.get("sid"), payload.get("exp")
        if not isinstance(sid, str) or not sid or not isinstance(exp, int) or isinstance(exp, bool):
            return None
        if self._clock() >= exp:
            return None
        with self._lock:
            if sid in self._revoked:
                return None
        return payload

    def session_from_cookie(self, cookie_header: str | None) -> dict[str, Any] | None:
        """The session of a valid ``talaria_session`` cookie in a ``Cookie`` header; None otherwise."""
        if not cookie_header:
            return None
        for piece in cookie_header.split(";"):
            name, sep, value = piece.partition("=")
            if sep and name.strip() == COOKIE_NAME:
                session = self._session_from_value(value)
                if session is not None:
                    return session
        return None

    def csrf_token(self, session: dict[str, Any]) -> str:
        """The CSRF token bound to ``session`` (the same for the life of the cookie)."""
        return _b64(hmac.new(self._csrf_key, str(session["sid"]).encode("utf-8"), hashlib.sha256).digest())

    def csrf_ok(self, session: dict[str, Any] | None, token: str | None) -> bool:
        if not isinstance(session, dict) or not isinstance(session.get("sid"), str):
            return False
        if not isinstance(token, str) or not token or not token.isascii():
            return False
        return hmac.compare_digest(self.csrf_token(session).encode("ascii"), token.encode("ascii"))

    def logout(self, session: dict[str, Any] | None) -> None:
        """Revoke ``session`` (in memory) so its cookie stops working."""
        if not isinstance(session, dict) or not isinstance(session.get("sid"), str):
            return
        with self._lock:
            now = self._clock()
            self._revoked = {sid: exp for sid, exp in self._revoked.items() if exp > now}
            self._revoked[session["sid"]] = float(session.get("exp", now + self.cookie_max_age))

    # what the HTTP layer calls per request

    def authorize(
        self, cookie_header: str | None, csrf_token: str | None, *, state_changing: bool
    ) -> dict[str, Any] | None:
        """The request's session (None when auth is off).

        Raises ``Unauthorized`` without a valid cookie, ``Forbidden`` when a state-changing request
        lacks the matching CSRF token.
        """
        if not self.enabled:
            return None
        session = self.session_from_cookie(cookie_header)
        if session is None:
            raise Unauthorized("Login required")
        if state_changing and not self.csrf_ok(session, csrf_token):
            raise Forbidden("Missing or invalid CSRF token")
        return session

    def status(self, cookie_header: str | None) -> dict[str, Any]:
        """``{"enabled", "logged_in", "csrf_token"}`` for ``GET /api/auth/status``."""
        session = self.session_from_cookie(cookie_header) if self.enabled else None
        return {
            "enabled": self.enabled,
            "logged_in": session is not None,
            "csrf_token": self.csrf_token(session) if session is not None else None,
        }

    def set_cookie_header(self, value: str, *, secure: bool = False) -> str:
        """The ``Set-Cookie`` value that stores a session cookie."""
        return _cookie_header(value, [f"Max-Age={self.cookie_max_age}"], secure)

    def clear_cookie_header(self, *, secure: bool = False) -> str:
        """The ``Set-Cookie`` value that removes the session cookie."""
        return _cookie_header("", ["Max-Age=0", "Expires=Thu, 01 Jan 1970 00:00:00 GMT"], secure)


def _cookie_header(value: str, lifetime: list[str], secure: bool) -> str:
    parts = [f"{COOKIE_NAME}={value}", *lifetime, "Path=/", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
