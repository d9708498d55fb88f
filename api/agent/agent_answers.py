"""What the agent answered that stays true until its config changes, kept by the app (``App.agent_answers``).

Whether a model's route takes a reasoning effort (a throwaway agent is asked), which toolsets cannot work here
(every tool's own check), and the model picker's choices (which can ask endpoints): each is costly to ask and
keyed by the agent's config stamp, so an edit of ``config.yaml`` or ``.env`` asks again.
"""

from __future__ import annotations

import threading
from typing import Any

from api.store.in_use import InUse


class AgentAnswers:
    """The answers one app keeps; ``lock`` guards all three."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (model, provider, config stamp) -> whether the route takes an effort
        self.reasoning: dict[tuple[str, str, str], bool] = {}
        # config stamp -> {toolset: why it cannot work}; only the current stamp is kept
        self.toolsets: dict[str, dict[str, str]] = {}
        # the picker's choices, when they were built, for which stamp, and the build in flight (a Future)
        self.catalog: dict[str, Any] = {"catalog": None, "built_at": 0.0, "stamp": "", "building": None}


ANSWERS: InUse[AgentAnswers] = InUse(AgentAnswers)  # the app's (``App.agent_answers``)
