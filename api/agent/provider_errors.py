"""What a person does about a failed model call: the agent's error text becomes a message naming the fix.

The agent reports a failed call as text ("Connection error.", "HTTP 401: …", "HTTP 404: The model `x`
does not exist …"). ``explain`` keeps that text and adds what to do: which URL could not be reached and
which file sets it, that the key was refused and where it is set, which models the endpoint offers.
``probe_endpoint`` asks the endpoint itself (``GET <base_url>/models``, through ``api.agent.endpoint_probe``);
``talaria doctor`` uses it too.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.agent import endpoint_probe
from api.agent.endpoint_probe import ProbeResult
from api.store import config

PROBE_TIMEOUT_S = 3.0
_MODELS_SHOWN = 20

_CONNECTION = re.compile(
    r"connection error|connection refused|connecterror|apiconnectionerror|failed to establish"
    r"|name or service not known|nodename nor servname|temporary failure in name resolution",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"\bHTTP 40[13]\b|error code: 40[13]\b|authentication|unauthori[sz]ed|invalid api key|incorrect api key",
    re.IGNORECASE,
)
_NO_MODEL = re.compile(
    r"model_not_found|model\b.*\b(does not exist|not found|unknown|not available|is not supported)"
    r"|unknown model|no such model|invalid model",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Endpoint:
    """The model endpoint a call went to, and the files a person edits to change it."""

    base_url: str
    model: str
    api_key: str | None = None

    @property
    def config_file(self) -> Path:
        return config.HERMES_HOME / "config.yaml"

    @property
    def env_file(self) -> Path:
        return config.HERMES_HOME / ".env"


def hermes_command() -> str:
    """The agent's own ``hermes`` command beside this Python (the venv's), else the bare name."""
    beside = Path(sys.executable).parent / "hermes"
    return str(beside) if beside.exists() else "hermes"


def endpoint_of(agent: Any) -> Endpoint | None:
    base_url = str(getattr(agent, "base_url", "") or "")
    if not base_url:
        return None
    return Endpoint(base_url, str(getattr(agent, "model", "") or ""), getattr(agent, "api_key", None) or None)


def classify(error_text: str) -> str | None:
    """connection, auth or unknown_model for the agent's error text; None for anything else."""
    if _AUTH.search(error_text):
        return "auth"
    if _NO_MODEL.search(error_text):
        return "unknown_model"
    if _CONNECTION.search(error_text):
        return "connection"
    return None


def probe_endpoint(endpoint: Endpoint) -> ProbeResult:
    """``GET <base_url>/models`` with the endpoint's key, within a few seconds."""
    return endpoint_probe.probe(
        endpoint.base_url.rstrip("/"), endpoint.api_key or "", timeout=PROBE_TIMEOUT_S
    )


def advice(kind: str, endpoint: Endpoint, probe: ProbeResult | None = None) -> str:
    """The fix for one kind of failure, naming the URL, the key's place or the models on offer."""
    where = f"`model.base_url` in {endpoint.config_file}"
    if kind in ("connection", "refused", "unreachable"):
        refused = kind == "refused" or (probe is not None and probe.kind == "refused")
        how = "the connection was refused" if refused else "it did not answer"
        return (
            f"Talaria cannot reach the model endpoint {endpoint.base_url} ({how}). "
            f"Start the model server, or correct {where}; `talaria doctor` checks it."
        )
    if kind == "auth":
        return (
            f"The model endpoint {endpoint.base_url} refused the API key. Set `model.api_key` in "
            f"{endpoint.config_file}, or the provider's key in {endpoint.env_file} "
            f"(`{hermes_command()} setup` writes either)."
        )
    if kind == "unknown_model":
        offered = ""
        if probe is not None and probe.models:
            shown = ", ".join(probe.models[:_MODELS_SHOWN])
            more = (
                f" and {len(probe.models) - _MODELS_SHOWN} more" if len(probe.models) > _MODELS_SHOWN else ""
            )
            offered = f" It offers: {shown}{more}."
        return (
            f"The model endpoint {endpoint.base_url} does not offer the model '{endpoint.model}'.{offered} "
            f"Set `model.default` in {endpoint.config_file}, or choose another model for this session."
        )
    return ""


def explain(
    error_text: str,
    endpoint: Endpoint | None,
    probe: Callable[[Endpoint], ProbeResult] = probe_endpoint,
) -> str:
    """The agent's error text, followed by what to do when it is a connection, key or model problem."""
    kind = classify(error_text or "")
    if kind is None or endpoint is None:
        return error_text
    found = probe(endpoint) if kind in ("connection", "unknown_model") else None
    if kind == "connection" and found is not None and found.kind in ("ok", "auth", "no_list"):
        return error_text  # the endpoint answers now: a passing network failure, nothing to fix here
    text = error_text.rstrip()
    return f"{text}{'' if text.endswith(('.', '!', '?')) else '.'} {advice(kind, endpoint, found)}"
