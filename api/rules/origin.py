"""Only this origin drives the server: the ``Host`` allow-list and the same-origin check.

A DNS-rebinding page reaches the server under the attacker's own name, so a ``Host`` that is not one of
ours is refused (421) before anything is read. Ours are: IP literals (no name can be rebound to them),
``localhost``, the address the server is bound to, and the ``allowed_hosts`` setting. Ports are not
compared, except for ``allowed_hosts`` entries that name one: a rebinding page cannot pick the name,
and a proxy or a port forward in front of the server legitimately changes the port.

A cross-site page can still send requests under our name; every state-changing request must therefore
come from our own origin (``Origin``, else ``Sec-Fetch-Site``, else ``Referer``), with or without a
password. Clients that send none of the three (curl, scripts) are not browsers and cannot be driven by
a foreign page.

The rules are pure functions of a ``HostPolicy``; ``configure`` installs the server's policy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from api.rules.errors import Forbidden, MisdirectedRequest

LOOPBACK_NAMES = frozenset({"localhost"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostPolicy:
    names: frozenset[str]  # accepted on any port
    exact: frozenset[tuple[str, int]] = frozenset()  # accepted on that port only
    allow_all: bool = False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def split_host(value: str, default_port: int | None = None) -> tuple[str, int | None] | None:
    """``"Name:8787"`` → ``("name", 8787)``; ``"[::1]"`` → ``("::1", default_port)``; None when malformed."""
    value = (value or "").strip().lower()
    if not value or any(c in value for c in "/@?#\\ "):
        return None
    if value.startswith("["):
        close = value.find("]")
        if close < 0:
            return None
        name, rest = value[1:close], value[close + 1 :]
        if not _is_ip(name):
            return None
    else:
        name, sep, port_text = value.partition(":")
        rest = f":{port_text}" if sep else ""
        if ":" in port_text:
            return None
    if rest and not rest.startswith(":"):
        return None
    port_text = rest[1:]
    if rest and not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
        return None
    name = name.rstrip(".")
    if not name:
        return None
    return name, int(port_text) if rest else default_port


def build_policy(bind_host: str, allowed_hosts: str = "") -> HostPolicy:
    """The names this server answers to: ``localhost``, its bind address, and ``allowed_hosts``."""
    names = set(LOOPBACK_NAMES)
    bind = (bind_host or "").strip().lower().strip("[]")
    if bind not in _WILDCARD_BINDS:
        names.add(bind)
    exact: set[tuple[str, int]] = set()
    allow_all = False
    for entry in (allowed_hosts or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry == "*":
            allow_all = True
            continue
        parsed = split_host(entry)
        if parsed is None:
            raise ValueError(f"allowed_hosts: {entry!r} is not a host name or host:port")
        name, entry_port = parsed
        if entry_port is None:
            names.add(name)
        else:
            exact.add((name, entry_port))
    return HostPolicy(frozenset(names), frozenset(exact), allow_all)


def host_allowed(policy: HostPolicy, host_header: str | None) -> bool:
    if policy.allow_all:
        return True
    parsed = split_host(host_header or "", 80)
    if parsed is None:
        return False
    name, port = parsed
    return _is_ip(name) or name in policy.names or (name, port) in policy.exact


def _origin_of(url: str) -> tuple[tuple[str, int | None], int] | None:
    """``(host, port)`` of an http(s) URL, with its scheme's default port; None otherwise."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc or "@" in parts.netloc:
        return None
    address = split_host(parts.netloc, _DEFAULT_PORTS[scheme])
    return None if address is None else (address, _DEFAULT_PORTS[scheme])


def _matches_host(url: str, host_header: str | None) -> bool:
    claimed = _origin_of(url)
    if claimed is None:  # "null" (a sandboxed frame, a file: page) or garbage
        return False
    address, default_port = claimed
    return address == split_host(host_header or "", default_port)


def same_origin(
    host_header: str | None, origin: str | None, fetch_site: str | None, referer: str | None
) -> bool:
    """True when a state-changing request comes from the page served under ``host_header``."""
    if origin is not None:
        return _matches_host(origin, host_header)
    if fetch_site is not None:
        return fetch_site.strip().lower() in ("same-origin", "none")
    if referer is not None:
        return _matches_host(referer, host_header)
    return True


_POLICY: dict[str, HostPolicy | None] = {"policy": None}


def configure(bind_host: str, allowed_hosts: str = "") -> HostPolicy:
    _POLICY["policy"] = policy = build_policy(bind_host, allowed_hosts)
    return policy


def check_request(method: str, header: Callable[[str], str | None]) -> None:
    """Raise ``MisdirectedRequest`` for a foreign Host, ``Forbidden`` for a cross-site state change.

    ``header(name)`` is the request's header field of that name, or None.
    """
    policy = _POLICY["policy"]
    host = header("Host")
    # No Host at all is an HTTP/1.0 client that is not a browser; a browser always sends one.
    if policy is not None and host is not None and not host_allowed(policy, host):
        raise MisdirectedRequest("This server does not answer to that Host name")
    if method in SAFE_METHODS:
        return
    if not same_origin(host, header("Origin"), header("Sec-Fetch-Site"), header("Referer")):
        raise Forbidden("Cross-origin request refused")
