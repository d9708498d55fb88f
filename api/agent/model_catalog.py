"""Models per session: the picker's choices and a session's pick.

The choices come from the agent's own inventory (``hermes_cli.inventory``): the configured default, the
configured custom endpoints, and the known providers that have credentials. Each custom endpoint offers
what its ``/v1/models`` lists at build time, asked here with the key the agent's own runtime resolution
finds for it; its ``models:`` in ``config.yaml`` is only the fallback when it cannot be reached, and
``discover_models: false`` keeps that list. (The inventory's own probe writes what it found into
``config.yaml`` and, for an endpoint without a key, trusts that copy from then on: the list froze at the
first answer, so building the choices asks the endpoints itself and writes nothing.) Building can reach
those endpoints, so the result is kept for ``models_cache_seconds`` and rebuilt on demand (``refresh``)
or when the agent's ``config.yaml``/``.env`` change. The build holds no lock, and a request waits for it
only so long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, cast

from api.agent import agent_runtime, endpoint_probe
from api.agent.agent_answers import ANSWERS, AgentAnswers
from api.rules.errors import ApiError, BadRequest, ServiceUnavailable
from api.store import config as _config
from api.store import session_edit, session_lookup
from api.store.models import Store

log = logging.getLogger("talaria.models")

MODEL_MAX = 200
PROVIDER_MAX = 100
LIVE_PROBE_TIMEOUT_S = 4.0
_LIVE_PROBE_WORKERS = 4

BUILD_WAIT_S = 8.0  # as long as the setup form's connection test


def _clean(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def groups_from_payload(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent inventory's provider rows → picker groups (pure).

    Virtual rows (a mixture of other models) and rows without a model are left out; the current
    provider comes first, then the agent's order.
    """
    groups = []
    for row in payload.get("providers") or []:
        if not isinstance(row, dict) or row.get("source") == "virtual":
            continue
        slug = _clean(row.get("slug"))
        models = [m for m in (row.get("models") or []) if isinstance(m, str) and m.strip()]
        if not slug or not models:
            continue
        kind = "custom" if row.get("is_user_defined") else "provider"
        groups.append(
            {
                "provider": slug,
                "label": _clean(row.get("name")) or slug,
                "kind": kind,
                "current": bool(row.get("is_current")),
                "models": list(dict.fromkeys(models)),
            }
        )
    groups.sort(key=lambda group: not group["current"])
    return groups


def _url_key(url: Any) -> str:
    return str(url or "").strip().rstrip("/").lower()


def _discovery_off(entries: list[Any]) -> set[str]:
    """The endpoints whose configured ``discover_models: false`` keeps their listed models (pure)."""
    urls = set()
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        discover = entry.get("discover_models", True)
        if discover is False or (isinstance(discover, str) and discover.lower() in ("false", "no", "0")):
            urls.add(_url_key(entry.get("base_url") or entry.get("url") or entry.get("api")))
    return urls


def _listed_now(slug: str) -> list[str]:
    """What the custom endpoint ``slug`` lists now, asked with the key the agent resolves for it ([] if none)."""
    try:
        runtime = agent_runtime.resolve_runtime(None, slug)
    except ApiError:
        return []
    base_url = str(runtime.get("base_url") or "").rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        return []
    key = str(runtime.get("api_key") or "")
    return endpoint_probe.probe(base_url, key, timeout=LIVE_PROBE_TIMEOUT_S).models


def _with_live_models(payload: dict[str, Any], keep_listed: set[str]) -> None:
    """Replace each custom endpoint's configured models by what it lists now, where it answers."""
    rows = [
        row
        for row in payload.get("providers") or []
        if isinstance(row, dict)
        and row.get("is_user_defined")
        and row.get("source") != "virtual"
        and _clean(row.get("slug"))
        and _url_key(row.get("api_url")) not in keep_listed
    ]
    if not rows:
        return
    with ThreadPoolExecutor(max_workers=min(_LIVE_PROBE_WORKERS, len(rows))) as pool:
        listed = list(pool.map(lambda row: _listed_now(_clean(row["slug"])), rows))
    for row, models in zip(rows, listed, strict=True):
        if models:
            row["models"] = models


def _build(refresh: bool) -> dict[str, Any]:
    inventory = agent_runtime.agent_module("hermes_cli.inventory")
    context = inventory.load_picker_context()
    payload = inventory.build_models_payload(
        context, refresh=refresh, probe_custom_providers=False, probe_current_custom_provider=False
    )
    entries = list(context.custom_providers or []) + list((context.user_providers or {}).values())
    _with_live_models(payload, _discovery_off(entries))
    default_model = _clean(payload.get("model"))
    default_provider = _clean(payload.get("provider"))
    return {
        "default_model": default_model,
        "default_provider": default_provider,
        "configured": bool(default_model),
        "groups": groups_from_payload(payload),
        "fetched_at": time.time(),
    }


def _build_into(
    held: AgentAnswers, pending: Future[Any], refresh: bool, stamp: str, clock: Callable[[], float]
) -> None:
    """Build the choices outside every lock (it asks endpoints) and hand them to all who wait."""
    try:
        built = _build(refresh)
    except BaseException as exc:  # noqa: BLE001 - each waiter gets the failure
        with held.lock:
            held.catalog["building"] = None
        pending.set_exception(exc)
        return
    with held.lock:
        held.catalog.update(catalog=built, built_at=clock(), stamp=stamp, building=None)
    pending.set_result(built)


def catalog(
    refresh: bool = False, clock: Callable[[], float] = time.monotonic, answers: AgentAnswers | None = None
) -> dict[str, Any]:
    """The picker's choices, kept in ``answers`` (the app's in use when None) unless older than
    ``models_cache_seconds`` or ``refresh``.

    One build runs at a time, in its own thread and under no lock; every caller that needs it waits for
    that one, at most ``BUILD_WAIT_S`` (an endpoint that hangs must not hold requests): past that the
    last choices are answered, or a 503 when there are none yet.
    """
    held = ANSWERS.get(answers)
    stamp = agent_runtime.config_stamp()  # an edit of the agent's config (here or elsewhere) rebuilds
    with held.lock:
        kept = held.catalog
        cached = kept["catalog"]
        fresh = clock() - kept["built_at"] < float(_config.setting("models_cache_seconds"))
        if cached is not None and fresh and kept["stamp"] == stamp and not refresh:
            return cast("dict[str, Any]", cached)
        pending = kept.get("building")
        if pending is None:
            pending = kept["building"] = Future()
            builder = threading.Thread(
                target=_build_into,
                args=(held, pending, refresh, stamp, clock),
                name="model-catalog",
                daemon=True,
            )
            builder.start()
    try:
        return cast("dict[str, Any]", pending.result(timeout=BUILD_WAIT_S))
    except FutureTimeout:
        if cached is not None:
            return cast("dict[str, Any]", cached)
        raise ServiceUnavailable(
            "The model list is still being built: a configured endpoint is slow to answer. Try again shortly."
        ) from None


def catalog_for_page(refresh: bool = False, answers: AgentAnswers | None = None) -> dict[str, Any]:
    """The picker's choices, or, while the first list is still being built, an empty list that says so
    (``building``): the page shows the picker once a later ask has the list, rather than an error."""
    try:
        return catalog(refresh=refresh, answers=answers)
    except ServiceUnavailable:
        return {
            "default_model": None,
            "default_provider": None,
            "configured": None,
            "groups": [],
            "fetched_at": None,
            "building": True,
        }


def warm_up(answers: AgentAnswers | None = None) -> None:
    """Import the agent's config modules and, when the agent has a config, build the choices (startup)."""
    agent_runtime.preload_config_modules()
    if not (_config.HERMES_HOME / "config.yaml").is_file():
        return  # reading a missing config would set up the agent's home; the first page does that
    try:
        catalog(answers=answers)
    except Exception:  # noqa: BLE001 - the page asks again and shows the error then
        log.warning("building the model list at startup failed", exc_info=True)


def invalidate(answers: AgentAnswers | None = None) -> None:
    """Forget the cached choices (the agent's configuration changed)."""
    held = ANSWERS.get(answers)
    with held.lock:
        held.catalog["catalog"] = None


def is_choice(choices: dict[str, Any], model: str, provider: str) -> bool:
    """Whether ``(model, provider)`` is one of the picker's choices (pure)."""
    return any(
        group["provider"] == provider and model in group["models"] for group in choices.get("groups") or []
    )


def clean_text(value: Any, name: str, max_len: int) -> str:
    """A stripped string of at most ``max_len`` printable characters, or 400."""
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    value = value.strip()
    if len(value) > max_len or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise BadRequest(f"{name} must be at most {max_len} printable characters")
    return cast("str", value)


def switch_session_model(
    sid: str,
    model: Any,
    provider: Any,
    answers: AgentAnswers | None = None,
    *,
    store: Store | None = None,
) -> dict[str, Any]:
    """Set the session's model for its next turn; ``model=""`` goes back to the configured default; the
    choices it must be one of are those kept in ``answers`` (the app's; those in use when None)."""
    model = clean_text(model, "model", MODEL_MAX)
    provider = clean_text("" if provider is None else provider, "model_provider", PROVIDER_MAX)
    session_lookup.load_session(sid, store=store)  # an unknown session is a 404 before any endpoint is asked
    if model and not is_choice(catalog(answers=answers), model, provider):
        choices = catalog(
            refresh=True, answers=answers
        )  # the endpoint may list a model the cache does not have yet
        if not is_choice(choices, model, provider):
            raise BadRequest(f"Unknown model {model!r} for provider {provider!r}")

    with session_edit.edit(sid, touch_updated_at=False, store=store) as session:
        session.model = model
        session.model_provider = provider.lower() if model and provider else None
    return session.compact()
