"""The connection test of the setup form: ask an OpenAI-compatible endpoint for its ``/models``.

The URL comes from the person, so the request is bounded: http or https only, no credentials in the
URL, redirects followed only within the same scheme, host and port, and at most ``RESPONSE_CAP`` bytes
read. The timeout is a deadline for the whole test, redirects and body included: each step waits at most
what is left of it, and at the deadline the connection is shut down under whatever read is waiting, so an
endpoint that trickles its answer byte by byte holds the test no longer. Only model ids go back to the
page, never the response itself.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urljoin, urlsplit

import httpx

from api.rules.errors import BadRequest

URL_MAX = 2048
KEY_MAX = 4096
TIMEOUT_S = 8.0
RESPONSE_CAP = 1024 * 1024
MAX_REDIRECTS = 3
MAX_MODELS = 500


def clean_base_url(value: Any) -> str:
    """An endpoint base URL (``http(s)://host[:port]/path``, no credentials, query or fragment), or 400."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("The URL must start with http:// or https://.")
    value = value.strip()
    if len(value) > URL_MAX or any(ord(ch) <= 32 or ord(ch) == 127 for ch in value):
        raise BadRequest("The URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        raise BadRequest("The URL is not a valid address.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise BadRequest("The URL must start with http:// or https:// and name a host.")
    if parts.username is not None or parts.password is not None:
        raise BadRequest("The URL must not hold a user name or password; put the key in the API key field.")
    if parts.query or parts.fragment:
        raise BadRequest("The URL must not end with a ?query or #fragment.")
    return cast("str", value.rstrip("/"))


def clean_api_key(value: Any) -> str:
    """An API key (printable ASCII without spaces), ``""`` when absent, or 400."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > KEY_MAX:
        raise BadRequest(f"The API key must be at most {KEY_MAX} characters.")
    value = value.strip()
    if not all(33 <= ord(ch) < 127 for ch in value):
        raise BadRequest("The API key must be plain letters, digits and symbols, without spaces.")
    return cast("str", value)


def model_ids(payload: Any) -> list[str]:
    """Model ids from an OpenAI-style ``{"data": [{"id"}]}`` (or ``{"models": [...]}``) answer (pure)."""
    items = payload.get("data", payload.get("models")) if isinstance(payload, dict) else payload
    ids: list[str] = []
    for item in items if isinstance(items, list) else []:
        name = item.get("id") or item.get("name") if isinstance(item, dict) else item
        if isinstance(name, str) and 0 < len(name) <= 200 and name.isprintable() and name not in ids:
            ids.append(name)
        if len(ids) >= MAX_MODELS:
            break
    return ids


@dataclass
class ProbeResult:
    ok: bool
    message: str
    models: list[str] = field(default_factory=list)
    # What failed, for callers that advise on it: ok, refused, unreachable, auth or no_list.
    kind: str = "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message, "models": self.models}


def _same_origin(first: str, second: str) -> bool:
    a, b = urlsplit(first), urlsplit(second)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


class _Deadline:
    """One probe's deadline: what is left of it, and the shutdown of its connections when it passes."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True

    def remaining(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise httpx.TimeoutException("deadline passed")
        return left

    def trace(self, name: str, info: dict[str, Any]) -> None:
        """httpx's trace hook: remember each connection's socket as it is made."""
        if name == "connection.connect_tcp.complete":
            sock = info["return_value"].get_extra_info("socket")
            with self._lock:
                self._sockets.append(sock)
                if not self.expired:
                    return
            self._shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a read waiting on it
        except OSError:
            pass

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _read_capped(response: httpx.Response, deadline: _Deadline) -> bytes | None:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > RESPONSE_CAP:
            return None
        deadline.remaining()
    return bytes(body)


def probe(base_url: str, api_key: str = "", *, timeout: float = TIMEOUT_S) -> ProbeResult:
    """``GET <base_url>/models`` with the key; which models the endpoint serves, or why it failed."""
    url = f"{base_url}/models"
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    deadline = _Deadline(timeout)
    try:
        with deadline, httpx.Client(timeout=timeout, follow_redirects=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                with client.stream(
                    "GET",
                    url,
                    headers=headers,
                    timeout=deadline.remaining(),
                    extensions={"trace": deadline.trace},
                ) as response:
                    if response.is_redirect:
                        target = urljoin(url, response.headers.get("Location", ""))
                        if not _same_origin(url, target):
                            return ProbeResult(
                                False, "The endpoint redirects to another host; use that URL.", kind="no_list"
                            )
                        url = target
                        continue
                    body = _read_capped(response, deadline)
                    status = response.status_code
                break
            else:
                return ProbeResult(False, "The endpoint redirects too often.", kind="no_list")
    except httpx.TimeoutException:
        return ProbeResult(False, f"No answer within {timeout:g} seconds.", kind="unreachable")
    except httpx.HTTPError as exc:
        if deadline.expired:  # the connection was shut at the deadline
            return ProbeResult(False, f"No answer within {timeout:g} seconds.", kind="unreachable")
        return _connect_failure(exc)
    return _verdict(body, status)


def _connect_failure(exc: httpx.HTTPError) -> ProbeResult:
    if isinstance(exc, httpx.ConnectError) and "refused" in str(exc).lower():
        return ProbeResult(False, "Cannot connect: the connection was refused.", kind="refused")
    return ProbeResult(False, f"Cannot connect: {type(exc).__name__}.", kind="unreachable")


def _verdict(body: bytes | None, status: int) -> ProbeResult:
    """What the endpoint's answer to ``GET /models`` says (pure)."""
    if body is None:
        return ProbeResult(False, "The answer is too large to be a model list.", kind="no_list")
    if status in (401, 403):
        return ProbeResult(False, f"The endpoint refused the key (HTTP {status}).", kind="auth")
    if status != 200:
        return ProbeResult(False, f"The endpoint answered HTTP {status} to GET /models.", kind="no_list")
    try:
        ids = model_ids(json.loads(body))
    except ValueError:
        return ProbeResult(False, "The answer to GET /models is not JSON.", kind="no_list")
    if not ids:
        return ProbeResult(False, "The endpoint lists no models.", kind="no_list")
    return ProbeResult(True, f"Connected: {len(ids)} model{'s' if len(ids) != 1 else ''} available.", ids)
