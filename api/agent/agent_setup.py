"""First-run setup: give the agent a model without leaving the page.

The form writes the agent's own configuration through its own functions (``hermes_cli.config``
``load_config``/``save_config``, ``hermes_cli.credential_lifecycle.save_provider_env_credential`` for a
provider key in ``.env``), the way ``hermes model`` does, and then drops what Talaria cached about the
old configuration, so the next turn uses the new model without a restart. Keys are never sent back.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from api.agent import agent_pool, agent_runtime, endpoint_probe, model_catalog, worker_pool
from api.agent.agent_answers import AgentAnswers
from api.rules.errors import ApiError, BadRequest

log = logging.getLogger("talaria.setup")

_KINDS = ("custom", "provider")


def _hermes(name: str) -> ModuleType:
    return agent_runtime.agent_module(name)


def known_providers() -> list[dict[str, Any]]:
    """The agent's canonical providers that take an API key: ``[{id, label, key_env, has_key}]``."""
    registry = _hermes("hermes_cli.auth").PROVIDER_REGISTRY
    get_env_value = _hermes("hermes_cli.config").get_env_value
    rows = []
    for entry in _hermes("hermes_cli.models").CANONICAL_PROVIDERS:
        provider = registry.get(entry.slug)
        if provider is None or provider.auth_type != "api_key" or not provider.api_key_env_vars:
            continue
        if not str(provider.inference_base_url or "").startswith(("http://", "https://")):
            continue
        key_env = provider.api_key_env_vars[0]
        rows.append(
            {
                "id": entry.slug,
                "label": entry.label,
                "key_env": key_env,
                "has_key": any(bool(get_env_value(name)) for name in provider.api_key_env_vars),
            }
        )
    return rows


def is_configured() -> bool:
    """A default model whose provider resolves (base URL and credentials found)."""
    model = agent_runtime.configured_default_model()
    if not model:
        return False
    try:
        agent_runtime.resolve_runtime(model)
    except ApiError:
        return False
    return True


def _marked_vision_capable() -> bool:
    """The agent's own ``model.supports_vision`` switch for the configured model."""
    section = _model_section(_hermes("hermes_cli.config").load_config())
    return section.get("supports_vision") is True


def setup_status() -> dict[str, Any]:
    return {
        "configured": is_configured(),
        "default_model": agent_runtime.configured_default_model(),
        "supports_vision": _marked_vision_capable(),
        "providers": known_providers(),
    }


def _provider(slug: Any) -> dict[str, Any]:
    if not isinstance(slug, str):
        raise BadRequest("provider must be a string")
    for row in known_providers():
        if row["id"] == slug:
            return row
    raise BadRequest(f"Unknown provider {slug!r}")


def _provider_base_url(slug: str) -> str:
    """Where the agent reaches the provider: its base-URL variable when set, else the registry's URL."""
    provider = _hermes("hermes_cli.auth").PROVIDER_REGISTRY[slug]
    override = provider.base_url_env_var and _hermes("hermes_cli.config").get_env_value(
        provider.base_url_env_var
    )
    return str(override or provider.inference_base_url).rstrip("/")


def _provider_key(row: dict[str, Any], key: str) -> str:
    return key or str(_hermes("hermes_cli.config").get_env_value(row["key_env"]) or "")


def test_connection(body: dict[str, Any]) -> dict[str, Any]:
    """The connection test: ``{ok, message, models}`` (a failed test is an answer, not an error)."""
    kind = body.get("kind", "custom")
    key = endpoint_probe.clean_api_key(body.get("api_key"))
    if kind == "custom":
        base_url = endpoint_probe.clean_base_url(body.get("base_url"))
    elif kind == "provider":
        row = _provider(body.get("provider"))
        base_url, key = _provider_base_url(row["id"]), _provider_key(row, key)
        api_mode = _hermes("hermes_cli.providers").determine_api_mode(row["id"], base_url)
        if api_mode == "anthropic_messages":  # its model list wants another header than the test sends
            message = f"{row['label']} cannot be tested here; the first message checks the key."
            return {"ok": None, "message": message, "models": []}
    else:
        raise BadRequest(f"kind must be one of {', '.join(_KINDS)}")
    return endpoint_probe.probe(base_url, key).to_dict()


def _model_section(config: dict[str, Any]) -> dict[str, Any]:
    section = config.get("model")
    if isinstance(section, dict):
        return section
    return {"default": section} if isinstance(section, str) and section else {}


def _clean_vision(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest("supports_vision must be true or false")
    return value


def _write_custom(base_url: str, key: str, model: str, vision: bool) -> None:
    config_module = _hermes("hermes_cli.config")
    config = config_module.load_config()
    section = _model_section(config)
    section.update(provider="custom", base_url=base_url, default=model)
    if key:
        section["api_key"] = key
    else:
        section.pop("api_key", None)
    section.pop("api_mode", None)
    section.pop("context_length", None)  # it belonged to the previous model
    # The agent's own switch: its image routing sends this model attached images as image parts.
    if vision:
        section["supports_vision"] = True
    else:
        section.pop("supports_vision", None)
    config["model"] = section
    config_module.save_config(config)
    # As `hermes model` does: the endpoint joins the saved custom providers (deduplicated by URL).
    _hermes("hermes_cli.main")._save_custom_provider(base_url, key, model)


def _write_provider(row: dict[str, Any], key: str, model: str) -> None:
    config_module = _hermes("hermes_cli.config")
    if key:
        _hermes("hermes_cli.credential_lifecycle").save_provider_env_credential(row["key_env"], key)
    config = config_module.load_config()
    section = config_module.clear_model_endpoint_credentials(_model_section(config), clear_base_url=True)
    section.update(provider=row["id"], default=model)
    section.pop("context_length", None)
    section.pop("supports_vision", None)  # a known provider's models are described by the agent's catalogue
    config["model"] = section
    config_module.save_config(config)


def save_setup(
    body: dict[str, Any],
    *,
    answers: AgentAnswers | None = None,
    agents: agent_pool.IdleAgents | None = None,
    workers: worker_pool.WorkerPool | None = None,
) -> dict[str, Any]:
    """Validate everything, write the agent's config (and key), then forget the stale caches: the model list in
    ``answers`` and the idle agents of ``agents`` and ``workers`` (the app's; those in use when None)."""
    kind = body.get("kind")
    key = endpoint_probe.clean_api_key(body.get("api_key"))
    model = model_catalog.clean_text(body.get("model"), "model", model_catalog.MODEL_MAX)
    if not model:
        raise BadRequest("Name the model to use.")
    vision = _clean_vision(body.get("supports_vision"))
    if kind == "custom":
        _write_custom(endpoint_probe.clean_base_url(body.get("base_url")), key, model, vision)
    elif kind == "provider":
        row = _provider(body.get("provider"))
        if not key and not row["has_key"]:
            raise BadRequest(f"Enter the API key ({row['key_env']} is not set).")
        _write_provider(row, key, model)
    else:
        raise BadRequest(f"kind must be one of {', '.join(_KINDS)}")
    _hermes("hermes_cli.auth").deactivate_provider()  # an OAuth provider must not win auto-resolution
    model_catalog.invalidate(answers)
    agent_pool.AGENTS.get(agents).forget()
    worker_pool.POOL.get(
        workers
    ).forget_idle_agents()  # the workers' agents too; warmed workers build a fresh one
    log.info("agent model set up: %s (%s)", model, kind)
    return setup_status()
