"""The Host allow-list and the same-origin rule, as pure functions of a policy."""

from __future__ import annotations

import pytest

from api.rules.origin import build_policy, host_allowed, same_origin, split_host


@pytest.mark.parametrize(
    "value, expected",
    [("LocalHost:8787", ("localhost", 8787)), ("[::1]:80", ("::1", 80)), ("127.0.0.1", ("127.0.0.1", None)),
     ("example.com.", ("example.com", None)), ("a:b:c", None), ("[nothost]:1", None), ("x:99999x", None),
     ("user@evil:1", None), ("", None), ("a/b", None), ("[::1", None)],
)  # fmt: skip
def test_split_host(value, expected):
    assert split_host(value) == expected


def test_ip_literals_and_localhost_are_allowed_on_any_port():
    policy = build_policy("127.0.0.1")
    for host in ("localhost:8787", "localhost", "127.0.0.1:8787", "[::1]:9", "127.0.0.2", "192.168.1.5:80"):
        assert host_allowed(policy, host), host
    for host in ("attacker.example:8787", "localhost.attacker.example", "", None, "localhost:8787:1"):
        assert not host_allowed(policy, host), host


def test_the_configured_host_and_allowed_hosts_are_allowed():
    policy = build_policy("talaria.lan", "talaria.example, proxy.example:443")
    assert host_allowed(policy, "talaria.lan:8787")
    assert host_allowed(policy, "talaria.example") and host_allowed(policy, "talaria.example:1234")
    assert host_allowed(policy, "proxy.example:443") and not host_allowed(policy, "proxy.example:80")
    assert not host_allowed(policy, "other.lan:8787")


def test_a_wildcard_bind_adds_no_names():
    assert not host_allowed(build_policy("0.0.0.0"), "rebind.example:8787")


def test_star_allows_every_host_and_malformed_entries_are_refused():
    assert host_allowed(build_policy("127.0.0.1", "*"), "anything.example")
    with pytest.raises(ValueError):
        build_policy("127.0.0.1", "http://x/")


@pytest.mark.parametrize(
    "origin, fetch_site, referer, allowed",
    [("http://localhost:8787", None, None, True), ("http://LOCALHOST:8787", "cross-site", None, True),
     ("http://attacker.example", None, None, False), ("null", None, None, False),
     ("http://localhost:8788", None, None, False), ("https://localhost:8787", None, None, True),
     (None, "same-origin", None, True), (None, "cross-site", None, False), (None, "same-site", None, False),
     (None, None, "http://localhost:8787/page", True), (None, None, "http://evil.example/", False),
     (None, None, "garbage", False), (None, None, None, True)],
)  # fmt: skip
def test_same_origin(origin, fetch_site, referer, allowed):
    assert same_origin("localhost:8787", origin, fetch_site, referer) is allowed


def test_same_origin_with_default_ports():
    assert same_origin("talaria.example", "https://talaria.example", None, None)
    assert same_origin("talaria.example:443", "https://talaria.example", None, None)
    assert not same_origin("talaria.example", "https://talaria.example:8443", None, None)
