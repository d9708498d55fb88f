"""``api.agent.agent_runtime`` against fake hermes modules in ``sys.modules`` (the real agent: tests/integration)."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

from api.agent import agent_runtime
from api.agent.agent_runtime import AgentCallbacks
from api.rules.errors import Conflict
from talaria_testing.fake_agent import ScriptedAgent, Sink


@pytest.fixture
def sink():
    return Sink()


@pytest.fixture
def callbacks(sink):
    cb = AgentCallbacks()
    cb.begin_turn(sink)
    return cb


def test_tokens_skip_the_none_segment_sentinel(callbacks, sink):
    for piece in ("Hello ", None, "", "world"):
        callbacks.on_stream_delta(piece)
    assert sink.events == [("token", {"text": "Hello "}), ("token", {"text": "world"})]


def test_reasoning_available_is_dropped_when_it_echoes_streamed_text(callbacks, sink):
    callbacks.on_stream_delta("The answer\n is ")
    callbacks.on_stream_delta("42.")
    callbacks.on_tool_progress("reasoning.available", "_thinking", "The answer is 42.", None)
    callbacks.on_tool_progress("reasoning.available", "_thinking", "Something never streamed", None)
    callbacks.on_reasoning("real thinking")
    assert sink.named("reasoning") == [{"text": "Something never streamed"}, {"text": "real thinking"}]


def test_tool_events_carry_ids_and_the_error_flag_of_the_completion(callbacks, sink):
    callbacks.on_tool_start("call_1", "terminal", {"command": "false"})
    callbacks.on_tool_progress(
        "tool.completed", "terminal", None, None, duration=0.1, is_error=True, result="x"
    )
    callbacks.on_tool_complete("call_1", "terminal", {"command": "false"}, '{"exit_code": 1}')
    callbacks.on_tool_complete("call_2", "todo", {}, "ok" * (agent_runtime.TOOL_RESULT_CAP))
    assert sink.named("tool") == [{"id": "call_1", "name": "terminal", "args": {"command": "false"}}]
    first, second = sink.named("tool_complete")
    assert first == {
        "id": "call_1",
        "name": "terminal",
        "result": '{"exit_code": 1}',
        "is_error": True,
        "truncated": False,
    }
    assert second["is_error"] is False and second["truncated"] is True
    assert len(second["result"]) == agent_runtime.TOOL_RESULT_CAP


def test_compaction_status_also_emits_one_compressing_event(callbacks, sink):
    callbacks.on_status("lifecycle", "📦 Preflight compression: ~69,701 tokens >= 64,000 threshold.")
    callbacks.on_status(
        "lifecycle", "🗜️ Compacting context — summarizing earlier conversation so I can continue..."
    )
    callbacks.on_status("warn", "something else")
    assert [n for n, _ in sink.events] == ["status", "compressing", "status", "status"]
    assert sink.named("status")[2] == {"kind": "warn", "message": "something else"}


def test_interim_text_keeps_the_already_streamed_flag(callbacks, sink):
    callbacks.on_interim("Let me check.", already_streamed=True)
    callbacks.on_interim("")
    assert sink.events == [("interim", {"text": "Let me check.", "already_streamed": True})]


def test_events_after_the_turn_ended_are_dropped_and_a_second_turn_is_refused_while_one_runs(callbacks, sink):
    with pytest.raises(Conflict):
        callbacks.begin_turn(Sink())
    callbacks.on_agent_event("session:compress", {"session_id": "a", "in_place": True})
    assert callbacks.end_turn() == [{"session_id": "a", "in_place": True}]
    callbacks.on_stream_delta("late")
    assert sink.events == []
    callbacks.begin_turn(sink)  # free again


def test_a_failing_sink_never_reaches_the_agent():
    cb = AgentCallbacks()

    def broken(name, data):
        raise RuntimeError("sink down")

    cb.begin_turn(broken)
    cb.on_stream_delta("x")
    cb.on_status("lifecycle", "hi")


def test_events_from_many_threads_all_arrive(callbacks, sink):
    def fire(n):
        for i in range(200):
            callbacks.on_stream_delta(f"{n}:{i} ")

    threads = [threading.Thread(target=fire, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sink.named("token")) == 1600


# -- compression with a fake agent -------------------------------------------------------------


def test_compress_messages_reports_change_and_no_op():
    agent = ScriptedAgent()
    messages = [{"role": "user", "content": str(i)} for i in range(6)]
    outcome = agent_runtime.compress_messages(agent, messages, focus_topic="x")
    assert outcome.changed and len(outcome.messages) == 3 and not outcome.aborted
    short = messages[:2]
    again = agent_runtime.compress_messages(agent, short, current_tokens=10)
    assert not again.changed and again.messages == short


# -- construction with fake hermes modules -----------------------------------------------------


class StrictAgent(ScriptedAgent):
    """An agent whose constructor takes an explicit, limited set of kwargs."""

    def __init__(
        self,
        model="",
        provider=None,
        base_url=None,
        api_key=None,
        session_id=None,
        session_db=None,
        platform=None,
        quiet_mode=False,
        enabled_toolsets=None,
        stream_delta_callback=None,
        status_callback=None,
    ):
        super().__init__(
            model=model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            session_id=session_id,
            session_db=session_db,
            platform=platform,
            quiet_mode=quiet_mode,
            enabled_toolsets=enabled_toolsets,
        )
        self.stream_delta_callback = stream_delta_callback
        self.status_callback = status_callback


class FakeSessionDB:
    opened: list = []

    def __init__(self, db_path=None):
        self.db_path = db_path
        self.closed = False
        FakeSessionDB.opened.append(self)

    def __eq__(self, other):
        return isinstance(other, FakeSessionDB) and other.db_path == self.db_path

    def close(self):
        self.closed = True


@pytest.fixture
def fake_hermes(monkeypatch):
    """Fake ``run_agent``, ``hermes_state`` and ``hermes_cli.runtime_provider`` modules."""
    run_agent = types.ModuleType("run_agent")
    run_agent.AIAgent = StrictAgent
    hermes_state = types.ModuleType("hermes_state")
    hermes_state.SessionDB = FakeSessionDB
    runtime_provider = types.ModuleType("hermes_cli.runtime_provider")
    runtime_provider.resolve_runtime_provider = lambda requested=None: {
        "provider": requested or "custom",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-fake",
        "api_mode": "chat_completions",
    }
    monkeypatch.setitem(sys.modules, "run_agent", run_agent)
    monkeypatch.setitem(sys.modules, "hermes_state", hermes_state)
    monkeypatch.setitem(sys.modules, "hermes_cli.runtime_provider", runtime_provider)
    return types.SimpleNamespace(
        run_agent=run_agent, hermes_state=hermes_state, runtime_provider=runtime_provider
    )


def test_build_agent_passes_only_accepted_kwargs_and_sets_webui_defaults(fake_hermes, tmp_path):
    agent = agent_runtime.build_agent(
        "s1", "m1", None, state_db_path=str(tmp_path / "state.db"), enabled_toolsets=[], skip_memory=True
    )
    assert agent.kwargs == {
        "model": "m1",
        "provider": "custom",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-fake",
        "session_id": "s1",
        "session_db": FakeSessionDB(Path(tmp_path / "state.db")),
        "platform": "webui",
        "quiet_mode": True,
        "enabled_toolsets": [],
    }
    assert agent.suppress_status_output is True and agent._end_session_on_close is False
    assert agent.stream_delta_callback == agent._talaria_callbacks.on_stream_delta


def test_resolve_runtime_maps_provider_failures_to_a_configuration_message(fake_hermes):
    class AuthError(RuntimeError):
        pass

    def no_provider(requested=None, target_model=None):
        raise AuthError("No inference provider configured. Run 'hermes model'.")

    fake_hermes.runtime_provider.resolve_runtime_provider = no_provider
    with pytest.raises(agent_runtime.ProviderNotConfigured) as caught:
        agent_runtime.resolve_runtime("m", None)
    assert "config.yaml" in str(caught.value) and "hermes setup" in str(caught.value)

    def unknown(requested=None, target_model=None):
        raise ValueError(f"unknown provider {requested!r}")

    fake_hermes.runtime_provider.resolve_runtime_provider = unknown
    with pytest.raises(agent_runtime.ProviderNotConfigured, match="unknown provider 'nope'"):
        agent_runtime.resolve_runtime("m", "nope")

    fake_hermes.runtime_provider.resolve_runtime_provider = lambda **kw: {
        "provider": "custom",
        "base_url": "",
    }
    with pytest.raises(agent_runtime.ProviderNotConfigured):
        agent_runtime.resolve_runtime("m", None)


def test_a_constructor_provider_error_is_a_configuration_error(fake_hermes, tmp_path):
    def refuse(**kwargs):
        raise RuntimeError("No LLM provider configured for this agent")

    fake_hermes.run_agent.AIAgent = refuse
    with pytest.raises(agent_runtime.ProviderNotConfigured):
        agent_runtime.build_agent("s", "m", state_db_path=tmp_path / "db")
    assert FakeSessionDB.opened[-1].closed  # the handle opened for the agent is not leaked


def test_a_missing_agent_package_is_reported_as_unavailable(monkeypatch, tmp_path, fake_hermes):
    monkeypatch.setitem(sys.modules, "run_agent", None)  # import now raises ImportError
    with pytest.raises(agent_runtime.AgentUnavailable, match="hermes-agent") as caught:
        agent_runtime.build_agent("s", "m", state_db_path=tmp_path / "db")
    assert caught.value.status == 503


def test_without_a_state_db_path_the_agent_gets_no_session_db(fake_hermes):
    agent = agent_runtime.build_agent("s2", "m1", "custom", state_db_path=None)
    assert agent.kwargs["session_db"] is None and agent.kwargs["provider"] == "custom"


def test_attached_images_become_image_parts_when_the_agent_routes_them_natively(tmp_path):
    from types import SimpleNamespace

    from api.agent import agent_runtime

    png = tmp_path / "dot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    agent = SimpleNamespace(provider="custom", model="m")
    text = "Look\n\n[Attached image: uploads/dot.png (in the workspace)]"
    assert agent_runtime.user_content(agent, text, []) == text
    assert (
        agent_runtime.user_content(agent, text, [str(png)], cfg={"agent": {"image_input_mode": "text"}})
        == text
    )
    parts = agent_runtime.user_content(agent, text, [str(png)], cfg={"agent": {"image_input_mode": "native"}})
    assert parts[0] == {"type": "text", "text": text}
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def _real_session_db_class(monkeypatch, before_open):
    """hermes-agent's own SessionDB, with ``before_open(path)`` run as each one opens."""
    import hermes_state

    real_init = hermes_state.SessionDB.__init__

    def init(self, *args, **kwargs):
        before_open(kwargs.get("db_path"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(hermes_state.SessionDB, "__init__", init)


def test_session_databases_open_one_at_a_time(monkeypatch, tmp_path):
    """Three agents built at once each opened a SessionDB on a new state.db: creating its schema together
    failed with "vtable constructor failed: messages_fts_trigram" or "database is locked", and the turn
    failed. Opening is one at a time in the process now."""
    opening, most = [0], [0]
    guard = threading.Lock()

    def count(_path):
        with guard:
            opening[0] += 1
            most[0] = max(most[0], opening[0])
        threading.Event().wait(0.02)  # widens the window two unserialised opens would share
        with guard:
            opening[0] -= 1

    _real_session_db_class(monkeypatch, count)
    opened, errors = [], []

    def open_one():
        try:
            opened.append(agent_runtime.open_session_db(tmp_path / "state.db"))
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for db in opened:
        db.close()
    assert errors == [] and len(opened) == 6
    assert most[0] == 1


def test_a_session_database_another_process_holds_is_opened_on_a_later_try(monkeypatch, tmp_path):
    import sqlite3

    tries = []

    def locked_twice(path):
        tries.append(path)
        if len(tries) <= 2:
            raise sqlite3.OperationalError("database is locked")

    _real_session_db_class(monkeypatch, locked_twice)
    monkeypatch.setattr(agent_runtime.random, "uniform", lambda low, high: 0.0)
    db = agent_runtime.open_session_db(tmp_path / "state.db")
    try:
        assert len(tries) == 3 and (tmp_path / "state.db").exists()
    finally:
        db.close()
    tries.clear()
    monkeypatch.setattr(agent_runtime, "SESSION_DB_OPEN_ATTEMPTS", 2)
    with pytest.raises(sqlite3.OperationalError):
        agent_runtime.open_session_db(tmp_path / "other.db")


def test_the_first_agent_is_built_alone_and_later_ones_side_by_side(fake_hermes, monkeypatch, tmp_path):
    """The warm-up's first build and a request's throwaway agent (the reasoning picker) imported the agent's
    modules at the same time: the request got a SystemError or a module still initialising, a 503. The
    first build now runs alone; once one agent exists, builds overlap."""
    monkeypatch.setattr(agent_runtime, "_AGENT_BUILT", threading.Event())
    inside, most = [0], [0]
    guard = threading.Lock()

    class CountingAgent(StrictAgent):
        def __init__(self, **kwargs):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            threading.Event().wait(0.05)
            with guard:
                inside[0] -= 1
            super().__init__(**agent_runtime.accepted_kwargs(StrictAgent.__init__, kwargs))

    fake_hermes.run_agent.AIAgent = CountingAgent

    def build_many(count: int) -> None:
        threads = [
            threading.Thread(
                target=agent_runtime.build_agent, args=(f"s{k}", "m1"), kwargs={"state_db_path": None}
            )
            for k in range(count)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)

    agent_runtime.build_agent("first", "m1", state_db_path=None)
    assert most[0] == 1 and agent_runtime._AGENT_BUILT.is_set()
    build_many(4)
    assert most[0] > 1
    monkeypatch.setattr(agent_runtime, "_AGENT_BUILT", threading.Event())
    most[0] = 0
    build_many(4)
    assert most[0] == 1
