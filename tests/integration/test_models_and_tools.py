"""Model per session, first-run setup and toolsets per session, end to end.

The real server subprocess runs the real hermes-agent against fake LLM servers on 127.0.0.1 (one is the
configured default, a second one a saved custom endpoint); what reaches them is read from their logs.
"""

from __future__ import annotations

import html
import json
import re

import pytest
import yaml

from talaria_testing.fake_llm import FakeLLM, Reply, agent_server
from talaria_testing.server_proc import ServerProc

from .test_chat import chat, named, new_session, on_disk, session, text_of

pytestmark = pytest.mark.integration

SECRET = "sk-setup-secret-4242"


@pytest.fixture(scope="module")
def llm():
    with FakeLLM(extra_models=("fake-b",)) as server:
        yield server


@pytest.fixture(scope="module")
def second():
    with FakeLLM(model="other-model") as server:
        yield server


@pytest.fixture(scope="module")
def provider():
    """Stands in for a known provider (DeepSeek): the agent reaches it through its base-URL variable."""
    with FakeLLM(model="deepseek-chat") as server:
        yield server


@pytest.fixture
def fakes(llm, second, provider):
    with llm.fresh(), second.fresh(), provider.fresh():
        llm.extra_models = ("fake-b",)
        yield llm, second


def html_text(markup: str) -> str:
    """The text of rendered HTML, its line breaks kept."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _server(root, env: dict | None = None) -> ServerProc:
    return ServerProc(root, env={"TALARIA_CHECKPOINT_INTERVAL": "0.2", **(env or {})})


@pytest.fixture(scope="module")
def srv(llm, second, provider, tmp_path_factory):
    endpoint = {"name": "Second", "base_url": second.base_url, "api_key": "sk-second-1234"}
    extra = {"custom_providers": [{**endpoint, "model": "other-model"}], "model_catalog": {"enabled": False}}
    root = tmp_path_factory.mktemp("models")
    server = agent_server(
        root, llm.base_url, toolsets="todo", env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"}, extra=extra
    )
    env_file = f"DEEPSEEK_API_KEY=sk-deep-1234\nDEEPSEEK_BASE_URL={provider.base_url}\n"
    (server.hermes_home / ".env").write_text(env_file, encoding="utf-8")
    with server:
        yield server


def _groups(srv: ServerProc, refresh: bool = False) -> dict[str, list[str]]:
    data = srv.get_json("/api/models" + ("?refresh=1" if refresh else ""))
    return {group["provider"]: group["models"] for group in data["groups"]}


def _pick(srv: ServerProc, sid: str, model: str, provider: str) -> tuple[int, dict]:
    return srv.json(
        "POST", "/api/session/model", {"session_id": sid, "model": model, "model_provider": provider}
    )


# ---------------------------------------------------------------------- the picker's list


def test_the_list_holds_the_default_and_every_custom_endpoint_live_and_refreshes_on_demand(srv, fakes):
    llm, second = fakes
    data = srv.get_json("/api/models")
    assert (data["default_model"], data["default_provider"], data["configured"]) == (
        "fake-model",
        "custom",
        True,
    )
    groups = _groups(srv)
    assert groups["custom"] == ["fake-model", "fake-b"] and groups["custom:second"] == ["other-model"]
    assert "deepseek-chat" in groups["deepseek"]  # a known provider with a key in the agent's .env
    assert set(groups) == {"custom", "custom:second", "deepseek"}
    assert any(r["path"] == "/v1/models" for r in second.requests())  # asked live, not read from config

    llm.extra_models = ("fake-b", "fake-new")
    assert _groups(srv)["custom"] == ["fake-model", "fake-b"]  # cached
    assert _groups(srv, refresh=True)["custom"] == ["fake-model", "fake-b", "fake-new"]


def test_refresh_offers_what_a_keyless_endpoint_lists_now_and_setup_freezes_no_list(llm, tmp_path):
    """Issue 19.13: the setup form's endpoint (no key) got ``custom_providers[0].models: [<model>]`` in
    config.yaml from the inventory's first probe, and the agent trusts that copy for an endpoint without
    a key: refresh kept offering it while ``/v1/models`` listed three."""
    llm.reset()
    llm.extra_models = ("fake-b",)
    server = _server(tmp_path, {"TALARIA_AGENT_TOOLSETS": "none"})
    try:
        with server:
            server.post_json(
                "/api/onboarding/setup", {"kind": "custom", "base_url": llm.base_url, "model": "fake-b"}
            )
            current = next(g for g in server.get_json("/api/models")["groups"] if g["current"])
            assert current["models"] == ["fake-model", "fake-b"]
            config_file = server.hermes_home / "config.yaml"
            saved = yaml.safe_load(config_file.read_text(encoding="utf-8"))["custom_providers"]
            assert [entry.get("models") for entry in saved] == [None]  # nothing frozen

            llm.extra_models = ("fake-b", "fake-c")
            refreshed = next(g for g in server.get_json("/api/models?refresh=1")["groups"] if g["current"])
            assert refreshed["models"] == ["fake-model", "fake-b", "fake-c"]

            # A list an earlier build left in config.yaml does not hide what the endpoint lists now.
            edited = yaml.safe_load(config_file.read_text(encoding="utf-8"))
            edited["custom_providers"][0]["models"] = ["fake-b"]
            config_file.write_text(yaml.safe_dump(edited), encoding="utf-8")
            listed = next(g for g in server.get_json("/api/models?refresh=1")["groups"] if g["current"])
            assert listed["models"] == ["fake-model", "fake-b", "fake-c"]
            sid = new_session(server)
            assert _pick(server, sid, "fake-c", listed["provider"])[0] == 200

            # discover_models: false keeps the configured list, as the agent's own picker does.
            edited["custom_providers"][0]["discover_models"] = False
            config_file.write_text(yaml.safe_dump(edited), encoding="utf-8")
            kept = next(g for g in server.get_json("/api/models?refresh=1")["groups"] if g["current"])
            assert kept["models"] == ["fake-b"]
    finally:
        llm.extra_models = ("fake-b",)


# ---------------------------------------------------------------------- model switch


def test_a_switch_takes_effect_on_the_next_turn_and_each_answer_records_its_model(srv, fakes, provider):
    llm, second = fakes
    sid = new_session(srv)
    llm.script(Reply(text="first answer"), Reply(text="second answer"))
    second.script(Reply(text="third answer"))

    assert text_of(chat(srv, sid, "one")) == "first answer"
    assert llm.chat_requests()[-1]["body"]["model"] == "fake-model"

    status, data = _pick(srv, sid, "fake-b", "custom")
    assert status == 200 and (data["session"]["model"], data["session"]["model_provider"]) == (
        "fake-b",
        "custom",
    )
    assert text_of(chat(srv, sid, "two")) == "second answer"
    assert llm.chat_requests()[-1]["body"]["model"] == "fake-b"

    assert _pick(srv, sid, "other-model", "custom:second")[0] == 200
    assert text_of(chat(srv, sid, "three")) == "third answer"
    assert second.chat_requests()[-1]["body"]["model"] == "other-model"
    assert second.chat_requests()[-1]["headers"]["Authorization"] == "Bearer sk-second-1234"
    assert len(llm.chat_requests()) == 2  # the third turn did not go to the first endpoint

    answers = [
        (m["content"], m.get("model")) for m in on_disk(srv, sid)["messages"] if m["role"] == "assistant"
    ]
    assert answers == [
        ("first answer", "fake-model"),
        ("second answer", "fake-b"),
        ("third answer", "other-model"),
    ]

    # A known provider with credentials: the agent resolves its key and base URL itself.
    assert _pick(srv, sid, "deepseek-chat", "deepseek")[0] == 200
    chat(srv, sid, "to the provider")
    to_provider = provider.chat_requests()[-1]
    assert to_provider["body"]["model"] == "deepseek-chat"
    assert to_provider["headers"]["Authorization"] == "Bearer sk-deep-1234"

    # Back to the configured default.
    assert _pick(srv, sid, "", "")[0] == 200
    llm.script(Reply(text="fourth answer"))
    chat(srv, sid, "four")
    assert llm.chat_requests()[-1]["body"]["model"] == "fake-model"


def test_a_bad_model_switch_is_refused_and_changes_nothing(srv, fakes):
    sid = new_session(srv)
    assert _pick(srv, sid, "fake-b", "custom")[0] == 200
    before = on_disk(srv, sid)
    for body, expected in [
        ({"session_id": sid, "model": "no-such-model", "model_provider": "custom"}, 400),
        ({"session_id": sid, "model": "other-model", "model_provider": "custom"}, 400),  # wrong endpoint
        ({"session_id": sid, "model": "fake-b", "model_provider": "nope"}, 400),
        ({"session_id": sid, "model": 42, "model_provider": "custom"}, 400),
        ({"session_id": sid, "model": ["fake-b"]}, 400),
        ({"session_id": sid, "model": "fake\nb", "model_provider": "custom"}, 400),
        ({"session_id": sid, "model": "x" * 300, "model_provider": "custom"}, 400),
        ({"session_id": "../../etc", "model": "fake-b", "model_provider": "custom"}, 400),
        ({"session_id": "nosuchsession", "model": "fake-b", "model_provider": "custom"}, 404),
        ({"model": "fake-b"}, 400),
    ]:
        status, data = srv.json("POST", "/api/session/model", body)
        assert status == expected and isinstance(data.get("error"), str), (body, status, data)
    assert on_disk(srv, sid) == before


# ---------------------------------------------------------------------- toolsets


def _tool_names(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request["body"].get("tools") or []}


def test_a_toolset_toggle_is_in_the_next_requests_tools(srv, fakes):
    llm, _ = fakes
    sid = new_session(srv)
    listing = srv.get_json(f"/api/toolsets?session_id={sid}")
    rows = {row["name"]: row for row in listing["toolsets"]}
    assert listing["enabled_toolsets"] is None and listing["default_toolsets"] == ["todo"]
    assert rows["todo"]["enabled"] and not rows["terminal"]["enabled"]
    assert rows["todo"]["label"] and rows["todo"]["description"]

    chat(srv, sid, "with the default")
    assert _tool_names(llm.chat_requests()[-1]) == {"todo"}

    data = srv.post_json("/api/session/toolsets", {"session_id": sid, "enabled_toolsets": []})
    assert data["session"]["enabled_toolsets"] == []
    chat(srv, sid, "without tools")
    assert _tool_names(llm.chat_requests()[-1]) == set()

    srv.post_json("/api/session/toolsets", {"session_id": sid, "enabled_toolsets": ["todo"]})
    chat(srv, sid, "with todo")
    assert _tool_names(llm.chat_requests()[-1]) == {"todo"}
    assert {
        r["name"] for r in srv.get_json(f"/api/toolsets?session_id={sid}")["toolsets"] if r["enabled"]
    } == {"todo"}

    before = on_disk(srv, sid)
    for body, expected in [
        ({"session_id": sid, "enabled_toolsets": ["todo", "session_search"]}, 400),  # beyond the setting
        ({"session_id": sid, "enabled_toolsets": ["no-such-toolset"]}, 400),
        ({"session_id": sid, "enabled_toolsets": "todo"}, 400),
        ({"session_id": sid, "enabled_toolsets": [1]}, 400),
        ({"session_id": sid, "enabled_toolsets": {"todo": True}}, 400),
        ({"session_id": "nosuchsession", "enabled_toolsets": []}, 404),
        ({"session_id": "a/b", "enabled_toolsets": []}, 400),
    ]:
        status, data = srv.json("POST", "/api/session/toolsets", body)
        assert status == expected and isinstance(data.get("error"), str), (body, status, data)
    assert on_disk(srv, sid) == before
    assert srv.json("GET", "/api/toolsets?session_id=nosuchsession")[0] == 404

    srv.post_json("/api/session/toolsets", {"session_id": sid, "enabled_toolsets": None})
    chat(srv, sid, "default again")
    assert _tool_names(llm.chat_requests()[-1]) == {"todo"}


def test_a_toolset_that_cannot_work_here_is_listed_unavailable_with_its_reason(srv, fakes):
    """Issue 19.20: the Tools menu offered web search though no search key is set (the agent drops it)."""
    rows = {row["name"]: row for row in srv.get_json("/api/toolsets")["toolsets"]}
    assert rows["web"]["available"] is False
    assert "EXA_API_KEY" in rows["web"]["unavailable_reason"] and ".env" in rows["web"]["unavailable_reason"]
    assert rows["todo"]["available"] is True and rows["todo"]["unavailable_reason"] is None


def test_the_toolsets_setting_is_a_ceiling_and_the_terminal_cannot_run_under_none(llm, tmp_path):
    """``TALARIA_AGENT_TOOLSETS=none`` ("no tools", says ``--help``), yet a session could switch the terminal
    on and it ran."""
    llm.reset()
    marker = tmp_path / "the_terminal_ran"
    server = agent_server(tmp_path, llm.base_url, toolsets="terminal,todo")
    with server:
        sid = new_session(server)
        chosen = server.post_json(
            "/api/session/toolsets", {"session_id": sid, "enabled_toolsets": ["terminal"]}
        )
        assert chosen["session"]["enabled_toolsets"] == ["terminal"]
    server.extra_env["TALARIA_AGENT_TOOLSETS"] = "none"
    with server:
        # The session that chose the terminal before the setting changed: the model gets no tool, and a
        # terminal call it makes anyway does not run.
        call = {"id": "t1", "name": "terminal", "arguments": {"command": f"touch {marker}"}}
        llm.script(Reply(tool_calls=[call]), Reply(text="Tried."))
        chat(server, sid, "touch the marker")
        assert not marker.exists()
        assert _tool_names(llm.chat_requests()[0]) == set()
        listing = server.get_json(f"/api/toolsets?session_id={sid}")
        terminal = next(row for row in listing["toolsets"] if row["name"] == "terminal")
        assert listing["allowed_toolsets"] == [] and not terminal["enabled"] and not terminal["available"]
        assert "TALARIA_AGENT_TOOLSETS=none" in terminal["unavailable_reason"]
        other = new_session(server)
        status, data = server.json(
            "POST", "/api/session/toolsets", {"session_id": other, "enabled_toolsets": ["terminal"]}
        )
        assert status == 400 and "TALARIA_AGENT_TOOLSETS=none" in data["error"]
        assert on_disk(server, other).get("enabled_toolsets") is None


# ---------------------------------------------------------------------- first-run setup


def test_setup_from_an_empty_home_reaches_a_streamed_answer_without_a_restart(llm, tmp_path):
    llm.reset()
    server = _server(tmp_path, {"TALARIA_AGENT_TOOLSETS": "none"})
    with server:
        status = server.get_json("/api/onboarding/status")
        assert status["configured"] is False and status["default_model"] == ""
        assert any(p["id"] == "openai-api" and p["key_env"] == "OPENAI_API_KEY" for p in status["providers"])
        sid = new_session(server)
        failed = chat(server, sid, "hello?")
        # No model yet: the turn says so, offers the setup form, and its example keeps its lines (19.20).
        assert [error.get("setup") for error in named(failed, "error")] == [True]
        row = session(server, sid)["messages"][-1]
        assert row["_error"] is True and row["_needs_setup"] is True
        assert "<pre" in row["html"] and "provider: custom\n" in html_text(row["html"])

        probe = server.post_json(
            "/api/onboarding/probe", {"kind": "custom", "base_url": llm.base_url, "api_key": SECRET}
        )
        assert probe["ok"] is True and probe["models"] == ["fake-model", "fake-b"]
        assert llm.requests(path="/v1/models")[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"

        for body in [
            {"kind": "custom", "base_url": "file:///etc/passwd"},
            {"kind": "custom", "base_url": "http://user:pw@127.0.0.1/v1"},
            {"kind": "custom", "base_url": ["http://127.0.0.1/v1"]},
            {"kind": "custom", "base_url": llm.base_url, "api_key": 1234},
            {"kind": "provider", "provider": "no-such-provider"},
            {"kind": 7},
        ]:
            code, data = server.json("POST", "/api/onboarding/probe", body)
            assert code == 400 and isinstance(data.get("error"), str), (body, code, data)
        dead = server.post_json(
            "/api/onboarding/probe", {"kind": "custom", "base_url": "http://127.0.0.1:9/v1"}
        )
        assert dead["ok"] is False and dead["models"] == []

        config_file = server.hermes_home / "config.yaml"
        for body in [
            {"kind": "custom", "base_url": "file:///etc/passwd", "model": "fake-b"},
            {"kind": "custom", "base_url": "http://user:pw@127.0.0.1/v1", "model": "fake-b"},
            {"kind": "custom", "base_url": llm.base_url, "model": ""},
            {"kind": "custom", "base_url": llm.base_url, "model": "fake-b", "api_key": "two words"},
            {"kind": "provider", "provider": "no-such-provider", "model": "m", "api_key": "sk-1234"},
            {"kind": "provider", "provider": "openai-api", "model": "gpt-x"},  # no key anywhere
            {"kind": "other", "model": "fake-b"},
        ]:
            code, data = server.json("POST", "/api/onboarding/setup", body)
            assert code == 400 and isinstance(data.get("error"), str), (body, code, data)
        assert not config_file.exists()

        code, saved = server.json(
            "POST",
            "/api/onboarding/setup",
            {"kind": "custom", "base_url": llm.base_url, "api_key": SECRET, "model": "fake-b"},
        )
        assert code == 200 and saved["configured"] is True and saved["default_model"] == "fake-b"
        assert SECRET not in json.dumps(saved)
        written = yaml.safe_load(config_file.read_text(encoding="utf-8"))["model"]
        assert (written["provider"], written["base_url"], written["default"]) == (
            "custom",
            llm.base_url,
            "fake-b",
        )

        llm.script(Reply(text="Set up and answering."))
        events = chat(server, sid, "hello again")
        assert text_of(events) == "Set up and answering." and not named(events, "error")
        request = llm.chat_requests()[-1]
        assert (
            request["body"]["model"] == "fake-b" and request["headers"]["Authorization"] == f"Bearer {SECRET}"
        )
        answer = session(server, sid)["messages"][-1]
        assert (answer["content"], answer["model"]) == ("Set up and answering.", "fake-b")
        for path in ("/api/models", "/api/onboarding/status"):
            assert SECRET not in server.request("GET", path)[2].decode()

        # An edit of the agent's config outside Talaria (`hermes model`, an editor) counts from the next turn.
        edited = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        edited["model"]["default"] = "fake-model"
        config_file.write_text(yaml.safe_dump(edited), encoding="utf-8")
        chat(server, sid, "after the edit")
        assert llm.chat_requests()[-1]["body"]["model"] == "fake-model"


def test_setup_with_a_known_provider_keeps_its_key_in_the_agents_env(provider, tmp_path):
    provider.reset()
    # The agent reaches the provider through its base-URL variable; here that is the fake.
    server = _server(tmp_path, {"TALARIA_AGENT_TOOLSETS": "none", "DEEPSEEK_BASE_URL": provider.base_url})
    key = "sk-deep-setup-9876"
    with server:
        tested = server.post_json(
            "/api/onboarding/probe", {"kind": "provider", "provider": "deepseek", "api_key": key}
        )
        assert tested["ok"] is True and tested["models"] == ["deepseek-chat"]
        saved = server.post_json(
            "/api/onboarding/setup",
            {"kind": "provider", "provider": "deepseek", "api_key": key, "model": "deepseek-chat"},
        )
        assert saved["configured"] is True and key not in json.dumps(saved)
        assert next(p for p in saved["providers"] if p["id"] == "deepseek")["has_key"] is True
        assert f"DEEPSEEK_API_KEY={key}" in (server.hermes_home / ".env").read_text(encoding="utf-8")
        assert key not in (server.hermes_home / "config.yaml").read_text(encoding="utf-8")

        provider.script(Reply(text="DeepSeek here."))
        sid = new_session(server)
        assert text_of(chat(server, sid, "who is this?")) == "DeepSeek here."
        request = provider.chat_requests()[-1]
        assert (
            request["body"]["model"] == "deepseek-chat"
            and request["headers"]["Authorization"] == f"Bearer {key}"
        )
