"""A scripted compressor inside stand-in ``run_agent`` and ``hermes_cli.runtime_provider`` modules (for
unit tests of manual compression only).

Integration tests use the real hermes-agent against ``talaria_testing.fake_llm`` instead.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable


def keep_first_and_last(messages, current_tokens=None, focus_topic=None):
    return [messages[0], messages[-1]] if len(messages) >= 2 else list(messages)


class ScriptedCompressor:
    def __init__(self, fn: Callable):
        self.fn = fn
        self.calls: list[dict] = []

    def compress(self, messages, current_tokens=None, focus_topic=None):
        self.calls.append(
            {"messages": messages, "current_tokens": current_tokens, "focus_topic": focus_topic}
        )
        return self.fn(messages, current_tokens=current_tokens, focus_topic=focus_topic)


def install_scripted_compressor(
    monkeypatch, compress_fn: Callable = keep_first_and_last, *, api_key: str | None = "fake-key"
):
    """Put stand-in agent modules in ``sys.modules``; returns a dict that records the agents built."""
    record: dict = {"agents": []}

    class CompressingAgent:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.context_compressor = ScriptedCompressor(compress_fn)
            record["agents"].append(self)

    run_agent = types.ModuleType("run_agent")
    run_agent.AIAgent = CompressingAgent
    runtime_provider = types.ModuleType("hermes_cli.runtime_provider")
    runtime_provider.resolve_runtime_provider = lambda requested=None, **kw: {
        "api_key": api_key,
        "provider": requested or "custom",
        "base_url": "http://127.0.0.1:9/v1",
    }
    hermes_cli = types.ModuleType("hermes_cli")
    hermes_cli.__path__ = []
    hermes_cli.runtime_provider = runtime_provider
    monkeypatch.setitem(sys.modules, "run_agent", run_agent)
    monkeypatch.setitem(sys.modules, "hermes_cli", hermes_cli)
    monkeypatch.setitem(sys.modules, "hermes_cli.runtime_provider", runtime_provider)
    return record
