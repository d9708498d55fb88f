"""The agent's provider clients share one verifying TLS context per way of verifying
(``api.agent.tls_contexts``): a model request no longer loads a CA bundle, and verification that is off, or a
context that does not verify, is never shared."""

from __future__ import annotations

import ssl
import types

import certifi
import pytest

from api.agent import agent_runtime, tls_contexts
from api.agent.tls_contexts import SharedVerify


class Resolver:
    """A stand-in for the agent's resolver that counts its calls and answers ``answer()``."""

    def __init__(self, answer):
        self.answer = answer
        self.calls: list[dict] = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return self.answer()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_verifying_context_the_agent_resolves_is_built_once_and_handed_to_every_client():
    resolver = Resolver(ssl.create_default_context)
    shared = SharedVerify(resolver)
    first = shared(ca_bundle="/etc/bundle.pem", ssl_verify=None, base_url="https://api.example")
    assert shared(ca_bundle="/etc/bundle.pem", ssl_verify=None, base_url="https://other.example") is first
    assert len(resolver.calls) == 1
    assert resolver.calls[0] == {
        "ca_bundle": "/etc/bundle.pem",
        "ssl_verify": None,
        "base_url": "https://api.example",
    }


def test_verification_left_to_httpx_gets_one_default_context_built_once():
    built: list[ssl.SSLContext] = []

    def default_context() -> ssl.SSLContext:
        built.append(ssl.create_default_context())
        return built[-1]

    shared = SharedVerify(Resolver(lambda: True), default_context=default_context)
    first = shared()
    assert isinstance(first, ssl.SSLContext) and shared() is first and len(built) == 1


@pytest.mark.parametrize(
    "answer",
    [lambda: False, lambda: "not a context", lambda: _unverified()],
    ids=["verification off", "something else", "a context that does not verify"],
)
def test_what_does_not_verify_is_passed_through_and_never_kept(answer):
    resolver = Resolver(answer)
    shared = SharedVerify(resolver, default_context=lambda: _unverified())
    first, second = shared(ssl_verify=False), shared(ssl_verify=False)
    assert len(resolver.calls) == 2
    assert not tls_contexts.verifies(first) and not tls_contexts.verifies(second)


def test_each_bundle_and_verify_setting_has_its_own_context_read_again_after_the_max_age():
    clock = Clock()
    resolver = Resolver(ssl.create_default_context)
    shared = SharedVerify(resolver, clock=clock)
    one, other = shared(ca_bundle="/a.pem"), shared(ca_bundle="/b.pem")
    assert one is not other and len(resolver.calls) == 2
    clock.now += tls_contexts.MAX_AGE_S - 1
    assert shared(ca_bundle="/a.pem") is one and len(resolver.calls) == 2
    clock.now += 2  # a bundle or environment changed meanwhile is read again
    renewed = shared(ca_bundle="/a.pem")
    assert renewed is not one and len(resolver.calls) == 3
    assert shared(ca_bundle="/a.pem") is renewed


def test_the_agents_own_resolver_is_wrapped_once_and_its_answers_are_shared(monkeypatch):
    ssl_verify = agent_runtime.agent_module("agent.ssl_verify")
    monkeypatch.setattr(ssl_verify, "resolve_httpx_verify", ssl_verify.resolve_httpx_verify)
    tls_contexts.share(ssl_verify)
    wrapped = ssl_verify.resolve_httpx_verify
    tls_contexts.share(ssl_verify)
    assert isinstance(wrapped, SharedVerify) and ssl_verify.resolve_httpx_verify is wrapped
    first = ssl_verify.resolve_httpx_verify(ca_bundle=certifi.where())
    assert tls_contexts.verifies(first)
    assert ssl_verify.resolve_httpx_verify(ca_bundle=certifi.where()) is first
    assert ssl_verify.resolve_httpx_verify(ca_bundle=certifi.where(), ssl_verify=False) is False


def test_a_module_without_the_resolver_is_left_as_it_is():
    module = types.ModuleType("elsewhere")
    tls_contexts.share(module)
    assert not hasattr(module, "resolve_httpx_verify")


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
