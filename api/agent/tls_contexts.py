"""One TLS context per way of verifying, shared by the agent's provider clients in a process.

The agent builds a new OpenAI client for every model request (``create_openai_client`` in its
``agent_runtime_helpers``), and each build loads a whole CA bundle into a new ``ssl.SSLContext``: once when the
agent resolves a bundle itself (``HERMES_CA_BUNDLE``, ``SSL_CERT_FILE``..., a provider's ``ssl_ca_cert``), three
times (the client and its two transports) when it leaves verification to httpx. That is 5–20 ms of CPU per
request, the largest cost of a streamed turn in a worker after the stream itself.

A verifying context is safe to share between clients (httpcore only sets the same ALPN list on it), so ``share``
wraps the agent's resolver (``agent.ssl_verify.resolve_httpx_verify``): a verifying context it returns, or the
one httpx builds for ``verify=True`` (``httpx.create_ssl_context``, httpx's own rule), is kept for
``MAX_AGE_S`` per ``(ca_bundle, ssl_verify)`` and handed to the next clients. A changed bundle or environment is
read again within that time. ``False`` (verification off) and anything that does not verify are never kept.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

MAX_AGE_S = 60.0

Resolve = Callable[..., Any]


def httpx_default_context() -> ssl.SSLContext:
    """What httpx builds for ``verify=True`` (imported here: the server process needs httpx only for the agent)."""
    import httpx

    return httpx.create_ssl_context()


def verifies(value: Any) -> bool:
    """Whether ``value`` is a context that checks both the certificate chain and the host name."""
    return (
        isinstance(value, ssl.SSLContext) and value.verify_mode == ssl.CERT_REQUIRED and value.check_hostname
    )


class SharedVerify:
    """The agent's resolver with its verifying contexts kept and shared (``resolve`` is the agent's own)."""

    def __init__(
        self,
        resolve: Resolve,
        *,
        default_context: Callable[[], ssl.SSLContext] = httpx_default_context,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resolve = resolve
        self._default_context = default_context
        self._max_age_s = max_age_s
        self._clock = clock
        self._kept: dict[tuple[str, str], tuple[float, ssl.SSLContext]] = {}
        self._lock = threading.Lock()

    def __call__(self, *, ca_bundle: Any = None, ssl_verify: Any = None, base_url: str = "") -> Any:
        key = (str(ca_bundle or ""), repr(ssl_verify))
        now = self._clock()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self._max_age_s:
            return kept[1]
        verify = self.resolve(ca_bundle=ca_bundle, ssl_verify=ssl_verify, base_url=base_url)
        shared = self._default_context() if verify is True else verify
        if not verifies(shared):
            return verify
        with self._lock:
            self._kept[key] = (now, shared)
        return shared


def share(ssl_verify_module: ModuleType) -> None:
    """Put ``SharedVerify`` in place of the agent's resolver, once per process (the agent imports the resolver
    inside each client build, so the next build finds it)."""
    current = getattr(ssl_verify_module, "resolve_httpx_verify", None)
    if callable(current) and not isinstance(current, SharedVerify):
        ssl_verify_module.resolve_httpx_verify = SharedVerify(current)  # type: ignore[attr-defined]
