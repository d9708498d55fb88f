"""Strict request heads: the request line, header fields, and the body's framing."""

from __future__ import annotations

import pytest

from api.server.http_parse import ProtocolError, head_end, parse_head


def _head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


def test_a_plain_request_parses():
    head = parse_head(_head("POST /api/x?a=1 HTTP/1.1", "Host: localhost:8787", "Content-Length: 12"))
    assert (head.method, head.target, head.version) == ("POST", "/api/x?a=1", (1, 1))
    assert head.content_length == 12 and head.get("HOST") == "localhost:8787"


def test_content_length_may_carry_surrounding_spaces():
    assert parse_head(_head("POST / HTTP/1.0", "Content-Length:   7  ")).content_length == 7


def test_head_end_waits_for_the_blank_line():
    assert head_end(b"GET / HTTP/1.0\r\nHost: x\r\n") == -1
    assert head_end(b"GET / HTTP/1.0\r\n\r\nbody") == 18


@pytest.mark.parametrize("value", ["+5", "-5", "5 5", "0x10", "5.0", "1e3", "", "١٢", "9" * 19])
def test_content_length_is_digits_only(value):
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("POST / HTTP/1.0", f"Content-Length: {value}"))
    assert info.value.status == 400


@pytest.mark.parametrize("second", ["5", "6"])
def test_two_content_lengths_are_400_whether_or_not_they_agree(second):
    with pytest.raises(ProtocolError, match="More than one") as info:
        parse_head(_head("POST / HTTP/1.0", "Content-Length: 5", f"content-length: {second}"))
    assert info.value.status == 400


def test_transfer_encoding_is_411():
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked", "Content-Length: 3"))
    assert info.value.status == 411


@pytest.mark.parametrize(
    "line",
    ["garbage", "GET /", "GET / HTTP/1.0 extra", "GET  / HTTP/1.0", "GET / HTTP/x.y", "G(T / HTTP/1.0",
     "GET http://evil/ HTTP/1.0", "GET / http/1.0", "\x00GET / HTTP/1.0"],
)  # fmt: skip
def test_malformed_request_lines_are_400(line):
    with pytest.raises(ProtocolError) as info:
        parse_head(_head(line))
    assert info.value.status == 400


def test_unknown_http_versions_are_505():
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("GET / HTTP/2.0"))
    assert info.value.status == 505


@pytest.mark.parametrize("method", ["BREW", "TRACE", "CONNECT", "PROPFIND", "get"])
def test_unknown_methods_are_501(method):
    with pytest.raises(ProtocolError) as info:
        parse_head(_head(f"{method} / HTTP/1.0"))
    assert info.value.status == 501


@pytest.mark.parametrize(
    "field", ["NoColon", " Folded: value", "Bad Name: x", "X: a\x00b", "X: a\x7fb", ": empty name"]
)
def test_malformed_header_fields_are_400(field):
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("GET / HTTP/1.0", field))
    assert info.value.status == 400


def test_http_1_1_needs_exactly_one_host():
    with pytest.raises(ProtocolError, match="Missing Host"):
        parse_head(_head("GET / HTTP/1.1"))
    with pytest.raises(ProtocolError, match="More than one Host"):
        parse_head(_head("GET / HTTP/1.1", "Host: a", "Host: b"))


def test_too_many_header_fields_are_431():
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("GET / HTTP/1.0", *[f"X-{n}: y" for n in range(101)]))
    assert info.value.status == 431


def test_expect_other_than_100_continue_is_417():
    assert parse_head(_head("POST / HTTP/1.1", "Host: x", "Expect: 100-continue")).expect_continue
    with pytest.raises(ProtocolError) as info:
        parse_head(_head("POST / HTTP/1.1", "Host: x", "Expect: something"))
    assert info.value.status == 417
