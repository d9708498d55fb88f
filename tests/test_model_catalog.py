"""The model picker's choices from the agent's inventory rows, and what counts as a choice."""

from __future__ import annotations

import time

import pytest

from api.agent import model_catalog
from api.rules.errors import BadRequest
from talaria_testing.fake_llm import agent_server
from talaria_testing.trickle import posting_at_once, trickling_endpoint

PAYLOAD = {
    "model": "fake-model",
    "provider": "custom",
    "providers": [
        {"slug": "moa", "name": "Mixture of Agents", "models": ["default"], "source": "virtual"},
        {"slug": "openrouter", "name": "OpenRouter", "models": ["a/b", "a/b", " "], "source": "built-in"},
        {
            "slug": "custom",
            "name": "Custom endpoint",
            "models": ["fake-model"],
            "is_current": True,
            "is_user_defined": True,
        },
        {"slug": "empty", "name": "Nothing", "models": []},
        "not a row",
    ],
}


def test_groups_keep_real_rows_with_models_current_first():
    groups = model_catalog.groups_from_payload(PAYLOAD)
    assert [(g["provider"], g["kind"], g["models"]) for g in groups] == [
        ("custom", "custom", ["fake-model"]),
        ("openrouter", "provider", ["a/b"]),
    ]


def test_a_choice_is_a_listed_model_of_that_provider():
    choices = {"groups": model_catalog.groups_from_payload(PAYLOAD)}
    assert model_catalog.is_choice(choices, "a/b", "openrouter")
    assert not model_catalog.is_choice(choices, "a/b", "custom")
    assert not model_catalog.is_choice(choices, "default", "moa")


@pytest.mark.parametrize("value", [None, 3, "a\nb", "x" * 201, "\x7f"])
def test_clean_text_refuses_non_strings_control_characters_and_long_values(value):
    with pytest.raises(BadRequest):
        model_catalog.clean_text(value, "model", 200)


def test_the_catalog_is_reused_until_it_is_stale_or_refreshed(monkeypatch):
    built = []
    monkeypatch.setattr(model_catalog, "_build", lambda refresh: built.append(refresh) or {"n": len(built)})
    model_catalog.invalidate()
    now = [1000.0]
    assert model_catalog.catalog(clock=lambda: now[0]) == {"n": 1}
    assert model_catalog.catalog(clock=lambda: now[0]) == {"n": 1}
    assert model_catalog.catalog(refresh=True, clock=lambda: now[0]) == {"n": 2}
    now[0] += 10_000
    assert model_catalog.catalog(clock=lambda: now[0]) == {"n": 3}
    assert built == [False, True, False]
    model_catalog.invalidate()


def test_an_edit_of_the_agents_config_rebuilds_the_catalog(monkeypatch, tmp_path):
    from api.store import config

    monkeypatch.setattr(config, "HERMES_HOME", tmp_path)
    built = []
    monkeypatch.setattr(model_catalog, "_build", lambda refresh: built.append(refresh) or {"n": len(built)})
    model_catalog.invalidate()
    assert model_catalog.catalog() == {"n": 1} and model_catalog.catalog() == {"n": 1}
    (tmp_path / "config.yaml").write_text("model: {default: x}\n", encoding="utf-8")
    assert model_catalog.catalog() == {"n": 2}
    model_catalog.invalidate()


def test_only_an_endpoint_that_turns_discovery_off_keeps_its_configured_list():
    entries = [
        {"base_url": "http://a.test/v1/", "discover_models": False},
        {"base_url": "http://b.test/v1", "discover_models": "no"},
        {"base_url": "http://c.test/v1", "models": ["x"]},
        {"url": "http://d.test/v1", "discover_models": True},
        "not an entry",
    ]
    assert model_catalog._discovery_off(entries) == {"http://a.test/v1", "http://b.test/v1"}


def test_model_switches_while_the_configured_endpoint_trickles_answer_within_the_wait(tmp_path):
    """Building the choices asked the configured endpoint under the catalog's one lock: while the endpoint
    hung, every model switch queued behind it (eight switches took minutes, /health timed out). A real
    socket server trickles the endpoint's answer; eight switches at once each answer (an error saying the
    list is still being built, when it is) within the wait plus slack, /health answers meanwhile, and a
    switch back to the default, which needs no list, answers at once."""
    with trickling_endpoint(interval=1.0) as url, agent_server(tmp_path, url) as srv:
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        started = time.monotonic()
        body = {"session_id": sid, "model": "fake-model", "model_provider": "custom"}
        with posting_at_once(srv, "/api/session/model", body) as answers:
            time.sleep(1)
            assert srv.request("GET", "/health", timeout=5)[0] == 200
            back = srv.json(
                "POST", "/api/session/model", {"session_id": sid, "model": "", "model_provider": ""}
            )
            assert back[0] == 200
        elapsed = time.monotonic() - started
    assert len(answers) == 8 and all(status in (200, 400, 503) for status, _ in answers), answers
    assert all("error" in data for status, data in answers if status != 200)
    assert elapsed < model_catalog.BUILD_WAIT_S + 12


def test_the_page_gets_an_empty_list_marked_building_while_a_slow_endpoint_holds_the_first_build(tmp_path):
    """The first model list waited at most the build's wait and then answered 503, which the page showed as
    an error (and a browser logs as a failed load) whenever a start was slow; it now says the list is
    still being built, and the page asks again."""
    with trickling_endpoint(interval=1.0) as url, agent_server(tmp_path, url) as srv:
        status, data = srv.json("GET", "/api/models?refresh=1")
    assert status == 200
    assert data["building"] is True and data["groups"] == []
