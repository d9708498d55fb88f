"""HTTP plumbing: body parsing limits, the JSON response shape and headers, the one error path."""

from __future__ import annotations

import errno
import io
import json
import logging
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.rules.errors import ServiceUnavailable
from api.web import http_io
from api.web.http_io import (
    ApiError,
    BadRequest,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
    bad,
    j,
    parse_json_body,
    query_int,
    read_body,
    redact_paths,
    require_session_id,
    respond_error,
    split_target,
)


class FakeHandler:
    """The minimal handler protocol: no ``headers`` unless given."""

    def __init__(self, body: bytes = b"", headers: dict | None = None, command: str = "POST"):
        self.wfile = io.BytesIO()
        self.rfile = io.BytesIO(body)
        self.status = None
        self.sent: list[tuple[str, str]] = []
        self.command = command
        if headers is not None:
            self.headers = headers

    def send_response(self, status):
        self.status = status

    def send_header(self, key, value):
        self.sent.append((key, value))

    def end_headers(self):
        pass

    def header(self, name):
        return dict(self.sent).get(name)

    def payload(self):
        return json.loads(self.wfile.getvalue())


def _post(body: bytes, content_type: str | None = "application/json", **extra) -> FakeHandler:
    headers = {"Content-Length": str(len(body)), **extra}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return FakeHandler(body, headers)


# ---------------------------------------------------------------------- responses


def test_j_sends_json_with_length_no_store_and_security_headers():
    handler = FakeHandler()
    j(handler, {"ok": True, "text": "héllo ✓"}, 201)
    assert handler.status == 201
    assert handler.payload() == {"ok": True, "text": "héllo ✓"}
    assert handler.header("Content-Type") == "application/json; charset=utf-8"
    assert handler.header("Content-Length") == str(len(handler.wfile.getvalue()))
    assert handler.header("Cache-Control") == "no-store"
    assert handler.header("X-Content-Type-Options") == "nosniff"
    assert handler.header("Referrer-Policy") == "no-referrer"
    assert handler.header("X-Frame-Options") == "DENY"
    assert "default-src 'none'" in handler.header("Content-Security-Policy")


def test_j_survives_lone_surrogates_that_orjson_refuses():
    handler = FakeHandler()
    j(handler, {"text": "bad \ud800 half"})
    assert handler.status == 200
    assert handler.payload() == {"text": "bad \ud800 half"}


def test_head_request_gets_headers_but_no_body():
    handler = FakeHandler(command="HEAD")
    j(handler, {"ok": True})
    assert handler.wfile.getvalue() == b""
    assert int(handler.header("Content-Length")) > 0


def test_bad_sends_the_error_shape():
    handler = FakeHandler()
    bad(handler, "nope", 409)
    assert (handler.status, handler.payload()) == (409, {"error": "nope"})


def test_html_csp_forbids_inline_script_and_framing():
    assert "script-src 'self'" in http_io.HTML_CSP
    assert "unsafe-inline" not in http_io.HTML_CSP
    assert "frame-ancestors 'none'" in http_io.HTML_CSP


# ---------------------------------------------------------------------- respond_error


def test_api_error_becomes_its_status_and_payload_with_extras():
    handler = FakeHandler()
    respond_error(handler, ApiError("slow down", status=429, retry_after=3))
    assert handler.status == 429
    assert handler.payload() == {"error": "slow down", "retry_after": 3}


def test_unexpected_error_is_a_logged_500_without_details(caplog):
    handler = FakeHandler()
    with caplog.at_level(logging.ERROR, logger="talaria.http"):
        respond_error(handler, RuntimeError("open('/home/alice/secret.json') failed"))
    assert handler.status == 500
    assert handler.payload() == {"error": "Internal error"}
    assert "/home/alice" not in handler.wfile.getvalue().decode()
    assert any("unexpected error" in r.message for r in caplog.records)


def test_a_service_unavailable_answer_is_logged_with_its_cause(caplog):
    """A page got a 503 from /api/reasoning and no log said why; a 5xx the domain raises is logged with
    what caused it, a 4xx is not."""
    handler = FakeHandler()
    try:
        try:
            raise AttributeError("module 'x' has no attribute 'y'")
        except AttributeError as cause:
            raise ServiceUnavailable("No LLM provider") from cause
    except ServiceUnavailable as exc:
        with caplog.at_level(logging.WARNING, logger="talaria.http"):
            respond_error(handler, exc)
            respond_error(FakeHandler(), NotFound("gone"))
    assert handler.status == 503
    logged = [r for r in caplog.records if "answered" in r.message]
    assert len(logged) == 1 and "503: No LLM provider" in logged[0].getMessage()
    assert "has no attribute" in caplog.text


def test_error_after_response_started_only_closes_the_connection():
    handler = FakeHandler()
    j(handler, {"ok": True})
    written = handler.wfile.getvalue()
    respond_error(handler, NotFound("late"))
    assert handler.wfile.getvalue() == written
    assert handler.close_connection is True


def test_client_disconnect_is_not_answered():
    handler = FakeHandler()
    respond_error(handler, BrokenPipeError())
    assert handler.status is None and handler.wfile.getvalue() == b""


def test_redact_paths_hides_filesystem_paths_but_keeps_words():
    text = redact_paths("cannot open /home/alice/.hermes/state.db or C:\\Users\\bob\\x.json and/or retry")
    assert "/home/alice" not in text and "Users" not in text
    assert text.count("<path>") == 2
    assert "and/or retry" in text


# ---------------------------------------------------------------------- request bodies


def test_empty_json_body_is_an_empty_object():
    assert read_body(_post(b"")) == {}
    assert read_body(_post(b"", "application/json; charset=utf-8")) == {}


@pytest.mark.parametrize("content_type", [None, "text/plain", "multipart/form-data"])
def test_empty_body_without_the_json_type_is_415(content_type):
    with pytest.raises(UnsupportedMediaType):
        read_body(_post(b"", content_type=content_type))
    with pytest.raises(UnsupportedMediaType):
        read_body(FakeHandler(b""))  # a handler without headers at all


def test_json_object_body_is_parsed():
    assert read_body(_post(b'{"session_id": "abc", "n": 1}')) == {"session_id": "abc", "n": 1}
    assert read_body(_post(b'{"a": 1}', "application/json; charset=utf-8")) == {"a": 1}


def test_body_over_the_limit_is_413_and_never_parsed():
    handler = _post(b"{" * 100)
    with pytest.raises(PayloadTooLarge) as info:
        read_body(handler, max_bytes=99)
    assert info.value.status == 413
    assert info.value.payload()["limit"] == 99
    assert handler.close_connection is True


def test_a_huge_declared_body_is_not_read_at_all(monkeypatch):
    monkeypatch.setattr(http_io, "DRAIN_MAX_BYTES", 50)
    handler = _post(b"x" * 100)
    with pytest.raises(PayloadTooLarge):
        read_body(handler, max_bytes=10)
    assert handler.rfile.tell() == 0


def test_default_limit_comes_from_settings(monkeypatch):
    from api.store import config

    monkeypatch.setitem(config.SETTINGS_VALUES, "max_body_bytes", 10)
    with pytest.raises(PayloadTooLarge):
        read_body(_post(b'{"a": "0123456789"}'))


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_non_json_content_type_is_415(content_type):
    with pytest.raises(UnsupportedMediaType) as info:
        read_body(_post(b'{"a": 1}', content_type))
    assert info.value.status == 415


@pytest.mark.parametrize("raw", [b"{", b"{'a': 1}", b"\xff\xfe", b'{"a": NaN}', b"nul"])
def test_malformed_json_is_400(raw):
    with pytest.raises(BadRequest, match="Malformed JSON"):
        read_body(_post(raw))


@pytest.mark.parametrize("raw", [b"[]", b"[1, 2]", b'"text"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object_is_400(raw):
    with pytest.raises(BadRequest, match="must be an object"):
        read_body(_post(raw))


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "+5", " 5x", "0x10", "5.0", "١٢"])
def test_bad_content_length_is_400(length):
    handler = FakeHandler(b"{}", {"Content-Length": length, "Content-Type": "application/json"})
    with pytest.raises(BadRequest):
        read_body(handler)


def test_body_shorter_than_its_content_length_is_400():
    handler = FakeHandler(b"{}", {"Content-Length": "10", "Content-Type": "application/json"})
    with pytest.raises(BadRequest, match="shorter"):
        read_body(handler)


def test_chunked_body_is_refused_with_411():
    handler = FakeHandler(b"", {"Transfer-Encoding": "chunked", "Content-Type": "application/json"})
    with pytest.raises(ApiError) as info:
        read_body(handler)
    assert info.value.status == 411


@given(st.binary(max_size=200))
def test_parse_json_body_only_ever_returns_a_dict_or_raises_api_errors(raw):
    try:
        result = parse_json_body(raw, "application/json")
    except ApiError as exc:
        assert exc.status in (400, 415)
    else:
        assert isinstance(result, dict)


# ---------------------------------------------------------------------- fields and query strings


@pytest.mark.parametrize("value", [None, "", [], {}])
def test_missing_session_id_names_the_field(value):
    with pytest.raises(BadRequest, match=r"Missing required field\(s\): session_id"):
        require_session_id(value)


def test_whitespace_session_id_is_required_error():
    with pytest.raises(BadRequest, match="session_id is required"):
        require_session_id("   ")


@pytest.mark.parametrize(
    "value",
    [
        "../../etc/passwd",
        "a/b",
        "a.json",
        "x" * 201,
        "café",
        0,
        False,
        12,
        ["a"],
        "a\x00b",
        "a b",
        "_index",
        "_deleted_webui_sessions",
    ],
)
def test_unsafe_session_ids_are_400(value):
    with pytest.raises(BadRequest, match="Invalid session_id"):
        require_session_id(value)


def test_safe_session_id_is_returned_stripped():
    assert require_session_id("  abc_DEF-123 ") == "abc_DEF-123"


def test_split_target_takes_first_values_and_keeps_blanks():
    assert split_target("/api/x?a=1&a=2&b=&c") == ("/api/x", {"a": "1", "b": "", "c": ""})
    assert split_target("/api/session?session_id=%2E%2E%2Fx") == ("/api/session", {"session_id": "../x"})
    assert split_target("") == ("/", {})


@pytest.mark.parametrize(("raw", "expected"), [(None, None), ("", None), ("0", 0), (" 12 ", 12)])
def test_query_int_accepts_non_negative_integers(raw, expected):
    query = {} if raw is None else {"n": raw}
    assert query_int(query, "n") == expected


@pytest.mark.parametrize("raw", ["-1", "1.5", "abc", "١٢", "9" * 20])
def test_query_int_rejects_everything_else(raw):
    with pytest.raises(BadRequest):
        query_int({"n": raw}, "n")


@pytest.mark.parametrize(
    ("err", "status", "word"),
    [
        (errno.ENOSPC, 507, "disk is full"),
        (errno.EROFS, 503, "read-only"),
        (errno.EACCES, 500, "permission denied"),
    ],
)
def test_storage_errors_name_the_cause_without_the_path(err, status, word):
    handler = FakeHandler()
    respond_error(handler, OSError(err, os.strerror(err), "/srv/state/sessions/abc.json"))
    assert handler.status == status
    assert set(handler.payload()) == {"error"} and word in handler.payload()["error"]
    assert "/srv" not in handler.wfile.getvalue().decode()


@pytest.mark.parametrize("depth", [http_io.MAX_JSON_DEPTH + 1, 1000, 5000])
def test_json_nested_deeper_than_the_limit_is_400(depth):
    raw = b'{"a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    with pytest.raises(BadRequest, match="nested too deeply"):
        read_body(_post(raw))


def test_json_nested_up_to_the_limit_is_accepted():
    depth = http_io.MAX_JSON_DEPTH
    raw = b'{"a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    assert read_body(_post(raw))["a"] is not None


def test_two_content_lengths_are_400():
    from email.message import Message

    headers = Message()
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = "2"
    headers["Content-Length"] = "2"
    with pytest.raises(BadRequest, match="More than one"):
        read_body(FakeHandler(b"{}", headers))


def test_the_page_policy_allows_https_images_only_with_the_remote_images_setting(monkeypatch):
    from api.store import config

    monkeypatch.setitem(config.SETTINGS_VALUES, "remote_images", False)
    assert http_io.page_csp() == http_io.HTML_CSP
    monkeypatch.setitem(config.SETTINGS_VALUES, "remote_images", True)
    assert "img-src 'self' data: https:;" in http_io.page_csp()
    assert "script-src 'self';" in http_io.page_csp()
