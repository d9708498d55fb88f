"""Password login: hashing, signed cookies, CSRF, rate limit, bind check and the secret file."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules.errors import BadRequest, Forbidden, TooManyRequests, Unauthorized
from api.web.auth import (
    COOKIE_NAME,
    PBKDF2_ITERATIONS,
    SECRET_FILE_NAME,
    AuthManager,
    check_bind_allowed,
    hash_password,
    is_loopback_host,
    load_or_create_secret,
    verify_password,
)

PASSWORD = "correct horse battery staple"
SECRET = b"s" * 32
OTHER_SECRET = b"o" * 32
T0 = 1_700_000_000.0


class FakeClock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def encoded() -> str:
    """The one PBKDF2 hash of PASSWORD; managers built from it skip hashing at construction."""
    return hash_password(PASSWORD)


def cheap_hash(password: str, iterations: int = 1_000) -> str:
    """A configured hash with few rounds: the rate-limit tests check many wrong passwords."""
    salt = b"0123456789abcdef"
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()  # noqa: E731
    return f"pbkdf2_sha256${iterations}${b64(salt)}${b64(digest)}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(encoded, clock) -> AuthManager:
    return AuthManager(encoded, SECRET, clock=clock)


@pytest.fixture
def fast_manager(clock) -> AuthManager:
    return AuthManager(cheap_hash(PASSWORD), SECRET, clock=clock)


@pytest.fixture(scope="module")
def login_result(encoded):
    """One real login (cookie, csrf, clock) shared by the cookie and CSRF tests."""
    clock = FakeClock()
    manager = AuthManager(encoded, SECRET, clock=clock)
    cookie, csrf = manager.login(PASSWORD, "127.0.0.1")
    return cookie, csrf


def header(value: str) -> str:
    return f"{COOKIE_NAME}={value}"


# --- hashing -------------------------------------------------------------------------------------------


def test_hash_shows_algorithm_and_at_least_600k_iterations(encoded):
    algorithm, iterations, salt, digest = encoded.split("$")
    assert algorithm == "pbkdf2_sha256"
    assert int(iterations) >= 600_000 and PBKDF2_ITERATIONS >= 600_000
    assert len(base64.urlsafe_b64decode(salt + "==")) == 16
    assert len(base64.urlsafe_b64decode(digest + "==")) == 32


def test_verify_accepts_right_and_rejects_wrong_password(encoded):
    assert verify_password(PASSWORD, encoded)
    assert not verify_password(PASSWORD + " ", encoded)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "pbkdf2_sha256$600000$abc",
        "md5$1$YQ$YQ",
        "pbkdf2_sha256$x$YQ$YQ",
        "pbkdf2_sha256$99999999999$YQ$YQ",
        "$$$",
    ],
)
def test_malformed_hash_never_verifies(bad):
    assert verify_password("anything", bad) is False


def test_manager_built_from_plain_password_hashes_it_once():
    manager = AuthManager(PASSWORD, SECRET, clock=FakeClock())
    assert manager.enabled
    cookie, _ = manager.login(PASSWORD, "10.0.0.1")
    assert manager.session_from_cookie(header(cookie)) is not None


# --- login ---------------------------------------------------------------------------------------------


def test_right_password_gives_a_cookie_session_and_csrf_token(manager):
    cookie, csrf = manager.login(PASSWORD, "127.0.0.1")
    session = manager.session_from_cookie(f"theme=dark; {header(cookie)}; other=1")
    assert session is not None
    assert manager.csrf_ok(session, csrf)
    assert manager.status(header(cookie)) == {"enabled": True, "logged_in": True, "csrf_token": csrf}


def test_wrong_password_is_unauthorized(manager):
    with pytest.raises(Unauthorized):
        manager.login("guess", "127.0.0.1")


def test_empty_password_disables_auth_and_login():
    manager = AuthManager("", SECRET)
    assert manager.enabled is False
    assert manager.authorize(None, None, state_changing=True) is None
    assert manager.status(None) == {"enabled": False, "logged_in": False, "csrf_token": None}
    with pytest.raises(BadRequest):
        manager.login("", "127.0.0.1")


def test_short_secret_is_refused():
    with pytest.raises(ValueError):
        AuthManager("", b"short")


# --- cookies -------------------------------------------------------------------------------------------


def _manager_at_login_time(encoded, secret=SECRET) -> AuthManager:
    return AuthManager(encoded, secret, clock=FakeClock())


def test_cookie_with_changed_payload_is_rejected(encoded, login_result):
    cookie, _ = login_result
    manager = _manager_at_login_time(encoded)
    body, signature = cookie.rsplit(".", 1)
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["exp"] += 10 * 365 * 24 * 3600
    forged_body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    assert manager.session_from_cookie(header(cookie)) is not None
    assert manager.session_from_cookie(header(f"{forged_body}.{signature}")) is None


def test_cookie_with_changed_signature_is_rejected(encoded, login_result):
    cookie, _ = login_result
    manager = _manager_at_login_time(encoded)
    body, signature = cookie.rsplit(".", 1)
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    for forged in (f"{body}.{flipped}", f"{body}.", body, f"{body}.{signature}x", "", "."):
        assert manager.session_from_cookie(header(forged)) is None, forged


def test_cookie_signed_with_another_secret_is_rejected(encoded, login_result):
    cookie, _ = login_result
    assert _manager_at_login_time(encoded, OTHER_SECRET).session_from_cookie(header(cookie)) is None


def test_valid_cookie_after_a_forged_one_of_the_same_name_is_found(encoded, login_result):
    cookie, _ = login_result
    manager = _manager_at_login_time(encoded)
    assert manager.session_from_cookie(f"{header('junk.sig')}; {header(cookie)}") is not None


def test_cookie_expires_after_max_age(clock):
    manager = AuthManager(cheap_hash(PASSWORD), SECRET, clock=clock, cookie_max_age=3600)
    cookie, _ = manager.login(PASSWORD, "127.0.0.1")
    clock.advance(3599)
    assert manager.session_from_cookie(header(cookie)) is not None
    clock.advance(1)
    assert manager.session_from_cookie(header(cookie)) is None


def test_logout_revokes_the_cookie(fast_manager):
    manager = fast_manager
    cookie, _ = manager.login(PASSWORD, "127.0.0.1")
    session = manager.session_from_cookie(header(cookie))
    manager.logout(session)
    assert manager.session_from_cookie(header(cookie)) is None
    with pytest.raises(Unauthorized):
        manager.authorize(header(cookie), None, state_changing=False)


def test_missing_cookie_header_has_no_session(manager):
    assert manager.session_from_cookie(None) is None
    assert manager.session_from_cookie("") is None
    assert manager.session_from_cookie("theme=dark") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_cookie_headers_never_yield_a_session(text):
    manager = AuthManager("pbkdf2_sha256$600000$YWFhYWFhYWFhYWFhYWFhYQ$" + "A" * 43, SECRET)
    assert manager.session_from_cookie(text) is None
    assert manager.session_from_cookie(header(text)) is None


def test_set_cookie_header_is_httponly_strict_and_secure_only_when_asked(manager):
    plain = [part.strip() for part in manager.set_cookie_header("v.s").split(";")]
    assert plain[0] == f"{COOKIE_NAME}=v.s"
    assert {"HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={30 * 24 * 3600}"} <= set(plain)
    assert "Secure" not in plain
    assert "Secure" in [part.strip() for part in manager.set_cookie_header("v.s", secure=True).split(";")]
    cleared = [part.strip() for part in manager.clear_cookie_header().split(";")]
    assert cleared[0] == f"{COOKIE_NAME}=" and "Max-Age=0" in cleared and "HttpOnly" in cleared


# --- CSRF ----------------------------------------------------------------------------------------------


def test_missing_or_wrong_csrf_token_is_refused(encoded, login_result):
    cookie, csrf = login_result
    manager = _manager_at_login_time(encoded)
    session = manager.session_from_cookie(header(cookie))
    assert manager.csrf_ok(session, csrf)
    for bad in (
        None,
        "",
        csrf[:-1],
        csrf + "x",
        csrf.upper() if csrf.upper() != csrf else csrf.lower(),
        "é" * 43,
    ):
        assert not manager.csrf_ok(session, bad), bad
    assert not manager.csrf_ok(None, csrf)


def test_csrf_token_of_another_session_is_refused(fast_manager):
    manager = fast_manager
    cookie_a, csrf_a = manager.login(PASSWORD, "127.0.0.1")
    cookie_b, csrf_b = manager.login(PASSWORD, "127.0.0.1")
    session_a = manager.session_from_cookie(header(cookie_a))
    assert csrf_a != csrf_b
    assert not manager.csrf_ok(session_a, csrf_b)


def test_authorize_needs_cookie_always_and_csrf_for_state_changes(encoded, login_result):
    cookie, csrf = login_result
    manager = _manager_at_login_time(encoded)
    with pytest.raises(Unauthorized):
        manager.authorize(None, csrf, state_changing=False)
    assert manager.authorize(header(cookie), None, state_changing=False) is not None
    with pytest.raises(Forbidden):
        manager.authorize(header(cookie), None, state_changing=True)
    with pytest.raises(Forbidden):
        manager.authorize(header(cookie), "wrong", state_changing=True)
    assert manager.authorize(header(cookie), csrf, state_changing=True)["exp"] > T0


# --- rate limit ----------------------------------------------------------------------------------------


def _fail(manager: AuthManager, ip: str, times: int) -> None:
    for _ in range(times):
        with pytest.raises(Unauthorized):
            manager.login("wrong", ip)


def test_rate_limit_locks_an_ip_then_releases_after_the_window(fast_manager, clock):
    _fail(fast_manager, "203.0.113.7", 5)
    with pytest.raises(TooManyRequests) as locked:
        fast_manager.login(PASSWORD, "203.0.113.7")
    assert locked.value.status == 429
    assert 1 <= locked.value.extra["retry_after"] <= 60
    fast_manager.login(PASSWORD, "203.0.113.8")  # another address is unaffected
    clock.advance(59)
    with pytest.raises(TooManyRequests):
        fast_manager.login(PASSWORD, "203.0.113.7")
    clock.advance(2)
    cookie, _ = fast_manager.login(PASSWORD, "203.0.113.7")
    assert fast_manager.session_from_cookie(header(cookie)) is not None


def test_failures_spread_beyond_the_window_do_not_lock(fast_manager, clock):
    for _ in range(3):
        _fail(fast_manager, "198.51.100.1", 2)
        clock.advance(61)
    fast_manager.login(PASSWORD, "198.51.100.1")


def test_repeated_lockouts_double_and_success_resets_them(fast_manager, clock):
    ip = "198.51.100.9"
    _fail(fast_manager, ip, 5)
    clock.advance(61)
    _fail(fast_manager, ip, 5)
    clock.advance(61)  # second lockout lasts 120 s
    with pytest.raises(TooManyRequests) as locked:
        fast_manager.login(PASSWORD, ip)
    assert locked.value.extra["retry_after"] == 59
    clock.advance(60)
    fast_manager.login(PASSWORD, ip)
    _fail(fast_manager, ip, 5)  # after a success the next lockout is back to the window
    clock.advance(61)
    fast_manager.login(PASSWORD, ip)


def test_ipv6_neighbours_in_one_slash64_share_a_limit(fast_manager):
    for i in range(1, 6):
        _fail(fast_manager, f"2001:db8:1:2::{i}", 1)
    with pytest.raises(TooManyRequests):
        fast_manager.login(PASSWORD, "2001:db8:1:2:ffff::1")


def test_parallel_guesses_cannot_exceed_the_limit(manager):
    # Full-cost hashing keeps the attempts overlapping; whatever the interleaving, only five are checked.
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def guess():
        barrier.wait()
        try:
            manager.login("wrong", "192.0.2.44")
        except (Unauthorized, TooManyRequests) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=guess) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["TooManyRequests"] * 3 + ["Unauthorized"] * 5


# --- binding -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "192.168.1.5", "::", "", "example.com", "10.0.0.1", "::ffff:192.168.1.5"]
)
def test_non_loopback_bind_without_password_is_refused(host):
    with pytest.raises(ValueError, match="without a password"):
        check_bind_allowed(host, "")
    check_bind_allowed(host, "secret")


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST", "::ffff:127.0.0.1"]
)
def test_loopback_bind_without_password_is_allowed(host):
    assert is_loopback_host(host)
    check_bind_allowed(host, "")


@given(st.ip_addresses(v=4))
def test_ipv4_loopback_is_exactly_127_slash_8(address):
    assert is_loopback_host(str(address)) == str(address).startswith("127.")


# --- secret file ---------------------------------------------------------------------------------------


def test_secret_is_created_private_and_then_reused(tmp_path):
    state = tmp_path / "state"
    key = load_or_create_secret(state)
    path = state / SECRET_FILE_NAME
    assert len(key) == 32
    assert path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_secret(state) == key


def test_secret_with_open_permissions_is_tightened(tmp_path):
    key = load_or_create_secret(tmp_path)
    path = tmp_path / SECRET_FILE_NAME
    os.chmod(path, 0o644)
    assert load_or_create_secret(tmp_path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_invalid_secret_file_is_kept_aside_and_replaced(tmp_path):
    path = tmp_path / SECRET_FILE_NAME
    path.write_bytes(b"too short")
    key = load_or_create_secret(tmp_path)
    assert len(key) == 32 and path.read_bytes() == key
    kept = list(tmp_path.glob(f"{SECRET_FILE_NAME}.invalid-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == b"too short"
